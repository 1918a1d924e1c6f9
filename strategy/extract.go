package strategy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/delegatelab/delegate"
)

// Answer markers.
const (
	FinalOutputMarker = "Final Output:" // decompose: the aggregator's answer follows the last one
	FinalAnswerMarker = "Final answer:" // single, route: the answer follows the last one (any letter case)
	answerOpen        = "<answer>"
	answerClose       = "</answer>"
)

// ExtractAnswer returns the final answer of a reply: the content of the
// last \boxed{} if there is one, else the text after the last "Final
// answer:" (any letter case), trimmed. ok is false when neither is found
// (or what follows the marker is empty); the answer is then the whole text,
// trimmed, so that nothing the model wrote is lost.
func ExtractAnswer(text string) (answer string, ok bool) {
	if b, ok := delegate.Boxed(text); ok {
		return b, true
	}
	if s, ok := after(asciiLower(text), text, asciiLower(FinalAnswerMarker)); ok {
		return s, true
	}
	return strings.TrimSpace(text), false
}

// FinalAnswer returns the final answer of a reply as route hands it back
// under ToolResultAnswer: the first non-empty answer of MarkedAnswer's
// chain, trimmed; false when the reply has none (route then hands back the
// whole reply).
func FinalAnswer(text string) (string, bool) {
	a, _, ok := MarkedAnswer(text, func(a string) bool { return strings.TrimSpace(a) != "" })
	return strings.TrimSpace(a), ok
}

// answerMarkers is the one chain of answer markers, in the order a reply's
// answer is looked for, each with its name for messages.
var answerMarkers = []struct {
	name string
	find func(string) (string, bool)
}{
	{`\boxed{}`, delegate.Boxed},
	{answerOpen, AnswerTag},
	{FinalOutputMarker, FinalOutput},
	{FinalAnswerMarker, ExtractAnswer},
}

// MarkedAnswer returns the answer of the first marker a reply holds and
// accept takes (nil takes any), with the marker's name. The chain: the
// last complete \boxed{} (delegate.Boxed), the last <answer></answer>
// (AnswerTag), the text after the last "Final Output:" (FinalOutput), after
// the last "Final answer:" in any letter case (ExtractAnswer). ok is false
// when no marker gives an answer accept takes; answer and marker are then
// empty.
func MarkedAnswer(text string, accept func(string) bool) (answer, marker string, ok bool) {
	for _, m := range answerMarkers {
		if a, ok := m.find(text); ok && (accept == nil || accept(a)) {
			return a, m.name, true
		}
	}
	return "", "", false
}

// FinalOutput returns the text after the last "Final Output:" marker,
// trimmed, or the whole text trimmed and ok false when there is no marker
// or nothing follows it.
func FinalOutput(text string) (answer string, ok bool) {
	if s, ok := after(text, text, FinalOutputMarker); ok {
		return s, true
	}
	return strings.TrimSpace(text), false
}

// after finds the last marker in search (text itself, or a view of it with
// the same byte offsets) and returns the trimmed text after it; ok is false
// when there is none or it is empty.
func after(search, text, marker string) (string, bool) {
	i := strings.LastIndex(search, marker)
	if i < 0 {
		return "", false
	}
	s := strings.TrimSpace(text[i+len(marker):])
	return s, s != ""
}

// asciiLower lower-cases ASCII letters only, so byte offsets are kept.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// AnswerTag returns the content of the last complete <answer>...</answer>
// in text, trimmed; ok is false when there is none or it is empty.
func AnswerTag(text string) (answer string, ok bool) {
	end := strings.LastIndex(text, answerClose)
	if end < 0 {
		return "", false
	}
	open := strings.LastIndex(text[:end], answerOpen)
	if open < 0 {
		return "", false
	}
	s := strings.TrimSpace(text[open+len(answerOpen) : end])
	return s, s != ""
}

// ErrDelegateArgs is wrapped by every error of ParseDelegateArgs.
var ErrDelegateArgs = errors.New("invalid delegate arguments")

// ParseDelegateArgs reads the arguments of a delegate tool call and returns
// the question. It tolerates surrounding white space, a Markdown code fence
// around the JSON, and an object encoded twice (a JSON string holding the
// object). It is strict about the rest: the arguments must be one JSON
// object whose "question" is a string with more than white space in it;
// other keys are ignored. The question is returned as given, untrimmed
// inside.
func ParseDelegateArgs(raw string) (string, error) {
	s := stripFence(strings.TrimSpace(raw))
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
