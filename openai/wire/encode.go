package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendRequest appends r as JSON to dst, the bytes json.Marshal(r) gives.
// The client encodes every request with it: encoding/json calls the
// MarshalJSON of each message's content and then scans what it returned
// a second time. A number encoding/json refuses (NaN, an infinity) or a
// raw JSON field that is not JSON is an error, as there.
func AppendRequest(dst []byte, r *ChatRequest) ([]byte, error) {
	start := len(dst)
	b, err := appendRequest(dst, r)
	if err != nil {
		return dst[:start], err
	}
	return b, nil
}

func appendRequest(b []byte, r *ChatRequest) ([]byte, error) {
	var err error
	b = append(b, `{"model":`...)
	b = appendString(b, r.Model)
	b = append(b, `,"messages":`...)
	if r.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendMessage(b, &r.Messages[i])
		}
		b = append(b, ']')
	}
	if b, err = appendTools(b, r.Tools); err != nil {
		return b, err
	}
	if r.ToolChoice != "" {
		b = append(b, `,"tool_choice":`...)
		b = appendToolChoice(b, r.ToolChoice)
	}
	if b, err = appendFloatField(b, `,"temperature":`, r.Temperature); err != nil {
		return b, err
	}
	if b, err = appendFloatField(b, `,"top_p":`, r.TopP); err != nil {
		return b, err
	}
	b = appendIntField(b, `,"max_tokens":`, r.MaxTokens)
	b = appendIntField(b, `,"max_completion_tokens":`, r.MaxCompletionTokens)
	if len(r.Stop) > 0 {
		b = append(b, `,"stop":`...)
		b = appendStrings(b, r.Stop)
	}
	if r.Seed != nil {
		b = append(b, `,"seed":`...)
		b = strconv.AppendInt(b, *r.Seed, 10)
	}
	b = appendIntField(b, `,"n":`, r.N)
	b = appendTrueField(b, `,"logprobs":true`, r.Logprobs)
	b = appendIntField(b, `,"top_logprobs":`, r.TopLogprobs)
	b = appendTrueField(b, `,"stream":true`, r.Stream)
	if r.StreamOptions != nil {
		b = append(b, `,"stream_options":{"include_usage":`...)
		b = strconv.AppendBool(b, r.StreamOptions.IncludeUsage)
		b = append(b, '}')
	}
	b = appendTrueField(b, `,"return_tokens_as_token_ids":true`, r.ReturnTokensAsTokenIDs)
	b = appendTrueField(b, `,"return_token_ids":true`, r.ReturnTokenIDs)
	if b, err = appendFloatField(b, `,"frequency_penalty":`, r.FrequencyPenalty); err != nil {
		return b, err
	}
	if b, err = appendFloatField(b, `,"presence_penalty":`, r.PresencePenalty); err != nil {
		return b, err
	}
	if b, err = appendLogitBias(b, r.LogitBias); err != nil {
		return b, err
	}
	if r.ParallelToolCalls != nil {
		b = append(b, `,"parallel_tool_calls":`...)
		b = strconv.AppendBool(b, *r.ParallelToolCalls)
	}
	if b, err = appendResponseFormat(b, r.ResponseFormat); err != nil {
		return b, err
	}
	return append(b, '}'), nil
}

// appendTools writes the tools field; nothing when there are none.
func appendTools(b []byte, tools []Tool) ([]byte, error) {
	if len(tools) == 0 {
		return b, nil
	}
	b = append(b, `,"tools":[`...)
	var err error
	for i := range tools {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendTool(b, &tools[i]); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

// appendStrings writes a JSON array of strings.
func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendLogitBias writes the logit_bias field, its keys sorted as
// encoding/json sorts a map's; nothing when m is empty.
func appendLogitBias(b []byte, m map[string]float64) ([]byte, error) {
	if len(m) == 0 {
		return b, nil
	}
	b = append(b, `,"logit_bias":{`...)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var err error
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		if b, err = appendFloat(b, m[k]); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// appendResponseFormat writes the response_format field; nothing when f
// is nil.
func appendResponseFormat(b []byte, f *ResponseFormat) ([]byte, error) {
	if f == nil {
		return b, nil
	}
	b = append(b, `,"response_format":{"type":`...)
	b = appendString(b, f.Type)
	if s := f.JSONSchema; s != nil {
		b = append(b, `,"json_schema":{"name":`...)
		b = appendString(b, s.Name)
		if s.Description != "" {
			b = append(b, `,"description":`...)
			b = appendString(b, s.Description)
		}
		if len(s.Schema) > 0 {
			b = append(b, `,"schema":`...)
			var err error
			if b, err = appendRaw(b, s.Schema); err != nil {
				return b, err
			}
		}
		if s.Strict != nil {
			b = append(b, `,"strict":`...)
			b = strconv.AppendBool(b, *s.Strict)
		}
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

func appendMessage(b []byte, m *Message) []byte {
	b = append(b, `{"role":`...)
	b = appendString(b, m.Role)
	b = append(b, `,"content":`...)
	b = appendContent(b, &m.Content)
	if m.Name != "" {
		b = append(b, `,"name":`...)
		b = appendString(b, m.Name)
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			c := &m.ToolCalls[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendString(b, c.ID)
			b = append(b, `,"type":`...)
			b = appendString(b, c.Type)
			b = append(b, `,"function":{"name":`...)
			b = appendString(b, c.Function.Name)
			b = append(b, `,"arguments":`...)
			b = appendString(b, string(c.Function.Arguments))
			b = append(b, `}}`...)
		}
		b = append(b, ']')
	}
	if m.ToolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = appendString(b, m.ToolCallID)
	}
	return append(b, '}')
}

// appendContent appends c as Content.MarshalJSON writes it.
func appendContent(b []byte, c *Content) []byte {
	switch {
	case c.Parts != nil:
		b = append(b, '[')
		for i, p := range c.Parts {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":`...)
			b = appendString(b, p.Type)
			if p.Text != "" {
				b = append(b, `,"text":`...)
				b = appendString(b, p.Text)
			}
			b = append(b, '}')
		}
		return append(b, ']')
	case c.Value == nil:
		return append(b, "null"...)
	}
	return appendString(b, *c.Value)
}

func appendTool(b []byte, t *Tool) ([]byte, error) {
	b = append(b, `{"type":`...)
	b = appendString(b, t.Type)
	b = append(b, `,"function":{"name":`...)
	b = appendString(b, t.Function.Name)
	if t.Function.Description != "" {
		b = append(b, `,"description":`...)
		b = appendString(b, t.Function.Description)
	}
	if len(t.Function.Parameters) > 0 {
		b = append(b, `,"parameters":`...)
		var err error
		if b, err = appendRaw(b, t.Function.Parameters); err != nil {
			return b, fmt.Errorf("tool %q parameters: %w", t.Function.Name, err)
		}
	}
	if t.Function.Strict != nil {
		b = append(b, `,"strict":`...)
		b = strconv.AppendBool(b, *t.Function.Strict)
	}
	return append(b, `}}`...), nil
}

// appendToolChoice appends c as ToolChoice.MarshalJSON writes it.
func appendToolChoice(b []byte, c ToolChoice) []byte {
	if !c.Named() {
		return appendString(b, string(c))
	}
	b = append(b, `{"type":"function","function":{"name":`...)
	b = appendString(b, string(c))
	return append(b, `}}`...)
}

// appendRaw appends raw JSON compacted and HTML-escaped, as encoding/json
// writes a json.RawMessage.
func appendRaw(b []byte, raw json.RawMessage) ([]byte, error) {
	start := len(b)
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return b[:start], err
	}
	b = buf.Bytes()
	if !bytes.ContainsAny(b[start:], "<>&\u2028\u2029") {
		return b, nil
	}
	var esc bytes.Buffer
	json.HTMLEscape(&esc, b[start:])
	return append(b[:start], esc.Bytes()...), nil
}

func appendIntField(b []byte, key string, v int) []byte {
	if v == 0 {
		return b
	}
	b = append(b, key...)
	return strconv.AppendInt(b, int64(v), 10)
}

func appendTrueField(b []byte, field string, v bool) []byte {
	if !v {
		return b
	}
	return append(b, field...)
}

func appendFloatField(b []byte, key string, v *float64) ([]byte, error) {
	if v == nil {
		return b, nil
	}
	return appendFloat(append(b, key...), *v)
}

// appendFloat appends f as encoding/json writes a float64: as ES6 prints
// numbers, with an exponent below 1e-6 and from 1e21.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 becomes e-9.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it: <, > and & as \u00XX, invalid UTF-8 as \ufffd, and U+2028
// and U+2029.
func appendString(b []byte, s string) []byte { return AppendJSONString(b, s, true) }

// AppendJSONString appends s as a JSON string as encoding/json writes
// it: invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped, and <, > and &
// escaped when html is set, as json.Marshal does and an Encoder with
// SetEscapeHTML(false) does not.
func AppendJSONString(b []byte, s string, html bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!html || (c != '<' && c != '>' && c != '&')) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
