package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/delegatelab/delegate"
)

// The chat template. A conversation renders as
//
//	<s>
//	<|tools|>{"name":...,"description":...,"parameters":...}\n ... <|end|>   only when tools are offered, one JSON object per line
//	<|system|>content<|end|>
//	<|user|>content<|end|>
//	<|assistant|>content<|tool_call|>f{...}<|end_tool_call|>...<|end|>
//	<|tool|>content<|end|>
//	<|assistant|>                                                          only with addGenerationPrompt
//
// Content is encoded byte by byte (Encode), so a message can never forge a
// special token. An assistant's content comes before its tool calls. Tool
// call ids and a tool message's ToolCallID are not rendered: tool results
// answer the preceding calls in order. Roles other than user, assistant and
// tool render as <|system|>.
//
// A tool call renders compactly as NAME immediately followed by ARGUMENTS,
// as in delegate{"question":"47*28"}. That needs NAME to be 1 to 64 of the
// characters OpenAI allows in a function name: letters, digits, _ and -.
// ARGUMENTS, written verbatim, must be a valid JSON object, "{}" when
// empty. The compact form takes 24 tokens fewer per call than the JSON
// envelope {"name":NAME,"arguments":ARGUMENTS}. A call with another name,
// or with arguments that are valid JSON but not an object, renders as the
// envelope; ParseAssistant reads both. A call with no name or with
// arguments that are not valid JSON renders as its Arguments text verbatim.
// That is how ParseAssistant returns a malformed call, so a conversation
// holding one renders the tokens the model wrote.
//
// The rendering is prefix-stable: Render(msgs[:k], tools, false) is a prefix
// of Render(msgs, tools, false), and Render(msgs[:k], tools, true) is a
// prefix of it too when msgs[k] is an assistant message. The tokens an
// assistant generated after <|assistant|>, <|end|> included, are exactly
// the Body..End span RenderSpans reports for that message.

// Span locates one rendered message in the token sequence.
type Span struct {
	Role  delegate.Role
	Start int // index of the role token
	Body  int // index just after the role token: the first token a model generating this message wrote
	End   int // one past the message's closing <|end|>
}

// Render returns the tokens of a conversation under the chat template,
// ending with <|assistant|> when addGenerationPrompt is set.
func Render(msgs []delegate.Message, tools []delegate.Tool, addGenerationPrompt bool) []int {
	ids, _ := RenderSpans(msgs, tools, addGenerationPrompt)
	return ids
}

// RenderSpans is Render that also returns one Span per message, in order.
// Training uses them to mask exactly the tokens of the assistant's messages.
func RenderSpans(msgs []delegate.Message, tools []delegate.Tool, addGenerationPrompt bool) ([]int, []Span) {
	ids := []int{BOS}
	if len(tools) > 0 {
		ids = append(ids, Tools)
		for _, t := range tools {
			ids = appendEncode(ids, toolDecl(t))
			ids = append(ids, ByteOffset+'\n')
		}
		ids = append(ids, End)
	}
	spans := make([]Span, 0, len(msgs))
	for _, m := range msgs {
		sp := Span{Role: m.Role, Start: len(ids)}
		ids = append(ids, roleToken(m.Role))
		sp.Body = len(ids)
		ids = appendEncode(ids, m.Content)
		if m.Role == delegate.RoleAssistant {
			for _, c := range m.ToolCalls {
				ids = append(ids, ToolCall)
				ids = appendEncode(ids, callBody(c))
				ids = append(ids, EndToolCall)
			}
		}
		ids = append(ids, End)
		sp.End = len(ids)
		spans = append(spans, sp)
	}
	if addGenerationPrompt {
		ids = append(ids, Assistant)
	}
	return ids, spans
}

func roleToken(r delegate.Role) int {
	switch r {
	case delegate.RoleUser:
		return User
	case delegate.RoleAssistant:
		return Assistant
	case delegate.RoleTool:
		return Tool
	}
	return System
}

// jsonText marshals v without HTML escaping and without a trailing newline.
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only strings and structs of strings and valid raw JSON reach here.
		panic(fmt.Sprintf("tokenizer: marshal %T: %v", v, err))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// toolDecl is the one-line JSON declaration of a tool. Parameters that are
// not valid JSON are declared as a JSON string holding their text.
func toolDecl(t delegate.Tool) string {
	var params json.RawMessage
	if len(t.Parameters) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, t.Parameters) == nil {
			params = b.Bytes()
		} else {
			params = json.RawMessage(jsonText(string(t.Parameters)))
		}
	}
	return jsonText(struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}{t.Name, t.Description, params})
}

// callBody is the text between <|tool_call|> and <|end_tool_call|>.
func callBody(c delegate.ToolCall) string {
	args := c.Arguments
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	if c.Name == "" || !json.Valid([]byte(args)) {
		return c.Arguments
	}
	if compactName(c.Name) && strings.HasPrefix(args, "{") {
		return c.Name + args
	}
	return `{"name":` + jsonText(c.Name) + `,"arguments":` + args + `}`
}

// compactName reports whether a tool's name can open a compact call.
// Such a name is 1 to 64 letters, digits, underscores and dashes, so that
// the call's first { ends it.
func compactName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// ParseAssistant turns the tokens a model generated after <|assistant|>
// into an assistant message. It reads up to the first <|end|>, </s> or role
// token and reports in complete whether it found one; tokens after it are
// ignored. The role tokens are <|system|>, <|user|>, <|assistant|>,
// <|tool|> and <|tools|>.
//
// Bytes outside tool calls form Content; other special tokens found there
// are kept as their spelling. Each <|tool_call|> ... <|end_tool_call|>
// becomes a ToolCall with ID "call_<i>", where i counts the calls of this
// message. Callers that need ids unique across a conversation rename them.
// A call's text is either the compact NAME{...} or the envelope. The
// compact form is a name as compactName allows, then exactly one JSON
// object. The envelope is exactly one JSON object with a non-empty string
// "name" and an "arguments" value. Any other text is malformed: it comes
// back with an empty Name and its whole text as Arguments, for the caller
// to report to the model. A call left open at the end of ids is malformed
// too.
func ParseAssistant(ids []int) (msg delegate.Message, complete bool) {
	msg.Role = delegate.RoleAssistant
	var content, body strings.Builder
	inCall := false
	finishCall := func() {
		msg.ToolCalls = append(msg.ToolCalls, parseCall(len(msg.ToolCalls), body.String()))
		body.Reset()
		inCall = false
	}
	for _, id := range ids {
		switch id {
		case End, EOS, System, User, Assistant, Tool, Tools:
			complete = true
		case ToolCall:
			if !inCall {
				inCall = true
				continue
			}
		case EndToolCall:
			if inCall {
				finishCall()
				continue
			}
		}
		if complete {
			break
		}
		dst := &content
		if inCall {
			dst = &body
		}
		if IsByte(id) {
			dst.WriteByte(byte(id - ByteOffset))
		} else {
			dst.WriteString(Piece(id))
		}
	}
	if inCall {
		finishCall()
	}
	msg.Content = content.String()
	return msg, complete
}

var errNotCall = errors.New("not a tool call")

func parseCall(i int, text string) delegate.ToolCall {
	c := delegate.ToolCall{ID: fmt.Sprintf("call_%d", i)}
	if at := strings.IndexByte(text, '{'); at > 0 && compactName(text[:at]) && jsonObject(text[at:]) {
		c.Name, c.Arguments = text[:at], text[at:]
		return c
	}
	name, args, err := decodeCall(text)
	if err != nil {
		c.Arguments = text
		return c
	}
	c.Name, c.Arguments = name, args
	return c
}

// jsonObject reports whether text is one JSON object and nothing else but
// white space (Unmarshal rejects anything after the value).
func jsonObject(text string) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal([]byte(text), &v) == nil && v != nil
}

// decodeCall parses {"name":...,"arguments":...} strictly: no other fields,
// nothing after the object.
func decodeCall(text string) (name, args string, err error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var v struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := dec.Decode(&v); err != nil {
		return "", "", err
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", "", errNotCall
	}
	if v.Name == nil || *v.Name == "" || len(v.Arguments) == 0 || string(v.Arguments) == "null" {
		return "", "", errNotCall
	}
	return *v.Name, string(v.Arguments), nil
}
