package delegate

import (
	"context"
	"encoding/json"
	"time"
)

// Request is one chat completion request. Pointer fields are optional: nil
// leaves the server's default in place.
type Request struct {
	Messages    []Message `json:"messages"`
	Tools       []Tool    `json:"tools,omitempty"`
	ToolChoice  string    `json:"tool_choice,omitempty"` // "", "auto", "none" or "required"
	Temperature *float64  `json:"temperature,omitempty"`
	TopP        *float64  `json:"top_p,omitempty"`
	MaxTokens   int       `json:"max_tokens,omitempty"` // 0: the backend's default
	Stop        []string  `json:"stop,omitempty"`
	Seed        *int64    `json:"seed,omitempty"`
	N           int       `json:"n,omitempty"` // 0 or 1: one choice
	// Logprobs asks for the logprob of every generated token.
	// Backends that can also return its token id.
	// TopLogprobs asks for that many alternatives.
	Logprobs    bool `json:"logprobs,omitempty"`
	TopLogprobs int  `json:"top_logprobs,omitempty"`
	// FrequencyPenalty and PresencePenalty lower the logits of tokens already generated.
	// They take OpenAI's range, -2 to 2.
	// LogitBias adds -100 to 100 to the logits of token ids.
	FrequencyPenalty *float64        `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64        `json:"presence_penalty,omitempty"`
	LogitBias        map[int]float64 `json:"logit_bias,omitempty"`
	// ParallelToolCalls false allows at most one tool call per reply.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
	// ResponseFormat asks for JSON content; nil means text.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// StrictToolCalls makes every call the model opens name a declared
	// tool, with arguments valid against its parameters. Local models
	// enforce it while sampling; the OpenAI client sends it as each
	// function's strict flag.
	StrictToolCalls bool `json:"strict_tool_calls,omitempty"`
}

// ResponseFormat is the form a reply's content must take.
type ResponseFormat struct {
	Type string `json:"type"` // "text", "json_object" or "json_schema"
	// Name and Schema are the json_schema's; Strict its strict flag.
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict *bool           `json:"strict,omitempty"`
}

// The response format types.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// Response is a model's answer to a Request.
type Response struct {
	ID      string   `json:"id,omitempty"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   Usage    `json:"usage"`
	// PromptTokenIDs are the ids of the prompt as the backend tokenized it,
	// when the backend returns them (local models, vLLM).
	PromptTokenIDs []int `json:"prompt_token_ids,omitempty"`
	// Latency is the wall time of the whole call, retries included.
	Latency time.Duration `json:"latency_ns"`
	// Retries counts the attempts after the first.
	Retries int `json:"retries,omitempty"`
	// Endpoint names the replica that answered, for a model served by
	// several (empty otherwise).
	Endpoint string `json:"endpoint,omitempty"`
	// PolicyVersion is the version of the weights that produced the response.
	// For a policy in training it is the trainer step. Nil when the backend does not say.
	PolicyVersion *int `json:"policy_version,omitempty"`
}

// Choice is one generated alternative.
type Choice struct {
	Message      Message `json:"message"`
	FinishReason string  `json:"finish_reason"` // "stop", "length", "tool_calls", ...
	// Logprobs has one entry per generated token, when requested and offered.
	Logprobs []TokenLogprob `json:"logprobs,omitempty"`
}

// TokenLogprob is the logprob of one generated token.
type TokenLogprob struct {
	Token   string       `json:"token"`
	TokenID int          `json:"token_id"` // -1 when the backend did not say
	Logprob float64      `json:"logprob"`
	Top     []TopLogprob `json:"top,omitempty"`
}

// TopLogprob is one alternative considered at a position.
type TopLogprob struct {
	Token   string  `json:"token"`
	TokenID int     `json:"token_id"`
	Logprob float64 `json:"logprob"`
}

// FinishLength is the finish reason of a generation cut by max_tokens.
const FinishLength = "length"

// Text returns the content of the first choice, or "" when there is none.
func (r *Response) Text() string {
	if r == nil || len(r.Choices) == 0 {
		return ""
	}
	return r.Choices[0].Message.Content
}

// Model is a chat model. Every backend implements it: the OpenAI-compatible
// HTTP client and the in-process transformer alike.
//
// Chat may be called from many goroutines at once. It returns when the
// response is complete or ctx is done; cancelling ctx stops the work in
// flight. A failure reported by a remote server is an *APIError.
type Model interface {
	// Name is the model's name as the backend knows it.
	Name() string
	Chat(ctx context.Context, req *Request) (*Response, error)
}
