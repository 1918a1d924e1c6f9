package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ChatResponse is a Chat Completions response body ("chat.completion").
type ChatResponse struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
	// PromptTokenIDs are the prompt's token ids, as vLLM returns them when
	// asked (ChatRequest.ReturnTokenIDs).
	PromptTokenIDs []int `json:"prompt_token_ids,omitempty"`
	// PolicyVersion is delegate serve's extension: the weights' version.
	// For a model that follows a trainer's checkpoints, it is the trainer
	// step that produced the response.
	PolicyVersion *int `json:"policy_version,omitempty"`
	// Error is set by proxies that answer 200 with an error body.
	Error *ErrorDetail `json:"error,omitempty"`
}

// Choice is one choice of a response.
type Choice struct {
	Index        int       `json:"index"`
	Message      Message   `json:"message"`
	FinishReason string    `json:"finish_reason"` // null reads as ""
	Logprobs     *Logprobs `json:"logprobs"`
}

// Usage is a response's token account.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails breaks down the prompt tokens.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// Logprobs are a choice's logprobs, one per generated token.
type Logprobs struct {
	Content []Logprob `json:"content"`
}

// Logprob is one token's logprob and, in a choice's list, its top
// alternatives.
type Logprob struct {
	Token       string    `json:"token"`
	Logprob     float64   `json:"logprob"`
	Bytes       Bytes     `json:"bytes"`
	TopLogprobs []Logprob `json:"top_logprobs,omitempty"`
}

// Bytes is the "bytes" field of a logprob: a JSON array of byte values.
// It is not base64, which is how encoding/json would treat a []byte.
type Bytes []byte

// MarshalJSON writes the bytes as an array of numbers; nil as null.
func (b Bytes) MarshalJSON() ([]byte, error) {
	if b == nil {
		return []byte("null"), nil
	}
	out := make([]byte, 0, 2+4*len(b))
	out = append(out, '[')
	for i, v := range b {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, int64(v), 10)
	}
	return append(out, ']'), nil
}

// UnmarshalJSON reads an array of numbers 0..255, or null.
// A response has one such array per token: it reads the plain ones
// itself, and any other through encoding/json.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*b = nil
		return nil
	}
	if out, ok := byteArray(data); ok {
		*b = out
		return nil
	}
	var ints []int
	if err := json.Unmarshal(data, &ints); err != nil {
		return err
	}
	out := make([]byte, len(ints))
	for i, v := range ints {
		if v < 0 || v > 255 {
			return fmt.Errorf("byte %d out of range: %d", i, v)
		}
		out[i] = byte(v)
	}
	*b = out
	return nil
}

// byteArray reads data, an array of numbers 0..255 written plainly:
// decimal digits without a sign, a fraction or leading zeros, and
// whitespace. ok is false for anything else.
func byteArray(data []byte) (out []byte, ok bool) {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '[' {
		return nil, false
	}
	out = []byte{}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return out, skipSpace(data, i+1) == len(data)
	}
	for {
		v, n := 0, 0
		for ; i < len(data) && '0' <= data[i] && data[i] <= '9'; i, n = i+1, n+1 {
			v = v*10 + int(data[i]-'0')
		}
		if n == 0 || n > 3 || n > 1 && data[i-n] == '0' || v > 255 {
			return nil, false
		}
		out = append(out, byte(v))
		i = skipSpace(data, i)
		switch {
		case i == len(data):
			return nil, false
		case data[i] == ',':
			i = skipSpace(data, i+1)
		case data[i] == ']':
			return out, skipSpace(data, i+1) == len(data)
		default:
			return nil, false
		}
	}
}

// skipSpace returns the index of the first byte of b from i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// ChatChunk is one event of a streamed response ("chat.completion.chunk").
type ChatChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
	// PromptTokenIDs, in the first chunk, when asked.
	PromptTokenIDs []int `json:"prompt_token_ids,omitempty"`
	// PolicyVersion, in each choice's last chunk: see ChatResponse.
	PolicyVersion *int `json:"policy_version,omitempty"`
}

// ChunkChoice is a piece of one choice.
type ChunkChoice struct {
	Index        int       `json:"index"`
	Delta        Delta     `json:"delta"`
	FinishReason *string   `json:"finish_reason"`
	Logprobs     *Logprobs `json:"logprobs,omitempty"`
}

// Delta is what a chunk adds to a choice's message.
type Delta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []ToolCallDelta `json:"tool_calls,omitempty"`
}

// ToolCallDelta is a piece of a tool call: its id, type and name first,
// then its arguments.
type ToolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ErrorBody is OpenAI's error body: {"error":{"message","type","param","code"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the error object of an error body.
type ErrorDetail struct {
	Message string   `json:"message"`
	Type    string   `json:"type"`
	Param   Nullable `json:"param"`
	Code    Nullable `json:"code"`
}

// Nullable is a string field that travels as null when empty. Reading also
// takes a number (servers send codes such as 404 as numbers) or any other
// JSON value, kept as its JSON text.
type Nullable string

// MarshalJSON writes "" as null.
func (n Nullable) MarshalJSON() ([]byte, error) {
	if n == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(n))
}

// UnmarshalJSON reads a string, null, or any other value as its text.
func (n *Nullable) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		*n = ""
	case len(b) > 0 && b[0] == '"':
		s, err := readString(b)
		if err != nil {
			return err
		}
		*n = Nullable(s)
	default:
		*n = Nullable(b)
	}
	return nil
}

// flatError is older vLLM's error body: {"object":"error","message",...}.
type flatError struct {
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    Nullable        `json:"code"`
}

// ParseError reads the error of an error body in any of the shapes servers send.
// The shapes are OpenAI's {"error":{...}}, also sent by newer vLLM, SGLang,
// Ollama and llama.cpp; {"error":"text"}; and older vLLM's flat
// {"object":"error","message",...}. A body of none of these shapes is the
// message, white space trimmed. Nothing is cut: a reader bounds what it
// keeps.
func ParseError(body []byte) ErrorDetail {
	var w flatError
	if err := json.Unmarshal(body, &w); err == nil {
		if len(w.Error) > 0 && string(w.Error) != "null" {
			var d ErrorDetail
			if json.Unmarshal(w.Error, &d) == nil {
				return d
			}
			var s string
			if json.Unmarshal(w.Error, &s) == nil {
				return ErrorDetail{Message: s}
			}
		}
		if w.Object == "error" || w.Message != "" || w.Type != "" {
			return ErrorDetail{Message: w.Message, Type: w.Type, Code: w.Code}
		}
	}
	return ErrorDetail{Message: strings.TrimSpace(string(body))}
}
