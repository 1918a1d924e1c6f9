package delegate

import (
	"strings"
	"unicode"
)

// Boxed returns the content of the last \boxed{...} (or \fbox{...}) in
// text, trimmed, with nested braces matched; a backslash escapes the next
// byte, so \{ and \} do not count. A brace-less form such as "\boxed 5"
// yields the following token. ok is false when there is none or the
// braces never close; content is then empty. It is the one reading of a
// boxed answer: strategies take their answers with it, verifiers grade
// with it and datasets read their references with it, so a trace's answer
// and its verdict never disagree on the same reply.
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
		depth := 0
		for i := 0; i < len(rest); i++ {
			switch rest[i] {
			case '\\':
				i++ // an escaped byte such as \{ or \}
			case '{':
				depth++
			case '}':
				depth--
				if depth == 0 {
					return strings.TrimSpace(rest[1:i]), true
				}
			}
		}
		return "", false
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
