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

	"github.com/delegatelab/delegate"
)

// This file holds the Chat Completions wire format: the request body the
// client sends and the response and error bodies it reads.

// ErrKindRequest is the APIError type of a request the client refused to
// send because it cannot be encoded (no messages, invalid tool parameters).
// Such errors are not retryable and have Status 0 and Attempts 0.
const ErrKindRequest = "request"

type wireRequest struct {
	Model       string        `json:"model"`
	Messages    []wireMessage `json:"messages"`
	Tools       []wireTool    `json:"tools,omitempty"`
	ToolChoice  any           `json:"tool_choice,omitempty"`
	Temperature *float64      `json:"temperature,omitempty"`
	TopP        *float64      `json:"top_p,omitempty"`
	MaxTokens   int           `json:"max_tokens,omitempty"`
	Stop        []string      `json:"stop,omitempty"`
	Seed        *int64        `json:"seed,omitempty"`
	N           int           `json:"n,omitempty"`
	Logprobs    bool          `json:"logprobs,omitempty"`
	TopLogprobs int           `json:"top_logprobs,omitempty"`
	TokenIDs    bool          `json:"return_tokens_as_token_ids,omitempty"`
}

// wireMessage is a message as sent. Content is a pointer so that an
// assistant message with tool calls and no text is sent as "content": null,
// which strict servers require; it points into the caller's message, so no
// text is copied.
type wireMessage struct {
	Role       delegate.Role  `json:"role"`
	Content    *string        `json:"content"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string   `json:"name"`
	Arguments argsText `json:"arguments"`
}

// wireTool wraps a delegate.Tool, whose JSON fields are already the wire
// format's name, description and parameters.
type wireTool struct {
	Type     string         `json:"type"`
	Function *delegate.Tool `json:"function"`
}

type namedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// encodeRequest turns req into the JSON body for model. tokenIDs adds
// vLLM's return_tokens_as_token_ids when logprobs are requested.
func encodeRequest(model string, req *delegate.Request, tokenIDs bool) ([]byte, error) {
	if req == nil {
		return nil, errors.New("request is nil")
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("request has no messages")
	}
	if req.N < 0 || req.MaxTokens < 0 || req.TopLogprobs < 0 {
		return nil, fmt.Errorf("request has a negative n (%d), max_tokens (%d) or top_logprobs (%d)", req.N, req.MaxTokens, req.TopLogprobs)
	}
	w := wireRequest{
		Model:       model,
		Messages:    make([]wireMessage, len(req.Messages)),
		Temperature: req.Temperature,
		TopP:        req.TopP,
		MaxTokens:   req.MaxTokens,
		Stop:        req.Stop,
		Seed:        req.Seed,
		Logprobs:    req.Logprobs || req.TopLogprobs > 0,
		TopLogprobs: req.TopLogprobs,
	}
	if req.N > 1 {
		w.N = req.N
	}
	w.TokenIDs = tokenIDs && w.Logprobs
	for i := range req.Messages {
		m := &req.Messages[i]
		wm := &w.Messages[i]
		wm.Role, wm.Name, wm.ToolCallID = m.Role, m.Name, m.ToolCallID
		if m.Content != "" || len(m.ToolCalls) == 0 {
			wm.Content = &m.Content
		}
		if len(m.ToolCalls) > 0 {
			wm.ToolCalls = make([]wireToolCall, len(m.ToolCalls))
			for j, tc := range m.ToolCalls {
				wm.ToolCalls[j] = wireToolCall{ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: argsText(tc.Arguments)}}
			}
		}
		if m.Role == delegate.RoleTool && m.ToolCallID == "" {
			return nil, fmt.Errorf("message %d: tool message without tool_call_id", i)
		}
	}
	if len(req.Tools) > 0 {
		w.Tools = make([]wireTool, len(req.Tools))
		for i := range req.Tools {
			t := &req.Tools[i]
			if t.Name == "" {
				return nil, fmt.Errorf("tool %d has no name", i)
			}
			if len(t.Parameters) > 0 && !json.Valid(t.Parameters) {
				return nil, fmt.Errorf("tool %q: parameters are not valid JSON", t.Name)
			}
			w.Tools[i] = wireTool{Type: "function", Function: t}
		}
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		w.ToolChoice = req.ToolChoice
	default:
		// Any other value names the one function the model must call.
		var c namedToolChoice
		c.Type = "function"
		c.Function.Name = req.ToolChoice
		w.ToolChoice = c
	}
	body, err := json.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return body, nil
}

// argsText is tool-call arguments. It marshals as a JSON string and
// unmarshals from a string or, as some local servers send it, from any
// other JSON value, which is kept as its JSON text.
type argsText string

func (a argsText) MarshalJSON() ([]byte, error) { return json.Marshal(string(a)) }

func (a *argsText) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = argsText(s)
	case string(b) == "null":
		*a = ""
	default:
		*a = argsText(b)
	}
	return nil
}

type wireResponse struct {
	ID             string       `json:"id"`
	Model          string       `json:"model"`
	Choices        []wireChoice `json:"choices"`
	Usage          *wireUsage   `json:"usage"`
	PromptTokenIDs []int        `json:"prompt_token_ids"`
	// PolicyVersion is delegate serve's word on the weights that answered.
	PolicyVersion *int `json:"policy_version"`
	// Error is set by proxies that answer 200 with an error body.
	Error *wireErrorDetail `json:"error"`
}

type wireChoice struct {
	Index        int              `json:"index"`
	Message      wireRespMessage  `json:"message"`
	FinishReason *string          `json:"finish_reason"`
	Logprobs     *wireLogprobList `json:"logprobs"`
}

type wireRespMessage struct {
	Role      delegate.Role  `json:"role"`
	Content   *string        `json:"content"`
	ToolCalls []wireToolCall `json:"tool_calls"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type wireLogprobList struct {
	Content []wireLogprob `json:"content"`
}

type wireLogprob struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       byteList         `json:"bytes"`
	TopLogprobs []wireTopLogprob `json:"top_logprobs"`
}

type wireTopLogprob struct {
	Token   string   `json:"token"`
	Logprob float64  `json:"logprob"`
	Bytes   byteList `json:"bytes"`
}

// byteList is the "bytes" field of a logprob: a JSON array of byte values
// (not base64, which is how encoding/json would read a []byte).
type byteList []byte

func (l *byteList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*l = nil
		return nil
	}
	var ints []int
	if err := json.Unmarshal(b, &ints); err != nil {
		return err
	}
	out := make([]byte, len(ints))
	for i, v := range ints {
		if v < 0 || v > 255 {
			return fmt.Errorf("byte %d out of range: %d", i, v)
		}
		out[i] = byte(v)
	}
	*l = out
	return nil
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

// recordingReader remembers the first error its reader returned other than
// io.EOF, so that a broken body is told apart from broken JSON, and stops
// with errTooLarge after left bytes.
type recordingReader struct {
	r    io.Reader
	left int64
	err  error
}

func (r *recordingReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.r.Read(p)
	r.left -= int64(n)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}

// decodeResponse reads one Chat Completions response body from r. Every
// error it returns is a *decodeError, or a *serverError when the body is an
// error object instead of a response.
func decodeResponse(r io.Reader, fallbackModel string, tokenIDs bool) (*delegate.Response, error) {
	return decodeResponseLimit(r, maxResponseBytes, fallbackModel, tokenIDs)
}

func decodeResponseLimit(r io.Reader, limit int64, fallbackModel string, tokenIDs bool) (*delegate.Response, error) {
	rr := &recordingReader{r: r, left: limit}
	var w wireResponse
	dec := json.NewDecoder(rr)
	if err := dec.Decode(&w); err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, &decodeError{err: fmt.Errorf("decode body: more than %d bytes: %w", limit, err)}
		}
		if rr.err != nil {
			return nil, &decodeError{err: fmt.Errorf("read body: %w", rr.err), readErr: true}
		}
		return nil, &decodeError{err: fmt.Errorf("decode body: %w", err)}
	}
	if w.Error != nil && len(w.Choices) == 0 {
		return nil, &serverError{detail: *w.Error}
	}
	return convertResponse(&w, fallbackModel, tokenIDs)
}

// serverError is an error object found in a 2xx body.
type serverError struct{ detail wireErrorDetail }

func (e *serverError) Error() string { return "server error in response body: " + e.detail.Message }

func convertResponse(w *wireResponse, fallbackModel string, tokenIDs bool) (*delegate.Response, error) {
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
	slices.SortStableFunc(w.Choices, func(a, b wireChoice) int { return a.Index - b.Index })
	resp.Choices = make([]delegate.Choice, len(w.Choices))
	for i := range w.Choices {
		wc := &w.Choices[i]
		c := &resp.Choices[i]
		c.Message.Role = wc.Message.Role
		if c.Message.Role == "" {
			c.Message.Role = delegate.RoleAssistant
		}
		if wc.Message.Content != nil {
			c.Message.Content = *wc.Message.Content
		}
		if wc.FinishReason != nil {
			c.FinishReason = *wc.FinishReason
		}
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

func convertLogprobs(in []wireLogprob, tokenIDs bool) ([]delegate.TokenLogprob, error) {
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

// wireErrorBody covers both error shapes: OpenAI's {"error":{...}} (also
// used by newer vLLM, SGLang, Ollama and llama.cpp) and older vLLM's flat
// {"object":"error","message",...}. Error may also be a bare string.
type wireErrorBody struct {
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    codeText        `json:"code"`
}

type wireErrorDetail struct {
	Message string   `json:"message"`
	Type    string   `json:"type"`
	Code    codeText `json:"code"`
}

// codeText is an error code that servers send as a string, a number or
// null; anything else is kept as its JSON text. It is cut to maxErrorCode
// bytes.
type codeText string

func (c *codeText) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		*c = ""
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = codeText(truncate(s, maxErrorCode))
	default:
		*c = codeText(truncate(string(b), maxErrorCode))
	}
	return nil
}

const maxErrorCode = 128

const maxErrorMessage = 512

// parseErrorBody extracts the type, code and message from an error body.
// A body that is not one of the known JSON shapes becomes the message,
// truncated.
func parseErrorBody(body []byte) wireErrorDetail {
	var w wireErrorBody
	if err := json.Unmarshal(body, &w); err == nil {
		if len(w.Error) > 0 && string(w.Error) != "null" {
			var d wireErrorDetail
			if json.Unmarshal(w.Error, &d) == nil {
				d.Message = truncate(d.Message, maxErrorMessage)
				return d
			}
			var s string
			if json.Unmarshal(w.Error, &s) == nil {
				return wireErrorDetail{Message: truncate(s, maxErrorMessage)}
			}
		}
		if w.Object == "error" || w.Message != "" || w.Type != "" {
			return wireErrorDetail{Message: truncate(w.Message, maxErrorMessage), Type: w.Type, Code: w.Code}
		}
	}
	return wireErrorDetail{Message: truncate(strings.TrimSpace(string(body)), maxErrorMessage)}
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
