// Package wire is OpenAI's Chat Completions JSON format and its request rules.
// It holds the request, response, streaming chunk and error bodies, and
// Validate, the rules a well-formed request obeys. The client in openai,
// the server in server and the stand-in in standin share this definition.
// So what one sends, the others read the same way. Reading is lenient where
// servers in the wild differ from OpenAI, as Arguments and Nullable say.
// The package imports only the standard library.
package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// MaxN is the largest n OpenAI's API accepts.
const MaxN = 128

// MaxTopLogprobs is the largest top_logprobs OpenAI's API accepts.
const MaxTopLogprobs = 20

// MaxStop is the most stop sequences OpenAI's API accepts.
const MaxStop = 4

// MaxTools is the most tools OpenAI's API accepts in one request.
const MaxTools = 128

// ChatRequest is a Chat Completions request body. The fields after
// TopLogprobs are extensions. Stream and StreamOptions are OpenAI's
// streaming switch. ReturnTokensAsTokenIDs and ReturnTokenIDs are vLLM's
// opt-ins: they spell tokens in logprobs as "token_id:N" and return the
// prompt's token ids in the response.
type ChatRequest struct {
	Model       string     `json:"model"`
	Messages    []Message  `json:"messages"`
	Tools       []Tool     `json:"tools,omitempty"`
	ToolChoice  ToolChoice `json:"tool_choice,omitempty"`
	Temperature *float64   `json:"temperature,omitempty"`
	TopP        *float64   `json:"top_p,omitempty"`
	MaxTokens   int        `json:"max_tokens,omitempty"`
	// MaxCompletionTokens is the newer spelling of MaxTokens; when both
	// are set it wins.
	MaxCompletionTokens    int            `json:"max_completion_tokens,omitempty"`
	Stop                   Stop           `json:"stop,omitempty"`
	Seed                   *int64         `json:"seed,omitempty"`
	N                      int            `json:"n,omitempty"`
	Logprobs               bool           `json:"logprobs,omitempty"`
	TopLogprobs            int            `json:"top_logprobs,omitempty"`
	Stream                 bool           `json:"stream,omitempty"`
	StreamOptions          *StreamOptions `json:"stream_options,omitempty"`
	ReturnTokensAsTokenIDs bool           `json:"return_tokens_as_token_ids,omitempty"`
	ReturnTokenIDs         bool           `json:"return_token_ids,omitempty"`
	// Constraints on sampling, checked by validateSampling.
	FrequencyPenalty  *float64           `json:"frequency_penalty,omitempty"`
	PresencePenalty   *float64           `json:"presence_penalty,omitempty"`
	LogitBias         map[string]float64 `json:"logit_bias,omitempty"`
	ParallelToolCalls *bool              `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    *ResponseFormat    `json:"response_format,omitempty"`
}

// ResponseFormat is a request's response_format: "text", "json_object",
// or "json_schema" with its JSONSchema.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is a json_schema response format: a name and the schema the
// content must match.
type JSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// StreamOptions are the options of a streamed request.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// MaxCompletion is the completion budget the request asks for:
// max_completion_tokens if set, else max_tokens; 0 leaves the server's
// default.
func (r *ChatRequest) MaxCompletion() int {
	if r.MaxCompletionTokens > 0 {
		return r.MaxCompletionTokens
	}
	return r.MaxTokens
}

// Choices is the number of choices the request asks for: n, or 1 when n is
// absent.
func (r *ChatRequest) Choices() int { return max(r.N, 1) }

// Message is one message of a request, or the message of a response choice.
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// The roles a message may have. Developer is OpenAI's newer name for
// system.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Content is a message's content. On the wire it is a string, null, or an
// array of content parts. Value is the string (nil: null); Parts holds an
// array as it came (set only by decoding; an encoded Content with Parts
// sends them). Text reads either form.
type Content struct {
	Value *string
	Parts []ContentPart
	// kind names the JSON kind of content that is none of the three.
	// It is a number or an object, for Validate to report.
	kind string
}

// ContentPart is one part of an array content. Only Type and Text are
// read, since delegate's models take text parts only.
type ContentPart struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

// Text returns c as a string: its Value, "" for null, or its text parts joined.
// The parts are joined in order with nothing between them. A part other than
// text, or content of another JSON kind, is an error.
func (c *Content) Text() (string, error) {
	if c.kind != "" {
		return "", fmt.Errorf("want a string, null or an array of content parts, got %s", c.kind)
	}
	if c.Parts == nil {
		if c.Value == nil {
			return "", nil
		}
		return *c.Value, nil
	}
	if len(c.Parts) == 1 && c.Parts[0].Type == "text" {
		return c.Parts[0].Text, nil
	}
	var b strings.Builder
	for i, p := range c.Parts {
		if p.Type != "text" {
			return "", fmt.Errorf("part %d: only text parts are supported, got %q", i, p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// MarshalJSON writes Parts when set, else Value (null when nil).
func (c Content) MarshalJSON() ([]byte, error) {
	switch {
	case c.Parts != nil:
		return json.Marshal(c.Parts)
	case c.Value == nil:
		return []byte("null"), nil
	}
	return json.Marshal(*c.Value)
}

// UnmarshalJSON reads a string, null or an array of parts. Content of any
// other JSON kind is kept as an error for Text (and Validate) to report
// with the message's index.
func (c *Content) UnmarshalJSON(b []byte) error {
	*c = Content{}
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		return nil
	case b[0] == '"':
		s, err := readString(b)
		if err != nil {
			return err
		}
		c.Value = &s
		return nil
	case b[0] == '[':
		parts := []ContentPart{}
		if err := json.Unmarshal(b, &parts); err != nil {
			c.kind = "an array that is not of content parts"
			return nil
		}
		c.Parts = parts
		return nil
	case b[0] == '{':
		c.kind = "an object"
	case b[0] == 't' || b[0] == 'f':
		c.kind = "a boolean"
	default:
		c.kind = "a number"
	}
	return nil
}

// ToolCall is a function call of an assistant message.
type ToolCall struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is the name and arguments of a tool call.
type Function struct {
	Name      string    `json:"name"`
	Arguments Arguments `json:"arguments"`
}

// Arguments is a tool call's arguments: JSON text sent as a JSON string.
// Reading also takes any other JSON value, as some local servers send it,
// and keeps its JSON text; null reads as "".
type Arguments string

// MarshalJSON writes the arguments as a JSON string.
func (a Arguments) MarshalJSON() ([]byte, error) { return json.Marshal(string(a)) }

// UnmarshalJSON reads a JSON string, null, or any other JSON value as its
// text.
func (a *Arguments) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		s, err := readString(b)
		if err != nil {
			return err
		}
		*a = Arguments(s)
	case string(b) == "null":
		*a = ""
	default:
		*a = Arguments(b)
	}
	return nil
}

// Tool is a tool a request offers: a function.
type Tool struct {
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

// FunctionDef declares a function: its name, what it does, and its
// parameters as a JSON Schema.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	// Strict asks for calls whose arguments match Parameters exactly.
	Strict *bool `json:"strict,omitempty"`
}

// ToolChoice is a request's tool_choice: "auto", "none", "required", or a function's name.
// A name is the one function the model must call, and travels as
// {"type":"function","function":{"name":...}}. "" leaves it out.
type ToolChoice string

// The tool choices that are not a function's name.
const (
	ToolChoiceAuto     ToolChoice = "auto"
	ToolChoiceNone     ToolChoice = "none"
	ToolChoiceRequired ToolChoice = "required"
)

// Named reports whether c names a function rather than a mode.
func (c ToolChoice) Named() bool {
	return c != "" && c != ToolChoiceAuto && c != ToolChoiceNone && c != ToolChoiceRequired
}

type namedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// MarshalJSON writes a mode as a string and a function's name as the
// object form.
func (c ToolChoice) MarshalJSON() ([]byte, error) {
	if !c.Named() {
		return json.Marshal(string(c))
	}
	var n namedToolChoice
	n.Type, n.Function.Name = "function", string(c)
	return json.Marshal(n)
}

// UnmarshalJSON reads a mode string, the object form or null.
func (c *ToolChoice) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*c = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		switch ToolChoice(s) {
		case ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired:
			*c = ToolChoice(s)
			return nil
		}
		return &FieldError{Param: "tool_choice", Message: fmt.Sprintf(`tool_choice: %q is not "auto", "none", "required" or a function object`, s)}
	}
	var n namedToolChoice
	if err := json.Unmarshal(b, &n); err != nil || n.Function.Name == "" || n.Type != "function" {
		return &FieldError{Param: "tool_choice", Message: `tool_choice: want "auto", "none", "required" or {"type":"function","function":{"name":...}}`}
	}
	*c = ToolChoice(n.Function.Name)
	return nil
}

// Stop is a request's stop sequences: sent as a list, read from a string or
// a list of strings.
type Stop []string

// UnmarshalJSON reads a string, a list of strings or null.
func (s *Stop) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = Stop{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return &FieldError{Param: "stop", Message: "stop: want a string or a list of strings"}
	}
	*s = list
	return nil
}

// FieldError is a request that breaks the format's rules. Param names the
// offending field as OpenAI's errors do ("n", "messages[2].content");
// Message says what is wrong and starts with Param.
type FieldError struct {
	Param   string
	Message string
}

func (e *FieldError) Error() string { return e.Message }

func fieldError(param, format string, args ...any) *FieldError {
	return &FieldError{Param: param, Message: param + ": " + fmt.Sprintf(format, args...)}
}

// Validate checks r against the format's rules and returns the first it breaks.
// That one comes as a *FieldError; a valid r gives nil. The rules are
// OpenAI's, where OpenAI's API states them:
//
//   - n, when given, is 1..128; 0, absent or null, means one choice.
//   - A message's content is a string, null, or an array of content parts.
//     Text parts are joined, in order, with nothing between them. Any other
//     part, such as image_url, input_audio or file, is refused: delegate's
//     models read text only, and OpenAI refuses a part whose modality the
//     model lacks.
//   - temperature is 0..2, top_p 0..1, top_logprobs 0..20 and only with
//     logprobs: true; max_tokens and max_completion_tokens are not
//     negative; stream_options needs stream.
//   - A role is system, developer, user, assistant or tool; a tool message
//     answers a call of an earlier assistant message by tool_call_id.
//   - A tool is a function with a name; its parameters, when given, are a
//     JSON value. A request offers at most 128 tools.
//   - stop is a string or a list of at most 4 strings; tool_choice is
//     "auto", "none", "required" or
//     {"type":"function","function":{"name":...}}; one that asks for a
//     call needs tools, and a named one must be declared.
//   - frequency_penalty and presence_penalty are -2..2; logit_bias maps
//     token ids to -100..100; response_format is text, json_object or
//     json_schema, which needs a name.
//
// Bounds that are a server's policy rather than the format, such as a body
// size or a smaller largest n, belong to that server's settings.
func (r *ChatRequest) Validate() error {
	if len(r.Messages) == 0 {
		return fieldError("messages", "at least one message is required")
	}
	if r.N < 0 || r.N > MaxN {
		return fieldError("n", "%d is outside 1..%d", r.N, MaxN)
	}
	if r.TopLogprobs < 0 || r.TopLogprobs > MaxTopLogprobs {
		return fieldError("top_logprobs", "%d is outside 0..%d", r.TopLogprobs, MaxTopLogprobs)
	}
	if r.TopLogprobs > 0 && !r.Logprobs {
		return fieldError("top_logprobs", "only allowed with logprobs: true")
	}
	if len(r.Stop) > MaxStop {
		return fieldError("stop", "%d sequences is more than %d", len(r.Stop), MaxStop)
	}
	if len(r.Tools) > MaxTools {
		return fieldError("tools", "%d tools is more than %d", len(r.Tools), MaxTools)
	}
	if r.Temperature != nil && !(*r.Temperature >= 0 && *r.Temperature <= 2) {
		return fieldError("temperature", "%v is outside 0..2", *r.Temperature)
	}
	if r.TopP != nil && !(*r.TopP >= 0 && *r.TopP <= 1) {
		return fieldError("top_p", "%v is outside 0..1", *r.TopP)
	}
	if r.MaxTokens < 0 {
		return fieldError("max_tokens", "%d must not be negative", r.MaxTokens)
	}
	if r.MaxCompletionTokens < 0 {
		return fieldError("max_completion_tokens", "%d must not be negative", r.MaxCompletionTokens)
	}
	if r.StreamOptions != nil && !r.Stream {
		return fieldError("stream_options", "only allowed with stream: true")
	}
	var calls map[string]bool // the ids of the tool calls made so far; nil until the first
	for i := range r.Messages {
		m := &r.Messages[i]
		if err := m.validate(i); err != nil {
			return err
		}
		if m.Role == RoleTool && !calls[m.ToolCallID] {
			return fieldError(index("messages", i, "tool_call_id"), "%q answers no tool call of an earlier assistant message", m.ToolCallID)
		}
		if m.Role == RoleAssistant && len(m.ToolCalls) > 0 {
			if calls == nil {
				calls = map[string]bool{}
			}
			for _, c := range m.ToolCalls {
				calls[c.ID] = true
			}
		}
	}
	for i := range r.Tools {
		t := &r.Tools[i]
		if t.Type != "" && t.Type != "function" {
			return fieldError(index("tools", i, "type"), "only function tools are supported, got %q", t.Type)
		}
		if t.Function.Name == "" {
			return fieldError(index("tools", i, "function.name"), "required")
		}
		if len(t.Function.Parameters) > 0 && !json.Valid(t.Function.Parameters) {
			return fieldError(index("tools", i, "function.parameters"), "tool %q: not valid JSON", t.Function.Name)
		}
	}
	return r.validateSampling()
}

// validateSampling checks the fields that constrain sampling.
// The penalties are -2..2, and logit_bias maps token ids to -100..100. A
// response_format is text, json_object or a named json_schema. A tool_choice
// that asks for a call has tools, the named one among them.
func (r *ChatRequest) validateSampling() error {
	for _, p := range []struct {
		name string
		v    *float64
	}{{"frequency_penalty", r.FrequencyPenalty}, {"presence_penalty", r.PresencePenalty}} {
		if p.v != nil && !(*p.v >= -2 && *p.v <= 2) {
			return fieldError(p.name, "%v is outside -2..2", *p.v)
		}
	}
	for k, v := range r.LogitBias {
		if id, err := strconv.Atoi(k); err != nil || id < 0 {
			return fieldError("logit_bias", "key %q is not a token id", k)
		}
		if !(v >= -100 && v <= 100) {
			return fieldError("logit_bias", "bias %v of token %s is outside -100..100", v, k)
		}
	}
	if f := r.ResponseFormat; f != nil {
		switch f.Type {
		case FormatText, FormatJSONObject:
		case FormatJSONSchema:
			if f.JSONSchema == nil || f.JSONSchema.Name == "" {
				return fieldError("response_format.json_schema.name", "required for a json_schema response format")
			}
		default:
			return fieldError("response_format.type", "%q is not text, json_object or json_schema", f.Type)
		}
	}
	switch {
	case r.ToolChoice == ToolChoiceRequired && len(r.Tools) == 0:
		return fieldError("tool_choice", `"required" needs tools`)
	case r.ToolChoice.Named():
		name := string(r.ToolChoice)
		declared := false
		for _, t := range r.Tools {
			declared = declared || t.Function.Name == name
		}
		if !declared {
			return fieldError("tool_choice", "function %q is not among the tools", name)
		}
	}
	return nil
}

// The response format types.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

func (m *Message) validate(i int) error {
	switch m.Role {
	case RoleSystem, RoleDeveloper, RoleUser, RoleAssistant, RoleTool:
	default:
		return fieldError(index("messages", i, "role"), "unknown role %q", m.Role)
	}
	if m.Role == RoleTool && m.ToolCallID == "" {
		return fieldError(index("messages", i, "tool_call_id"), "required on a tool message")
	}
	if _, err := m.Content.Text(); err != nil {
		return fieldError(index("messages", i, "content"), "%v", err)
	}
	return nil
}

// index spells the param of a list element's field: "messages[2].role".
func index(list string, i int, field string) string {
	return list + "[" + strconv.Itoa(i) + "]." + field
}
