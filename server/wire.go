package server

import (
	"encoding/json"
	"errors"
	"fmt"
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
	MaxTokens   int             `json:"max_tokens"`
	// MaxCompletionTokens is the newer spelling of MaxTokens.
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"` // a string or a list of strings
	Seed                *int64          `json:"seed"`
	N                   int             `json:"n"`
	Logprobs            bool            `json:"logprobs"`
	TopLogprobs         int             `json:"top_logprobs"`
	Stream              bool            `json:"stream"`
	// vLLM's extension: tokens in logprobs spelled "token_id:N".
	ReturnTokensAsTokenIDs bool `json:"return_tokens_as_token_ids"`
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

func (r *wireRequest) toDelegate() (*delegate.Request, error) {
	if r.Stream {
		return nil, errors.New("stream: true is not supported by this server; send stream: false")
	}
	if len(r.Messages) == 0 {
		return nil, errors.New("messages: at least one message is required")
	}
	if r.N < 0 || r.N > 64 {
		return nil, fmt.Errorf("n: %d is outside 1..64", r.N)
	}
	if r.TopLogprobs < 0 || r.TopLogprobs > 20 {
		return nil, fmt.Errorf("top_logprobs: %d is outside 0..20", r.TopLogprobs)
	}
	out := &delegate.Request{
		Temperature: r.Temperature, TopP: r.TopP, MaxTokens: r.MaxTokens, Seed: r.Seed, N: r.N,
		Logprobs: r.Logprobs || r.TopLogprobs > 0, TopLogprobs: r.TopLogprobs,
	}
	if r.MaxCompletionTokens > 0 {
		out.MaxTokens = r.MaxCompletionTokens
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
			return nil, errors.New("stop: want a string or a list of strings")
		}
	}
	for i, m := range r.Messages {
		dm := delegate.Message{Role: delegate.Role(m.Role), Name: m.Name, ToolCallID: m.ToolCallID}
		switch dm.Role {
		case delegate.RoleSystem, delegate.RoleUser, delegate.RoleAssistant, delegate.RoleTool, "developer":
		default:
			return nil, fmt.Errorf("messages[%d].role: unknown role %q", i, m.Role)
		}
		if dm.Role == "developer" {
			dm.Role = delegate.RoleSystem
		}
		text, err := contentText(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		dm.Content = text
		for _, tc := range m.ToolCalls {
			dm.ToolCalls = append(dm.ToolCalls, delegate.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		out.Messages = append(out.Messages, dm)
	}
	for i, t := range r.Tools {
		if t.Type != "" && t.Type != "function" {
			return nil, fmt.Errorf("tools[%d].type: only function tools are supported, got %q", i, t.Type)
		}
		if t.Function.Name == "" {
			return nil, fmt.Errorf("tools[%d].function.name: required", i)
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
	Usage   wireUsage    `json:"usage"`
	// PromptTokenIDs as vLLM returns them.
	PromptTokenIDs []int `json:"prompt_token_ids,omitempty"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
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

func fromDelegate(r *delegate.Response, created int64, tokenIDs bool) wireResponse {
	out := wireResponse{ID: r.ID, Object: "chat.completion", Created: created, Model: r.Model, PromptTokenIDs: r.PromptTokenIDs}
	if out.ID == "" {
		out.ID = "chatcmpl-local"
	}
	out.Usage.PromptTokens = r.Usage.PromptTokens
	out.Usage.CompletionTokens = r.Usage.CompletionTokens
	out.Usage.TotalTokens = r.Usage.Total()
	out.Usage.PromptTokensDetails.CachedTokens = r.Usage.CachedTokens
	for i, c := range r.Choices {
		wc := wireChoice{Index: i, FinishReason: c.FinishReason, Message: wireOut{Role: "assistant"}}
		if c.Message.Content != "" || len(c.Message.ToolCalls) == 0 {
			text := c.Message.Content
			wc.Message.Content = &text
		}
		for _, tc := range c.Message.ToolCalls {
			var w wireToolCall
			w.ID, w.Type = tc.ID, "function"
			w.Function.Name, w.Function.Arguments = tc.Name, tc.Arguments
			wc.Message.ToolCalls = append(wc.Message.ToolCalls, w)
		}
		if c.Logprobs != nil {
			wc.Logprobs = &wireLogprobs{Content: make([]wireTokenLogprob, 0, len(c.Logprobs))}
			for _, lp := range c.Logprobs {
				wt := wireToken(lp.Token, lp.TokenID, lp.Logprob, tokenIDs)
				for _, t := range lp.Top {
					wt.TopLogprobs = append(wt.TopLogprobs, wireToken(t.Token, t.TokenID, t.Logprob, tokenIDs))
				}
				wc.Logprobs.Content = append(wc.Logprobs.Content, wt)
			}
		}
		out.Choices = append(out.Choices, wc)
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
