package gateway

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/delegatelab/delegate"
)

// FinishedVersion is the format version of a stored Finished session. A
// reader that meets another version fails naming both.
const FinishedVersion = 1

// session is a live session. Its id never leaves it but for the answer
// to POST /sessions.
type session struct {
	id, key  string
	task     delegate.Task
	group    string
	metadata map[string]string
	created  time.Time
	expires  time.Time
	// policyVersion is the trainer's step when the session started,
	// with Config.Sink.
	policyVersion *int

	mu sync.Mutex
	// calls are held by pointer: growing the list then copies pointers,
	// not records of hundreds of bytes.
	calls   []*Call
	done    bool // a reward was given, or the session expired
	dropped int  // calls answered after done, not recorded
	// generating counts the choices admitted and not yet recorded. bytes
	// estimates what the calls hold, those generating included. released
	// says bytes left the gateway's total when the session ended.
	generating int
	bytes      int64
	released   bool
	// refused counts the calls refused by a bound; refusedBy says which
	// bounds have a refusal recorded.
	refused   int
	refusedBy map[string]bool
}

// inflight is what the hook needs of a request handed to the server.
type inflight struct {
	s *session
	w http.ResponseWriter
}

// Call is the record of one generated choice of a session. It holds what
// the model was asked and answered, its token ids and logprobs, and its
// account. A request with n > 1 choices is n calls, which are forks.
type Call struct {
	Index int    `json:"index"`
	Role  string `json:"role"`
	// Trained says whether the role's calls become samples.
	Trained bool   `json:"trained"`
	Model   string `json:"model"`
	// Choice is the choice's index in its response.
	Choice int `json:"choice,omitempty"`
	// Request is the request the model got, default system prompt added.
	Request      delegate.Request `json:"request"`
	Output       delegate.Message `json:"output"`
	FinishReason string           `json:"finish_reason"`
	// PromptTokenIDs, CompletionTokenIDs and Logprobs come from the
	// backend. They are the prompt as tokenized, the generated ids with any
	// closing end-of-turn token, and the logprob of each.
	PromptTokenIDs     []int     `json:"prompt_token_ids,omitempty"`
	CompletionTokenIDs []int     `json:"completion_token_ids,omitempty"`
	Logprobs           []float64 `json:"logprobs,omitempty"`
	// NoTokens says why the ids are missing ("" when they are there).
	// It starts with "drift: " when the backend's ids disagree with the
	// model's chat template (Config.Tokenizers).
	NoTokens string `json:"no_tokens,omitempty"`
	// TokenizedBy is TokenizedByGateway when the gateway computed the ids
	// with the model's chat template; "" when the backend gave them.
	TokenizedBy string `json:"tokenized_by,omitempty"`
	// TemplateHash is the chat-template hash of the model (Config.Templates).
	TemplateHash  string        `json:"chat_template_hash,omitempty"`
	PolicyVersion *int          `json:"policy_version,omitempty"`
	Start         time.Time     `json:"start"`
	Latency       time.Duration `json:"latency_ns"` // request decoded to response ready, queue included
	ModelLatency  time.Duration `json:"model_latency_ns"`
	// Usage and Cost are the response's; with n > 1 they go on choice 0.
	Usage delegate.Usage `json:"usage"`
	Cost  float64        `json:"cost"`
	// Failed says the call has no answer: the backend failed it (an
	// error status, a timeout, a lost connection, the client gone) or the
	// gateway refused it at a bound. Status is the HTTP status answered
	// and Error the error's text, without credentials. A failed call
	// makes no sample. A refused call keeps no request.
	Failed bool   `json:"failed,omitempty"`
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Finished is a session ended with a reward, as the store keeps it.
type Finished struct {
	Version  int               `json:"version"`
	Key      string            `json:"key"` // the digest of the id
	Task     delegate.Task     `json:"task"`
	Group    string            `json:"group"`
	Metadata map[string]string `json:"metadata,omitempty"`
	Created  time.Time         `json:"created"`
	Finished time.Time         `json:"finished"`
	Reward   float64           `json:"reward"`
	Correct  *bool             `json:"correct,omitempty"`
	// Terms are the inputs of a reward computed by Config.Reward; nil
	// for a reward given, or 1 or 0 from the verifier.
	Terms *Terms `json:"terms,omitempty"`
	// PolicyVersion is the trainer's step when the session started, with
	// Config.Sink: the group's policy version when no call has one.
	PolicyVersion *int     `json:"policy_version,omitempty"`
	Calls         []Call   `json:"calls"`
	Samples       []Sample `json:"samples"`
	// Refused counts the calls refused at a bound. The first refusal by
	// each bound is also among Calls, failed.
	Refused int `json:"refused,omitempty"`
}

// hook is the server's Hook. It asks every generation for logprobs and
// records its choices in the request's session, or its failure. The
// client gets logprobs only when it asked. A trained role's call samples
// at Config.Temperature when it is set. A call that would pass a bound is
// refused (admit).
func (g *Gateway) hook(r *http.Request, model string, req *delegate.Request) (func(*delegate.Response, error), error) {
	v, ok := g.inflight.Load(r)
	if !ok {
		return nil, nil // never: every request reaching the server comes through agent
	}
	in := v.(inflight)
	s := in.s
	role := r.Header.Get(RoleHeader)
	if role == "" {
		role = g.cfg.Roles[model]
	}
	if role == "" {
		role = model
	}
	trained := len(g.cfg.Trained) == 0 || slices.Contains(g.cfg.Trained, role)
	asked := req.Logprobs
	req.Logprobs = true
	if t := g.cfg.Temperature; t != nil && trained {
		temp := *t
		req.Temperature = &temp
	}
	sent := *req // the model may not change req, but the client's view is kept apart
	sent.Messages = slices.Clone(req.Messages)
	sent.Tools = slices.Clone(req.Tools)
	sent.Logprobs = asked
	start := g.cfg.Now()
	base := Call{Role: role, Trained: trained, Model: model, Request: sent, TemplateHash: g.cfg.Templates[model], Start: start.UTC()}
	n, reserved := max(req.N, 1), requestBytes(&sent)
	if err := g.admit(s, in.w, &base, n, reserved); err != nil {
		return nil, err
	}
	return func(resp *delegate.Response, err error) {
		latency := g.cfg.Now().Sub(start)
		var calls []Call
		if err != nil {
			k := base
			k.Latency, k.Failed = latency, true
			k.Status, k.Error = failure(err)
			k.Error = secretFree(strings.ReplaceAll(k.Error, s.id, "[session]"))
			calls = []Call{k}
			g.metrics.failed.Inc()
		} else {
			calls = make([]Call, len(resp.Choices))
			for i, c := range resp.Choices {
				k := &calls[i]
				*k = base
				k.Choice, k.Output, k.FinishReason, k.PromptTokenIDs = i, c.Message, c.FinishReason, resp.PromptTokenIDs
				k.PolicyVersion, k.Latency, k.ModelLatency = resp.PolicyVersion, latency, resp.Latency
				if i == 0 {
					k.Usage = resp.Usage
					k.Cost = g.cfg.Prices[model].Cost(resp.Usage)
				}
				k.CompletionTokenIDs, k.Logprobs, k.NoTokens = tokens(resp.PromptTokenIDs, c.Logprobs)
				if tok := g.cfg.Tokenizers[model]; tok != nil {
					tokenize(tok, k, c.Logprobs)
					if strings.HasPrefix(k.NoTokens, "drift: ") {
						g.log.Error("a call's token ids drift from the chat template: its sample is not trained", "model", model, "role", role, "why", k.NoTokens)
					}
				}
				if !asked {
					resp.Choices[i].Logprobs = nil
				}
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.generating -= n
		if s.done {
			g.addHeld(s, -reserved) // a reward may still fail and the session go on
			s.dropped += len(calls)
			g.log.Warn("a call answered after its session ended is not recorded", "session", short(s.key), "dropped", s.dropped)
			return
		}
		g.addHeld(s, recordBytes(calls)-reserved)
		for i := range calls {
			calls[i].Index = len(s.calls)
			s.calls = append(s.calls, &calls[i])
		}
	}, nil
}

// failure returns the status and text of a failed call's error.
func failure(err error) (int, string) {
	var ae *delegate.APIError
	if errors.As(err, &ae) {
		msg := ae.Message
		if ae.Code != "" {
			msg = ae.Code + ": " + msg
		}
		return ae.Status, msg
	}
	return http.StatusInternalServerError, err.Error()
}

// callList copies the session's calls; the caller holds s.mu.
func (s *session) callList() []Call {
	out := make([]Call, len(s.calls))
	for i, c := range s.calls {
		out[i] = *c
	}
	return out
}

// tokens returns a choice's generated ids and logprobs, or why the
// backend did not give them.
func tokens(prompt []int, lps []delegate.TokenLogprob) (ids []int, logprobs []float64, why string) {
	if len(prompt) == 0 {
		return nil, nil, "the backend returned no prompt token ids"
	}
	if len(lps) == 0 {
		return nil, nil, "the backend returned no logprobs"
	}
	ids, logprobs = make([]int, len(lps)), make([]float64, len(lps))
	for i, lp := range lps {
		if lp.TokenID < 0 {
			return nil, nil, "the backend returned logprobs without token ids"
		}
		ids[i], logprobs[i] = lp.TokenID, lp.Logprob
	}
	return ids, logprobs, ""
}
