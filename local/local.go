// Package local makes a transformer of package nn an ordinary delegate.Model.
// A request's messages and tools are rendered with the tokenizer's chat
// template. The continuous-batching engine generates the reply, and
// concurrent calls share its forward passes. The reply is parsed back into
// an assistant message with its tool calls. Usage counts come from our own
// tokenizer, and every generated token carries its logprob and id.
// ChatStream hands out the content as it is generated, for a streaming
// server.
package local

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/tokenizer"
)

// Config sets how a local model serves requests. Start from DefaultConfig:
// a zero field means zero, and Validate refuses a zero that makes no sense.
type Config struct {
	// Name is the model's name in traces and on the HTTP API. Required.
	Name string
	// MaxNew caps the tokens of a reply when a request sets no max_tokens.
	// 0 sets no cap: a reply may run to the end of the context.
	MaxNew int
	// MaxBatch is the number of sequences decoded together. At least 1.
	MaxBatch int
	// Seed seeds requests that carry no seed of their own.
	// Request i of the model's life gets Seed+i, so a run is reproducible end
	// to end.
	Seed uint64
	// Tools replaces the declaration of an offered tool by the one of the
	// same name here. The world's models were trained on a compact
	// declaration of the delegate tool, which clients declare their own
	// way. The caller's request is not modified.
	Tools map[string]delegate.Tool
}

// DefaultConfig returns the defaults: 32 sequences decoded together and
// no cap of its own on a reply. Name is left to set.
func DefaultConfig() Config {
	return Config{MaxBatch: 32}
}

// Validate reports the first invalid field, naming it.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("local model: a name is required")
	case c.MaxNew < 0:
		return fmt.Errorf("local model %s: max_new %d is negative", c.Name, c.MaxNew)
	case c.MaxBatch < 1:
		return fmt.Errorf("local model %s: max_batch %d: want at least 1", c.Name, c.MaxBatch)
	}
	return nil
}

// Model is a local transformer behind the delegate.Model interface. It is
// safe for concurrent use; Close stops its engine.
type Model struct {
	cfg    Config
	params *nn.Params // nil for an imported checkpoint (NewHF)
	engine *infer.Engine
	codec  codec
	limit  int // the context: prompt and generation together
	// calls counts the requests of the model's life, to seed those without one.
	// A Reloading model's versions share one.
	calls *atomic.Uint64
	// syms is the vocabulary as constrain's symbols, made on the first
	// constrained request.
	syms struct {
		once sync.Once
		v    *vocabSyms
	}
	// memo, when set, holds the responses of a memoized model (Memoized).
	memo *memo
}

// New starts a model over p. The caller must not modify p while calls are
// in flight (a trainer updates it between batches of calls).
func New(p *nn.Params, cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if p.Config.Vocab < tokenizer.VocabSize {
		return nil, fmt.Errorf("local model %s: vocabulary %d is smaller than the tokenizer's %d", cfg.Name, p.Config.Vocab, tokenizer.VocabSize)
	}
	e, err := infer.NewEngine(p, engineConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("local model %s: %w", cfg.Name, err)
	}
	return &Model{cfg: cfg, params: p, engine: e, codec: builtin{}, limit: p.Config.Context, calls: new(atomic.Uint64)}, nil
}

// engineConfig is the engine of cfg: the engine's defaults with cfg's batch.
func engineConfig(cfg Config) infer.EngineConfig {
	ec := infer.DefaultEngineConfig()
	ec.MaxBatch = cfg.MaxBatch
	return ec
}

// NewHF starts a model over w, a Hugging Face checkpoint from infer.LoadHF.
// It renders requests with the chat template f and tokenizes them with t.
// Generation ends at the template's end of turn or at any id in eos,
// config.json's eos_token_id. The weights are only read, so several models
// may share them.
func NewHF(w *infer.Weights, t *tokenizer.HF, f tokenizer.ChatFormat, eos []int, cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if t.VocabSize() > w.Config().Vocab {
		return nil, fmt.Errorf("local model %s: vocabulary %d is smaller than the tokenizer's %d", cfg.Name, w.Config().Vocab, t.VocabSize())
	}
	c, err := newHFCodec(t, f, eos)
	if err != nil {
		return nil, fmt.Errorf("local model %s: %w", cfg.Name, err)
	}
	e, err := infer.NewEngineWeights(w, engineConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("local model %s: %w", cfg.Name, err)
	}
	return &Model{cfg: cfg, engine: e, codec: c, limit: w.Config().Context, calls: new(atomic.Uint64)}, nil
}

// Memory reports what the model's engine holds: the weights and the KV
// cache.
func (m *Model) Memory() infer.EngineMemory { return m.engine.Memory() }

// Name returns the configured name.
func (m *Model) Name() string { return m.cfg.Name }

// Params returns the weights the model samples from; nil for an imported
// checkpoint (NewHF), whose weights are not trainable Params.
func (m *Model) Params() *nn.Params { return m.params }

// Stats returns the engine's counters.
func (m *Model) Stats() infer.EngineStats { return m.engine.Stats() }

// declare returns req with Config.Tools in place of offered tools of the same name.
// It returns a copy when any is replaced.
func (m *Model) declare(req *delegate.Request) *delegate.Request {
	if len(m.cfg.Tools) == 0 || !slices.ContainsFunc(req.Tools, func(t delegate.Tool) bool { _, ok := m.cfg.Tools[t.Name]; return ok }) {
		return req
	}
	r := *req
	r.Tools = make([]delegate.Tool, len(req.Tools))
	for i, t := range req.Tools {
		if d, ok := m.cfg.Tools[t.Name]; ok {
			t = d
		}
		r.Tools[i] = t
	}
	return &r
}

// Close stops the engine; calls in flight fail.
func (m *Model) Close() error { return m.engine.Close() }

// Chat renders req with the chat template and generates req.N replies
// (default 1) in one batch. A prompt that does not fit the context is an
// *delegate.APIError with status 400, like a remote server's. Each choice's
// Logprobs cover every generated token, the closing <|end|> included, since
// the policy generated it. Its message content does not show that token.
func (m *Model) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	if m.memo != nil {
		return m.memo.chat(ctx, req, func() (*delegate.Response, error) { return m.chat(ctx, req, nil) })
	}
	return m.chat(ctx, req, nil)
}

// ChatStream is Chat that also hands out each choice's content as it is generated.
// emit gets a choice's index and the next piece of its content, in order.
// It runs on the goroutine that called ChatStream, never after ChatStream
// returns. A choice's pieces put together are a prefix of its final
// Message.Content. Text that could still start a stop sequence, or an
// incomplete UTF-8 character, is held back. Nothing is handed out after a
// tool call begins; the calls, and any content after them, come in the
// response.
func (m *Model) ChatStream(ctx context.Context, req *delegate.Request, emit func(choice int, text string)) (*delegate.Response, error) {
	return m.chat(ctx, req, emit)
}

func (m *Model) chat(ctx context.Context, req *delegate.Request, emit func(choice int, text string)) (*delegate.Response, error) {
	start := time.Now()
	req = m.declare(req)
	gen := infer.GenRequest{
		MaxNew:      m.cfg.MaxNew,
		Temperature: 1,
		StopTokens:  m.codec.stops(),
		TopLogprobs: req.TopLogprobs,
	}
	tools, newConstraint, err := m.sampling(req, &gen)
	if err != nil {
		return nil, err
	}
	prompt, err := m.encodePrompt(req, tools)
	if err != nil {
		return nil, err
	}
	n := max(req.N, 1)
	seed := m.cfg.Seed + m.calls.Add(1) - 1
	if req.Seed != nil {
		seed = uint64(*req.Seed)
	}
	gen.Prompt = prompt
	if err := m.applyOptions(req, &gen); err != nil {
		return nil, err
	}
	reqs := make([]infer.GenRequest, n)
	for i := range reqs {
		reqs[i] = gen
		reqs[i].Seed = seed + uint64(i)*0x9e3779b97f4a7c15
		if newConstraint != nil {
			reqs[i].Constraint = newConstraint()
		}
	}
	results, err := generate(ctx, m.engine, m.codec, reqs, req.Stop, emit)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &delegate.APIError{Type: delegate.ErrKindCanceled, Model: m.cfg.Name, Attempts: 1, Message: ctx.Err().Error()}
		}
		return nil, &delegate.APIError{Status: 500, Type: "server_error", Model: m.cfg.Name, Attempts: 1, Message: err.Error()}
	}
	resp := &delegate.Response{
		ID:             fmt.Sprintf("local-%d", seed),
		Model:          m.cfg.Name,
		PromptTokenIDs: prompt,
		Usage:          delegate.Usage{PromptTokens: len(prompt)},
	}
	for i, r := range results {
		resp.Usage.CompletionTokens += len(r.Tokens)
		resp.Choices = append(resp.Choices, m.choice(r, req.Logprobs, seed, i))
	}
	resp.Latency = time.Since(start)
	return resp, nil
}

// encodePrompt renders req's messages and tools as the prompt's tokens. It
// refuses a prompt that does not leave room in the context for a token.
func (m *Model) encodePrompt(req *delegate.Request, tools []delegate.Tool) ([]int, error) {
	limit := m.limit
	rendered := *req
	rendered.Tools = tools
	// A lower bound of the prompt's tokens: a request far over the context
	// is refused before any work proportional to its size.
	if n := m.codec.minTokens(&rendered); n >= limit {
		return nil, &delegate.APIError{Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Model: m.cfg.Name, Attempts: 1,
			Message: fmt.Sprintf("prompt is at least %d tokens; the context holds %d", n, limit)}
	}
	prompt, err := m.codec.prompt(req.Messages, tools)
	if err != nil {
		return nil, &delegate.APIError{Status: 400, Type: "invalid_request_error", Model: m.cfg.Name, Attempts: 1, Message: err.Error()}
	}
	if len(prompt) >= limit {
		return nil, &delegate.APIError{Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Model: m.cfg.Name, Attempts: 1,
			Message: fmt.Sprintf("prompt is %d tokens; the context holds %d", len(prompt), limit)}
	}
	return prompt, nil
}

// applyOptions sets gen's length, temperature, top_p and stop sequences from
// req, and refuses values out of range.
func (m *Model) applyOptions(req *delegate.Request, gen *infer.GenRequest) error {
	if req.MaxTokens > 0 {
		gen.MaxNew = req.MaxTokens
	}
	if req.Temperature != nil {
		gen.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		gen.TopP = *req.TopP
	}
	if gen.Temperature < 0 || math.IsNaN(gen.Temperature) || math.IsInf(gen.Temperature, 0) {
		return &delegate.APIError{Status: 400, Type: "invalid_request_error", Model: m.cfg.Name, Attempts: 1,
			Message: fmt.Sprintf("temperature %v is out of range (want a finite value at least 0)", gen.Temperature)}
	}
	if !(gen.TopP >= 0 && gen.TopP <= 1) {
		return &delegate.APIError{Status: 400, Type: "invalid_request_error", Model: m.cfg.Name, Attempts: 1,
			Message: fmt.Sprintf("top_p %v is out of range (want 0..1)", gen.TopP)}
	}
	if req.MaxTokens < 0 {
		return &delegate.APIError{Status: 400, Type: "invalid_request_error", Model: m.cfg.Name, Attempts: 1,
			Message: fmt.Sprintf("max_tokens %d must not be negative", req.MaxTokens)}
	}
	for _, s := range req.Stop {
		if s != "" {
			gen.StopSeqs = append(gen.StopSeqs, m.codec.encode(s))
		}
	}
	return nil
}

func (m *Model) choice(r infer.GenResult, logprobs bool, seed uint64, idx int) delegate.Choice {
	body := r.Tokens[:len(r.Tokens)-r.StopLen]
	msg := m.codec.parse(body)
	for j := range msg.ToolCalls {
		// Ids unique across a conversation, as remote APIs give them.
		msg.ToolCalls[j].ID = fmt.Sprintf("call_%x_%d_%d", seed, idx, j)
	}
	c := delegate.Choice{Message: msg, FinishReason: r.Finish}
	if len(msg.ToolCalls) > 0 && r.Finish == infer.FinishStop {
		c.FinishReason = "tool_calls"
	}
	if logprobs {
		c.Logprobs = make([]delegate.TokenLogprob, len(r.Tokens))
		for j, id := range r.Tokens {
			lp := delegate.TokenLogprob{Token: m.codec.piece(id), TokenID: id, Logprob: float64(r.Logprobs[j])}
			if r.Top != nil {
				for _, t := range r.Top[j] {
					lp.Top = append(lp.Top, delegate.TopLogprob{Token: m.codec.piece(t.Token), TokenID: t.Token, Logprob: float64(t.Logprob)})
				}
			}
			c.Logprobs[j] = lp
		}
	}
	return c
}

// textBytes counts the bytes of the text a request's prompt encodes one token per byte.
// That text is message contents, assistants' tool calls, and tool names,
// descriptions and parameters. The chat template adds only control tokens
// and JSON punctuation to these, so the prompt has at least this many
// tokens. Parameters count without white space, which the template's
// compaction may drop.
func textBytes(req *delegate.Request) int {
	n := 0
	for _, m := range req.Messages {
		n += len(m.Content)
		if m.Role != delegate.RoleAssistant {
			continue // the template renders only an assistant's calls
		}
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(strings.TrimSpace(c.Arguments)) // blank arguments render as {}
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description)
		for _, b := range t.Parameters {
			if b != ' ' && b != '\t' && b != '\n' && b != '\r' {
				n++
			}
		}
	}
	return n
}
