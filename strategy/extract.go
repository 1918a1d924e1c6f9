package strategy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/delegatelab/delegate"
)

// FinalAnswer returns a reply's final answer as route hands it back under ToolResultAnswer.
// It is the first non-empty answer of delegate.MarkedAnswer's chain, trimmed.
// It reports false when the reply has none; route then hands back the whole
// reply.
func FinalAnswer(text string) (string, bool) {
	a, _, ok := delegate.MarkedAnswer(text, func(a string) bool { return strings.TrimSpace(a) != "" })
	return strings.TrimSpace(a), ok
}

// ErrDelegateArgs is wrapped by every error of ParseDelegateArgs.
var ErrDelegateArgs = errors.New("invalid delegate arguments")

// ParseDelegateArgs reads the arguments of a delegate tool call and returns
// the question. It tolerates surrounding white space, a Markdown code fence
// around the JSON, and an object encoded twice as a JSON string. It is
// strict about the rest. The arguments must be one JSON object whose
// "question" is a string with more than white space in it; other keys are
// ignored. The question is returned as given, untrimmed inside.
func ParseDelegateArgs(raw string) (string, error) {
	s := stripFence(strings.TrimSpace(raw))
	if q, ok := plainQuestion(s); ok {
		return q, nil
	}
	return parseDelegateJSON(s)
}

// parseDelegateJSON is ParseDelegateArgs after the fence, through encoding/json.
func parseDelegateJSON(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%w: empty arguments, want {\"question\": \"...\"}", ErrDelegateArgs)
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("%w: not JSON: %v", ErrDelegateArgs, err)
	}
	if dec.More() {
		return "", fmt.Errorf("%w: text after the JSON object", ErrDelegateArgs)
	}
	if inner, ok := v.(string); ok { // encoded twice
		var w any
		if err := json.Unmarshal([]byte(strings.TrimSpace(inner)), &w); err != nil {
			return "", fmt.Errorf("%w: a JSON string, not an object", ErrDelegateArgs)
		}
		v = w
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "", fmt.Errorf("%w: %s, want a JSON object", ErrDelegateArgs, jsonKind(v))
	}
	q, ok := obj["question"]
	if !ok {
		return "", fmt.Errorf("%w: missing \"question\"", ErrDelegateArgs)
	}
	qs, ok := q.(string)
	if !ok {
		return "", fmt.Errorf("%w: \"question\" is %s, want a string", ErrDelegateArgs, jsonKind(q))
	}
	if strings.TrimSpace(qs) == "" {
		return "", fmt.Errorf("%w: \"question\" is empty", ErrDelegateArgs)
	}
	return qs, nil
}

// plainQuestion reads s when it is {"question": "..."} and no other key, as
// a model nearly always writes it. It reads the string as encoding/json
// does, without decoding the object into a map. ok is false for anything
// else, which parseDelegateJSON then reads.
func plainQuestion(s string) (q string, ok bool) {
	const key = `"question"`
	i := skipJSONSpace(s, 0)
	if i == len(s) || s[i] != '{' {
		return "", false
	}
	i = skipJSONSpace(s, i+1)
	if !strings.HasPrefix(s[i:], key) {
		return "", false
	}
	i = skipJSONSpace(s, i+len(key))
	if i == len(s) || s[i] != ':' {
		return "", false
	}
	i = skipJSONSpace(s, i+1)
	if i == len(s) || s[i] != '"' {
		return "", false
	}
	start, escaped := i, false
	end := start + 1
	for ; end < len(s) && s[end] != '"'; end++ {
		switch c := s[end]; {
		case c < 0x20:
			return "", false
		case c == '\\':
			escaped = true
			end++
		}
	}
	if end >= len(s) {
		return "", false
	}
	i = skipJSONSpace(s, end+1)
	if i == len(s) || s[i] != '}' || skipJSONSpace(s, i+1) != len(s) {
		return "", false
	}
	q = s[start+1 : end]
	if escaped || !utf8.ValidString(q) {
		if json.Unmarshal([]byte(s[start:end+1]), &q) != nil {
			return "", false
		}
	}
	if strings.TrimSpace(q) == "" {
		return "", false
	}
	return q, true
}

// skipJSONSpace returns the index of the first byte of s from i that is not
// JSON white space.
func skipJSONSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// stripFence removes a Markdown code fence (``` or ```json) around s.
func stripFence(s string) string {
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	inner := s[3 : len(s)-3]
	if nl := strings.IndexByte(inner, '\n'); nl >= 0 && !strings.ContainsAny(inner[:nl], "{[\"") {
		inner = inner[nl+1:] // the info string, such as "json"
	} else {
		inner = strings.TrimPrefix(inner, "json")
	}
	return strings.TrimSpace(inner)
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
