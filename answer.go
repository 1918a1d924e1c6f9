package delegate

import (
	"strings"
	"unicode"
)

// Boxed returns the trimmed content of the last \boxed{...} or \fbox{...} in text.
// Nested braces are matched. A backslash escapes the next byte, so \{ and \} do not count.
// A brace-less form such as "\boxed 5" yields the following token.
// ok is false when there is none or the braces never close; content is then empty.
//
// It is the one reading of a boxed answer. Strategies, verifiers and datasets all use it,
// so a trace's answer and its verdict never disagree on the same reply.
func Boxed(text string) (content string, ok bool) {
	best, n := lastBox(text)
	// Try the last occurrence first; fall back to earlier ones when the last
	// is unterminated (a truncated response), a few times at most so that a
	// pathological response stays linear.
	for tries := 0; best >= 0 && tries < 8; tries++ {
		if s, ok := boxArgument(text[best+n:]); ok {
			return s, true
		}
		best, n = lastBox(text[:best])
	}
	return "", false
}

// lastBox returns the offset of the last \boxed or \fbox in text and the
// command's length, or -1.
func lastBox(text string) (at, n int) {
	at = -1
	for _, cmd := range []string{`\boxed`, `\fbox`} {
		if i := strings.LastIndex(text, cmd); i > at {
			at, n = i, len(cmd)
		}
	}
	return at, n
}

// boxArgument reads the argument of a box command from rest, the text
// right after the command's name.
func boxArgument(rest string) (string, bool) {
	if strings.HasPrefix(rest, "{") {
		inner, _, ok := Braced(rest)
		return strings.TrimSpace(inner), ok
	}
	if rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
		return "", false // \boxedfoo is another command
	}
	rest = strings.TrimLeft(rest, " \t")
	end := strings.IndexFunc(rest, func(r rune) bool { return r == '$' || unicode.IsSpace(r) })
	if end < 0 {
		end = len(rest)
	}
	s := strings.TrimRight(rest[:end], ".,;")
	return s, s != ""
}

// Braced reads the {...} group at the start of s.
// It returns the untrimmed content and what follows the closing brace.
// Nested braces are matched, and a backslash escapes the next byte, so \{ and \} do not count.
// ok is false when s does not start with "{" or the group never closes; rest is then s.
func Braced(s string) (inner, rest string, ok bool) {
	if !strings.HasPrefix(s, "{") {
		return "", s, false
	}
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // an escaped byte such as \{ or \}
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[1:i], s[i+1:], true
			}
		}
	}
	return "", s, false
}

// Answer markers.
const (
	FinalOutputMarker = "Final Output:" // decompose: the aggregator's answer follows the last one
	FinalAnswerMarker = "Final answer:" // single, route: the answer follows the last one (any letter case)
	answerOpen        = "<answer>"
	answerClose       = "</answer>"
)

// ExtractAnswer returns the final answer of a reply, trimmed.
// That is the content of the last \boxed{}, else the text after the last "Final answer:" in any case.
// ok is false when neither is found or nothing follows the marker.
// The answer is then the whole text, trimmed, so that nothing the model wrote is lost.
func ExtractAnswer(text string) (answer string, ok bool) {
	if b, ok := Boxed(text); ok {
		return b, true
	}
	if s, ok := after(asciiLower(text), text, asciiLower(FinalAnswerMarker)); ok {
		return s, true
	}
	return strings.TrimSpace(text), false
}

// answerMarkers is the one chain of answer markers, in the order they are tried.
// Each has its name for messages.
var answerMarkers = []struct {
	name string
	find func(string) (string, bool)
}{
	{`\boxed{}`, Boxed},
	{answerOpen, AnswerTag},
	{FinalOutputMarker, FinalOutput},
	{FinalAnswerMarker, ExtractAnswer},
}

// MarkedAnswer returns the answer of the first marker in a reply that accept takes.
// It also returns the marker's name. A nil accept takes any answer.
// The chain is Boxed, AnswerTag, FinalOutput, then ExtractAnswer's "Final answer:".
// ok is false when no marker gives an answer accept takes; answer and marker are then empty.
func MarkedAnswer(text string, accept func(string) bool) (answer, marker string, ok bool) {
	for _, m := range answerMarkers {
		if a, ok := m.find(text); ok && (accept == nil || accept(a)) {
			return a, m.name, true
		}
	}
	return "", "", false
}

// FinalOutput returns the trimmed text after the last "Final Output:" marker.
// With no marker, or nothing after it, it returns the whole text trimmed and ok false.
func FinalOutput(text string) (answer string, ok bool) {
	if s, ok := after(text, text, FinalOutputMarker); ok {
		return s, true
	}
	return strings.TrimSpace(text), false
}

// after returns the trimmed text of text after the last marker in search.
// search is text or a view of it with the same byte offsets.
// ok is false when there is no marker or nothing after it.
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

// AnswerTag returns the trimmed content of the last complete <answer>...</answer> in text.
// ok is false when there is none or it is empty.
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
