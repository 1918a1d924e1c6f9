package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/openai/wire"
)

// This file turns delegate's requests into Chat Completions request bodies
// and response bodies back into delegate's responses; the format itself is
// package wire's.

// ErrKindRequest is the APIError type of a request the client cannot encode and refused to send.
// Examples are no messages or invalid tool parameters.
// Such errors are not retryable and have Status 0 and Attempts 0.
const ErrKindRequest = "request"

// encodeRequest turns req into the JSON body for model, checked against
// the format's rules (wire.ChatRequest.Validate). tokenIDs adds vLLM's
// return_tokens_as_token_ids when logprobs are requested.
func encodeRequest(model string, req *delegate.Request, tokenIDs bool) ([]byte, error) {
	if req == nil {
		return nil, errors.New("request is nil")
	}
	w := wire.ChatRequest{
		Model:       model,
		Messages:    make([]wire.Message, len(req.Messages)),
		ToolChoice:  wire.ToolChoice(req.ToolChoice),
		Temperature: req.Temperature,
		TopP:        req.TopP,
		MaxTokens:   req.MaxTokens,
		Stop:        req.Stop,
		Seed:        req.Seed,
		Logprobs:    req.Logprobs || req.TopLogprobs > 0,
		TopLogprobs: req.TopLogprobs,
	}
	if req.N != 1 {
		w.N = req.N
	}
	w.ReturnTokensAsTokenIDs = tokenIDs && w.Logprobs
	for i := range req.Messages {
		m := &req.Messages[i]
		wm := &w.Messages[i]
		wm.Role, wm.Name, wm.ToolCallID = string(m.Role), m.Name, m.ToolCallID
		if m.Content != "" || len(m.ToolCalls) == 0 {
			// A pointer into the caller's message: no text is copied. An
			// assistant message with tool calls and no text is sent as
			// "content": null, which strict servers require.
			wm.Content.Value = &m.Content
		}
		if len(m.ToolCalls) > 0 {
			wm.ToolCalls = make([]wire.ToolCall, len(m.ToolCalls))
			for j, tc := range m.ToolCalls {
				wm.ToolCalls[j] = wire.ToolCall{ID: tc.ID, Type: "function", Function: wire.Function{Name: tc.Name, Arguments: wire.Arguments(tc.Arguments)}}
			}
		}
	}
	if len(req.Tools) > 0 {
		w.Tools = make([]wire.Tool, len(req.Tools))
		for i, t := range req.Tools {
			w.Tools[i] = wire.Tool{Type: "function", Function: wire.FunctionDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters}}
			if req.StrictToolCalls {
				w.Tools[i].Function.Strict = &req.StrictToolCalls
			}
		}
	}
	encodeSampling(req, &w)
	if err := w.Validate(); err != nil {
		return nil, err
	}
	body, err := wire.AppendRequest(make([]byte, 0, encodedSize(&w)), &w)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return body, nil
}

// encodedSize is about the size of w's JSON without escapes, so that the
// body is allocated once.
func encodedSize(w *wire.ChatRequest) int {
	n := 256 + len(w.Model)
	for i := range w.Messages {
		m := &w.Messages[i]
		n += 48 + len(m.Role) + len(m.Name) + len(m.ToolCallID)
		if m.Content.Value != nil {
			n += len(*m.Content.Value)
		}
		for _, p := range m.Content.Parts {
			n += 24 + len(p.Type) + len(p.Text)
		}
		for _, tc := range m.ToolCalls {
			n += 64 + len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments)
		}
	}
	for _, t := range w.Tools {
		n += 64 + len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters)
	}
	return n
}

// encodeSampling sends the fields that constrain sampling as they are,
// for the server to enforce or refuse.
func encodeSampling(req *delegate.Request, w *wire.ChatRequest) {
	w.FrequencyPenalty, w.PresencePenalty = req.FrequencyPenalty, req.PresencePenalty
	w.ParallelToolCalls = req.ParallelToolCalls
	if len(req.LogitBias) > 0 {
		w.LogitBias = make(map[string]float64, len(req.LogitBias))
		for id, v := range req.LogitBias {
			w.LogitBias[strconv.Itoa(id)] = v
		}
	}
	if f := req.ResponseFormat; f != nil {
		w.ResponseFormat = &wire.ResponseFormat{Type: f.Type}
		if f.Type == wire.FormatJSONSchema {
			w.ResponseFormat.JSONSchema = &wire.JSONSchema{Name: f.Name, Schema: f.Schema, Strict: f.Strict}
		}
	}
}

// decodeError is a body that is not the response JSON we expect. readErr
// is true when the failure came from the reader (a broken connection), not
// from the JSON.
type decodeError struct {
	err     error
	readErr bool
}

func (e *decodeError) Error() string { return e.err.Error() }

func (e *decodeError) Unwrap() error { return e.err }

// maxResponseBytes bounds a response body; a larger one is a decode error.
// It is far above any real completion (a 128k-token answer with top-20
// logprobs is some 40 MiB).
const maxResponseBytes = 256 << 20

var errTooLarge = errors.New("response body too large")

// decodeResponse reads one Chat Completions response body from r. Every
// error it returns is a *decodeError, or a *serverError when the body is an
// error object instead of a response.
func decodeResponse(r io.Reader, fallbackModel string, tokenIDs bool) (*delegate.Response, error) {
	return decodeResponseLimit(r, -1, maxResponseBytes, fallbackModel, tokenIDs)
}

// decodeResponseLimit is decodeResponse for a body of size bytes (-1:
// unknown) and at most limit. It reads the body whole into a reused
// buffer and decodes that: a json.Decoder would grow a buffer of its own
// several times for every response. A body of the plain shape is read by
// wire.DecodeResponse, anything else by encoding/json.
func decodeResponseLimit(r io.Reader, size, limit int64, fallbackModel string, tokenIDs bool) (*delegate.Response, error) {
	buf := getBodyBuf(size, limit)
	defer putBodyBuf(buf)
	data, tail := readLimit(r, *buf, limit)
	*buf = data[:0]
	var w wire.ChatResponse
	decoded := tail == nil && wire.DecodeResponse(data, &w)
	if !decoded && tail == nil {
		w = wire.ChatResponse{}
		decoded = json.Unmarshal(data, &w) == nil
	}
	if !decoded {
		// Decode as a json.Decoder reading the body: the first JSON value
		// counts, and a read error or the limit matters only when it is
		// reached before that value ends.
		w = wire.ChatResponse{}
		t := &tailReader{err: tail}
		err := json.NewDecoder(io.MultiReader(bytes.NewReader(data), t)).Decode(&w)
		switch {
		case err == nil:
		case errors.Is(err, errTooLarge):
			return nil, &decodeError{err: fmt.Errorf("decode body: more than %d bytes: %w", limit, err)}
		case t.reached && tail != nil:
			return nil, &decodeError{err: fmt.Errorf("read body: %w", tail), readErr: true}
		default:
			return nil, &decodeError{err: fmt.Errorf("decode body: %w", err)}
		}
	}
	if w.Error != nil && len(w.Choices) == 0 {
		return nil, &serverError{detail: *w.Error}
	}
	return convertResponse(&w, fallbackModel, tokenIDs)
}

// readLimit appends r's bytes to buf, up to limit. tail is nil at EOF,
// errTooLarge once limit bytes are read (what follows is not looked at),
// or the read error that ended the body.
func readLimit(r io.Reader, buf []byte, limit int64) (data []byte, tail error) {
	for {
		if int64(len(buf)) >= limit {
			return buf, errTooLarge
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(limit-int64(len(buf)), int64(max(cap(buf), bytes.MinRead)))))
		}
		room := buf[len(buf):cap(buf)]
		if rest := limit - int64(len(buf)); int64(len(room)) > rest {
			room = room[:rest]
		}
		n, err := r.Read(room)
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return buf, err
		}
	}
}

// tailReader ends a body read whole: with io.EOF, or the error the body
// ended with. reached records that a reader got that far.
type tailReader struct {
	err     error
	reached bool
}

func (t *tailReader) Read([]byte) (int, error) {
	t.reached = true
	if t.err == nil {
		return 0, io.EOF
	}
	return 0, t.err
}

// maxPooledBody is the largest response buffer kept for reuse.
const maxPooledBody = 64 << 10

var bodyPool sync.Pool // of *[]byte

// getBodyBuf returns an empty buffer with room for a body of size bytes
// (when known and within limit) and the end of file after them.
func getBodyBuf(size, limit int64) *[]byte {
	want := bytes.MinRead
	if size >= 0 && size < limit {
		want = int(size) + 1
	}
	if b, ok := bodyPool.Get().(*[]byte); ok {
		if cap(*b) < want {
			*b = make([]byte, 0, want)
		}
		return b
	}
	b := make([]byte, 0, want)
	return &b
}

// putBodyBuf gives b back once nothing points into it. Every string of a
// decoded response is a copy.
func putBodyBuf(b *[]byte) {
	if cap(*b) <= maxPooledBody {
		*b = (*b)[:0]
		bodyPool.Put(b)
	}
}

// serverError is an error object found in a 2xx body.
type serverError struct{ detail wire.ErrorDetail }

func (e *serverError) Error() string { return "server error in response body: " + e.detail.Message }

func convertResponse(w *wire.ChatResponse, fallbackModel string, tokenIDs bool) (*delegate.Response, error) {
	if len(w.Choices) == 0 {
		return nil, &decodeError{err: errors.New("decode body: response has no choices")}
	}
	resp := &delegate.Response{ID: w.ID, Model: w.Model, PromptTokenIDs: w.PromptTokenIDs, PolicyVersion: w.PolicyVersion}
	if resp.Model == "" {
		resp.Model = fallbackModel
	}
	if u := w.Usage; u != nil {
		resp.Usage.PromptTokens = u.PromptTokens
		resp.Usage.CompletionTokens = u.CompletionTokens
		if u.PromptTokensDetails != nil {
			resp.Usage.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
		if u.PromptTokens < 0 || u.CompletionTokens < 0 || resp.Usage.CachedTokens < 0 {
			return nil, &decodeError{err: fmt.Errorf("decode body: negative usage %+v", resp.Usage)}
		}
	}
	// Servers list choices in index order; sort in case one does not.
	slices.SortStableFunc(w.Choices, func(a, b wire.Choice) int { return a.Index - b.Index })
	resp.Choices = make([]delegate.Choice, len(w.Choices))
	for i := range w.Choices {
		wc := &w.Choices[i]
		c := &resp.Choices[i]
		c.Message.Role = delegate.Role(wc.Message.Role)
		if c.Message.Role == "" {
			c.Message.Role = delegate.RoleAssistant
		}
		text, err := wc.Message.Content.Text()
		if err != nil {
			return nil, &decodeError{err: fmt.Errorf("decode body: choice %d: content: %w", i, err)}
		}
		c.Message.Content = text
		c.FinishReason = wc.FinishReason
		if n := len(wc.Message.ToolCalls); n > 0 {
			c.Message.ToolCalls = make([]delegate.ToolCall, n)
			for j, tc := range wc.Message.ToolCalls {
				id := tc.ID
				if id == "" {
					// Some local servers omit ids; a tool result must
					// name its call, so make one that is unique here.
					id = "call_" + strconv.Itoa(i) + "_" + strconv.Itoa(j)
				}
				c.Message.ToolCalls[j] = delegate.ToolCall{ID: id, Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)}
			}
		}
		if wc.Logprobs != nil && len(wc.Logprobs.Content) > 0 {
			lps, err := convertLogprobs(wc.Logprobs.Content, tokenIDs)
			if err != nil {
				return nil, &decodeError{err: fmt.Errorf("decode body: choice %d: %w", i, err)}
			}
			c.Logprobs = lps
		}
	}
	return resp, nil
}

func convertLogprobs(in []wire.Logprob, tokenIDs bool) ([]delegate.TokenLogprob, error) {
	out := make([]delegate.TokenLogprob, len(in))
	for i := range in {
		lp := &in[i]
		tok, id, err := parseToken(lp.Token, lp.Bytes, tokenIDs)
		if err != nil {
			return nil, fmt.Errorf("logprob %d: %w", i, err)
		}
		out[i] = delegate.TokenLogprob{Token: tok, TokenID: id, Logprob: lp.Logprob}
		if len(lp.TopLogprobs) > 0 {
			top := make([]delegate.TopLogprob, len(lp.TopLogprobs))
			for j := range lp.TopLogprobs {
				t := &lp.TopLogprobs[j]
				tok, id, err := parseToken(t.Token, t.Bytes, tokenIDs)
				if err != nil {
					return nil, fmt.Errorf("logprob %d: top %d: %w", i, j, err)
				}
				top[j] = delegate.TopLogprob{Token: tok, TokenID: id, Logprob: t.Logprob}
			}
			out[i].Top = top
		}
	}
	return out, nil
}

const tokenIDPrefix = "token_id:"

// parseToken returns a token's text and id. Without tokenIDs the id is -1.
// With tokenIDs, a "token_id:N" token yields id N and the text its bytes
// spell when the server sent them (and they are not just the "token_id:N"
// text again), else "".
func parseToken(token string, raw []byte, tokenIDs bool) (string, int, error) {
	if !tokenIDs || !strings.HasPrefix(token, tokenIDPrefix) {
		return token, -1, nil
	}
	id, err := strconv.Atoi(token[len(tokenIDPrefix):])
	if err != nil || id < 0 {
		return "", 0, fmt.Errorf("token %q: bad token id", truncate(token, 64))
	}
	text := ""
	if len(raw) > 0 && !bytes.Equal(raw, []byte(token)) {
		text = string(raw)
	}
	return text, id, nil
}

const (
	maxErrorCode    = 128
	maxErrorMessage = 512
)

// parseErrorBody extracts the type, code and message from an error body
// (wire.ParseError), cut to lengths fit for an error message.
func parseErrorBody(body []byte) wire.ErrorDetail {
	d := wire.ParseError(body)
	d.Message = truncate(d.Message, maxErrorMessage)
	d.Code = wire.Nullable(truncate(string(d.Code), maxErrorCode))
	d.Param = ""
	return d
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence
// and marks the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
