package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/delegatelab/delegate"
)

// The Chat Completions wire format, server side.

type wireRequest struct {
	Model       string          `json:"model"`
	Messages    []wireMessage   `json:"messages"`
	Tools       []wireTool      `json:"tools"`
	ToolChoice  json.RawMessage `json:"tool_choice"`
	Temperature *float64        `json:"temperature"`
	TopP        *float64        `json:"top_p"`
	MaxTokens   *int            `json:"max_tokens"`
	// MaxCompletionTokens is the newer spelling of MaxTokens.
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"` // a string or a list of strings
	Seed                *int64          `json:"seed"`
	N                   int             `json:"n"`
	Logprobs            bool            `json:"logprobs"`
	TopLogprobs         int             `json:"top_logprobs"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// vLLM's extensions, both opt-in: tokens in logprobs spelled
	// "token_id:N", and the prompt's token ids in the response. Either
	// returns prompt_token_ids (delegate's own client asks with the first
	// and reads them).
	ReturnTokensAsTokenIDs bool `json:"return_tokens_as_token_ids"`
	ReturnTokenIDs         bool `json:"return_token_ids"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"` // a string, null, or a list of text parts
	Name       string          `json:"name,omitempty"`
	ToolCalls  []wireToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// badRequest is a 400 naming the offending field.
func badRequest(param, format string, args ...any) *apiErr {
	return &apiErr{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

// decodeRequest reads one chat completion request from body, which is
// limited to maxBody bytes (http.MaxBytesReader): a larger body is a 413,
// a body over the server's budget a 503, anything but exactly one JSON
// object (trailing data included) a 400.
func decodeRequest(body io.Reader, contentLength, maxBody int64) (*wireRequest, *apiErr) {
	if contentLength > maxBody {
		return nil, tooLarge(maxBody)
	}
	dec := json.NewDecoder(body)
	var req wireRequest
	err := dec.Decode(&req)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errTrailing
			if terr != nil && !isSyntax(terr) {
				err = terr
			}
		}
	}
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return &req, nil
	case errors.As(err, &mbe):
		return nil, tooLarge(maxBody)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &apiErr{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Message: "the request body did not arrive within the server's read timeout"}
	case errors.Is(err, errBodyBudget):
		return nil, &apiErr{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "server_overloaded", Message: "the server holds as many request bodies as it may; retry later"}
	case errors.Is(err, errTrailing):
		return nil, badRequest("", "request body is not a chat completion request: data after the JSON object")
	}
	return nil, badRequest("", "request body is not a chat completion request: %v", err)
}

var errTrailing = errors.New("data after the JSON object")

func isSyntax(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se)
}

func tooLarge(maxBody int64) *apiErr {
	return &apiErr{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
		Message: fmt.Sprintf("request body is larger than the server's limit of %d bytes", maxBody)}
}

func (r *wireRequest) toDelegate() (*delegate.Request, *apiErr) {
	if len(r.Messages) == 0 {
		return nil, badRequest("messages", "messages: at least one message is required")
	}
	if r.N < 0 || r.N > 64 {
		return nil, badRequest("n", "n: %d is outside 1..64", r.N)
	}
	if r.TopLogprobs < 0 || r.TopLogprobs > 20 {
		return nil, badRequest("top_logprobs", "top_logprobs: %d is outside 0..20", r.TopLogprobs)
	}
	if r.Temperature != nil && (*r.Temperature < 0 || *r.Temperature > 2) {
		return nil, badRequest("temperature", "temperature: %v is outside 0..2", *r.Temperature)
	}
	if r.TopP != nil && (*r.TopP < 0 || *r.TopP > 1) {
		return nil, badRequest("top_p", "top_p: %v is outside 0..1", *r.TopP)
	}
	if r.MaxTokens != nil && *r.MaxTokens < 0 {
		return nil, badRequest("max_tokens", "max_tokens: %d must not be negative", *r.MaxTokens)
	}
	if r.MaxCompletionTokens != nil && *r.MaxCompletionTokens < 0 {
		return nil, badRequest("max_completion_tokens", "max_completion_tokens: %d must not be negative", *r.MaxCompletionTokens)
	}
	if r.StreamOptions != nil && !r.Stream {
		return nil, badRequest("stream_options", "stream_options: only allowed with stream: true")
	}
	out := &delegate.Request{
		Temperature: r.Temperature, TopP: r.TopP, Seed: r.Seed, N: r.N,
		Logprobs: r.Logprobs || r.TopLogprobs > 0, TopLogprobs: r.TopLogprobs,
	}
	if r.MaxTokens != nil {
		out.MaxTokens = *r.MaxTokens
	}
	if r.MaxCompletionTokens != nil && *r.MaxCompletionTokens > 0 {
		out.MaxTokens = *r.MaxCompletionTokens
	}
	if len(r.ToolChoice) > 0 {
		var s string
		if json.Unmarshal(r.ToolChoice, &s) == nil {
			out.ToolChoice = s
		}
	}
	if len(r.Stop) > 0 && string(r.Stop) != "null" {
		var one string
		if err := json.Unmarshal(r.Stop, &one); err == nil {
			out.Stop = []string{one}
		} else if err := json.Unmarshal(r.Stop, &out.Stop); err != nil {
			return nil, badRequest("stop", "stop: want a string or a list of strings")
		}
	}
	for i, m := range r.Messages {
		dm := delegate.Message{Role: delegate.Role(m.Role), Name: m.Name, ToolCallID: m.ToolCallID}
		switch dm.Role {
		case delegate.RoleSystem, delegate.RoleUser, delegate.RoleAssistant, delegate.RoleTool, "developer":
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d].role: unknown role %q", i, m.Role)
		}
		if dm.Role == "developer" {
			dm.Role = delegate.RoleSystem
		}
		text, err := contentText(m.Content)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d].content: %v", i, err)
		}
		dm.Content = text
		for _, tc := range m.ToolCalls {
			dm.ToolCalls = append(dm.ToolCalls, delegate.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		out.Messages = append(out.Messages, dm)
	}
	for i, t := range r.Tools {
		if t.Type != "" && t.Type != "function" {
			return nil, badRequest(fmt.Sprintf("tools[%d].type", i), "tools[%d].type: only function tools are supported, got %q", i, t.Type)
		}
		if t.Function.Name == "" {
			return nil, badRequest(fmt.Sprintf("tools[%d].function.name", i), "tools[%d].function.name: required", i)
		}
		out.Tools = append(out.Tools, delegate.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return out, nil
}

// contentText accepts a string, null, or a list of {"type":"text","text":...}
// parts, and returns the text.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("want a string or a list of text parts")
	}
	text := ""
	for j, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("part %d: only text parts are supported, got %q", j, p.Type)
		}
		text += p.Text
	}
	return text, nil
}

type wireResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   *wireUsage   `json:"usage,omitempty"`
	// PromptTokenIDs as vLLM returns them, when asked.
	PromptTokenIDs []int `json:"prompt_token_ids,omitempty"`
	// PolicyVersion names the weights that produced the response (the
	// trainer step of a model that follows a trainer's checkpoint).
	PolicyVersion *int `json:"policy_version,omitempty"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func toWireUsage(u delegate.Usage) *wireUsage {
	w := &wireUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.Total()}
	w.PromptTokensDetails.CachedTokens = u.CachedTokens
	return w
}

type wireChoice struct {
	Index        int           `json:"index"`
	Message      wireOut       `json:"message"`
	FinishReason string        `json:"finish_reason"`
	Logprobs     *wireLogprobs `json:"logprobs"`
}

type wireOut struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type wireLogprobs struct {
	Content []wireTokenLogprob `json:"content"`
}

type wireTokenLogprob struct {
	Token       string             `json:"token"`
	Logprob     float64            `json:"logprob"`
	Bytes       []int              `json:"bytes"`
	TopLogprobs []wireTokenLogprob `json:"top_logprobs,omitempty"`
}

// promptIDs are the prompt token ids to return: only when the request
// asked for them (vLLM's return_token_ids or return_tokens_as_token_ids).
func (r *wireRequest) promptIDs(resp *delegate.Response) []int {
	if r.ReturnTokenIDs || r.ReturnTokensAsTokenIDs {
		return resp.PromptTokenIDs
	}
	return nil
}

func fromDelegate(r *delegate.Response, id string, created int64, req *wireRequest) wireResponse {
	out := wireResponse{ID: id, Object: "chat.completion", Created: created, Model: req.Model,
		PromptTokenIDs: req.promptIDs(r), Usage: toWireUsage(r.Usage), PolicyVersion: r.PolicyVersion}
	for i, c := range r.Choices {
		wc := wireChoice{Index: i, FinishReason: c.FinishReason, Message: wireOut{Role: "assistant"}}
		if c.Message.Content != "" || len(c.Message.ToolCalls) == 0 {
			text := c.Message.Content
			wc.Message.Content = &text
		}
		wc.Message.ToolCalls = wireCalls(c.Message.ToolCalls)
		wc.Logprobs = wireLogprobsOf(c.Logprobs, req.ReturnTokensAsTokenIDs)
		out.Choices = append(out.Choices, wc)
	}
	return out
}

func wireCalls(calls []delegate.ToolCall) []wireToolCall {
	var out []wireToolCall
	for _, tc := range calls {
		var w wireToolCall
		w.ID, w.Type = tc.ID, "function"
		w.Function.Name, w.Function.Arguments = tc.Name, tc.Arguments
		out = append(out, w)
	}
	return out
}

func wireLogprobsOf(lps []delegate.TokenLogprob, tokenIDs bool) *wireLogprobs {
	if lps == nil {
		return nil
	}
	out := &wireLogprobs{Content: make([]wireTokenLogprob, 0, len(lps))}
	for _, lp := range lps {
		wt := wireToken(lp.Token, lp.TokenID, lp.Logprob, tokenIDs)
		for _, t := range lp.Top {
			wt.TopLogprobs = append(wt.TopLogprobs, wireToken(t.Token, t.TokenID, t.Logprob, tokenIDs))
		}
		out.Content = append(out.Content, wt)
	}
	return out
}

func wireToken(token string, id int, logprob float64, tokenIDs bool) wireTokenLogprob {
	w := wireTokenLogprob{Token: token, Logprob: logprob, Bytes: make([]int, len(token))}
	for i := 0; i < len(token); i++ {
		w.Bytes[i] = int(token[i])
	}
	if tokenIDs && id >= 0 {
		w.Token = "token_id:" + strconv.Itoa(id)
	}
	return w
}
