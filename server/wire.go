package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/openai/wire"
)

// The server's side of the Chat Completions format (package wire): a
// request body decoded and turned into a delegate.Request, a response
// turned into the body sent back.

// badRequest is a 400 naming the offending field.
func badRequest(param, format string, args ...any) *apiErr {
	return &apiErr{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

// decodeRequest reads one chat completion request from body, limited to maxBody bytes.
// A larger body is a 413; a body over the server's budget is a 503.
// The body must then pass checkBody and be exactly one JSON object of the request's shape.
// A plain body is read by wire.DecodeRequest, any other by encoding/json.
// Otherwise it is a 400.
func decodeRequest(body io.Reader, contentLength, maxBody int64) (*wire.ChatRequest, *apiErr) {
	if contentLength > maxBody {
		return nil, tooLarge(maxBody)
	}
	var buf bytes.Buffer
	if contentLength > 0 {
		buf.Grow(int(contentLength) + bytes.MinRead) // one allocation: ReadFrom asks for MinRead more
	}
	_, err := buf.ReadFrom(body)
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
	case errors.As(err, &mbe):
		return nil, tooLarge(maxBody)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &apiErr{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Message: "the request body did not arrive within the server's read timeout"}
	case errors.Is(err, errBodyBudget):
		return nil, &apiErr{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "server_overloaded", Message: "the server holds as many request bodies as it may; retry later"}
	default:
		return nil, badRequest("", "request body unreadable: %v", err)
	}
	plain, e := checkBody(buf.Bytes())
	if e != nil {
		return nil, e
	}
	// An agent's plain request is read in one pass; a body of any other
	// key, or that DecodeRequest does not take, by encoding/json.
	var req wire.ChatRequest
	if plain && wire.DecodeRequest(buf.Bytes(), &req) {
		return &req, nil
	}
	req = wire.ChatRequest{}
	if err := json.Unmarshal(buf.Bytes(), &req); err != nil {
		var fe *wire.FieldError
		if errors.As(err, &fe) {
			return nil, badRequest(fe.Param, "%s", fe.Message)
		}
		return nil, notRequest(err)
	}
	return &req, nil
}

func tooLarge(maxBody int64) *apiErr {
	return &apiErr{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
		Message: fmt.Sprintf("request body is larger than the server's limit of %d bytes", maxBody)}
}

// toDelegate checks r against the format's rules and the server's bound
// on n, and returns it as a delegate.Request. A developer message becomes
// a system message.
func toDelegate(r *wire.ChatRequest, maxN int) (*delegate.Request, *apiErr) {
	if err := r.Validate(); err != nil {
		var fe *wire.FieldError
		if errors.As(err, &fe) {
			return nil, badRequest(fe.Param, "%s", fe.Message)
		}
		return nil, badRequest("", "%v", err)
	}
	if r.N > maxN {
		return nil, badRequest("n", "n: %d is more than this server's limit of %d", r.N, maxN)
	}
	out := &delegate.Request{
		Temperature: r.Temperature, TopP: r.TopP, Seed: r.Seed, N: r.N,
		Logprobs: r.Logprobs || r.TopLogprobs > 0, TopLogprobs: r.TopLogprobs,
		MaxTokens: r.MaxCompletion(), ToolChoice: string(r.ToolChoice), Stop: r.Stop,
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		dm := delegate.Message{Role: delegate.Role(m.Role), Name: m.Name, ToolCallID: m.ToolCallID}
		if m.Role == wire.RoleDeveloper {
			dm.Role = delegate.RoleSystem
		}
		dm.Content, _ = m.Content.Text() // Validate read it
		for _, tc := range m.ToolCalls {
			dm.ToolCalls = append(dm.ToolCalls, delegate.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)})
		}
		out.Messages = append(out.Messages, dm)
	}
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, delegate.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
		out.StrictToolCalls = out.StrictToolCalls || t.Function.Strict != nil && *t.Function.Strict
	}
	samplingToDelegate(r, out)
	return out, nil
}

// samplingToDelegate copies the fields that constrain sampling, which
// Validate checked; the model refuses what it cannot enforce.
func samplingToDelegate(r *wire.ChatRequest, out *delegate.Request) {
	out.FrequencyPenalty, out.PresencePenalty = r.FrequencyPenalty, r.PresencePenalty
	out.ParallelToolCalls = r.ParallelToolCalls
	if len(r.LogitBias) > 0 {
		out.LogitBias = make(map[int]float64, len(r.LogitBias))
		for k, v := range r.LogitBias {
			id, _ := strconv.Atoi(k) // Validate parsed it
			out.LogitBias[id] = v
		}
	}
	if f := r.ResponseFormat; f != nil && f.Type != wire.FormatText {
		out.ResponseFormat = &delegate.ResponseFormat{Type: f.Type}
		if s := f.JSONSchema; s != nil && f.Type == wire.FormatJSONSchema {
			out.ResponseFormat.Name, out.ResponseFormat.Schema, out.ResponseFormat.Strict = s.Name, s.Schema, s.Strict
		}
	}
}

func toWireUsage(u delegate.Usage) *wire.Usage {
	return &wire.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.Total(),
		PromptTokensDetails: &wire.PromptTokensDetails{CachedTokens: u.CachedTokens}}
}

// promptIDs are the prompt token ids to return: only when the request
// asked for them (vLLM's return_token_ids or return_tokens_as_token_ids).
func promptIDs(r *wire.ChatRequest, resp *delegate.Response) []int {
	if r.ReturnTokenIDs || r.ReturnTokensAsTokenIDs {
		return resp.PromptTokenIDs
	}
	return nil
}

func fromDelegate(r *delegate.Response, id string, created int64, req *wire.ChatRequest) wire.ChatResponse {
	out := wire.ChatResponse{ID: id, Object: "chat.completion", Created: created, Model: req.Model,
		PromptTokenIDs: promptIDs(req, r), Usage: toWireUsage(r.Usage), PolicyVersion: r.PolicyVersion}
	for i, c := range r.Choices {
		wc := wire.Choice{Index: i, FinishReason: c.FinishReason, Message: wire.Message{Role: wire.RoleAssistant}}
		if c.Message.Content != "" || len(c.Message.ToolCalls) == 0 {
			text := c.Message.Content
			wc.Message.Content.Value = &text
		}
		wc.Message.ToolCalls = wireCalls(c.Message.ToolCalls)
		wc.Logprobs = wireLogprobsOf(c.Logprobs, req.ReturnTokensAsTokenIDs)
		out.Choices = append(out.Choices, wc)
	}
	return out
}

func wireCalls(calls []delegate.ToolCall) []wire.ToolCall {
	var out []wire.ToolCall
	for _, tc := range calls {
		out = append(out, wire.ToolCall{ID: tc.ID, Type: "function", Function: wire.Function{Name: tc.Name, Arguments: wire.Arguments(tc.Arguments)}})
	}
	return out
}

func wireLogprobsOf(lps []delegate.TokenLogprob, tokenIDs bool) *wire.Logprobs {
	if lps == nil {
		return nil
	}
	out := &wire.Logprobs{Content: make([]wire.Logprob, 0, len(lps))}
	for _, lp := range lps {
		wt := wireToken(lp.Token, lp.TokenID, lp.Logprob, tokenIDs)
		for _, t := range lp.Top {
			wt.TopLogprobs = append(wt.TopLogprobs, wireToken(t.Token, t.TokenID, t.Logprob, tokenIDs))
		}
		out.Content = append(out.Content, wt)
	}
	return out
}

func wireToken(token string, id int, logprob float64, tokenIDs bool) wire.Logprob {
	w := wire.Logprob{Token: token, Logprob: logprob, Bytes: wire.Bytes(token)}
	if tokenIDs && id >= 0 {
		w.Token = "token_id:" + strconv.Itoa(id)
	}
	return w
}
