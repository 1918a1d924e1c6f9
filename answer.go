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

// Braced reads the {...} group at the start of s, nested braces matched
// and a backslash escaping the next byte (so \{ and \} do not count), and
// returns its content, untrimmed, and what follows the closing brace. ok is
// false when s does not start with "{" or the group never closes; rest is
// then s.
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
