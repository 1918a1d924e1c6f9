package score

import (
	"math/big"
	"regexp"
	"strings"

	"github.com/delegatelab/delegate"
)

// mathMarkers find an unboxed final answer in a MATH response.
var mathMarkers = []marker{
	{regexp.MustCompile(`(?i)answer\s+is\s*:?`), "answer is"},
	{regexp.MustCompile(`(?i)final\s+answer\s*[:=]|(?:^|\n)\W*answer\s*[:=]`), "final answer"},
}

// Math verifies a MATH answer against the reference after LaTeX normalisation.
// The answer is the last \boxed{} of the response, else an explicit answer
// statement, else the last number. Equal numeric values are equal, as "0.5"
// and "\frac12". Intervals and tuples are compared element by element with
// matching brackets; bare comma lists as multisets.
func Math(response, reference string) delegate.Verdict {
	res := extractMath(response)
	if !res.Found {
		return res
	}
	res.Correct = mathEqual(res.Extracted, normalizeMath(reference))
	return res
}

func extractMath(response string) delegate.Verdict {
	if b, ok := delegate.Boxed(response); ok {
		if n := normalizeMath(b); n != "" {
			return delegate.Verdict{Found: true, Extracted: n, Method: "boxed"}
		}
	}
	for _, m := range mathMarkers {
		if s, ok := afterLastBalanced(m.re, response); ok {
			if n := normalizeMath(cutStatement(s)); n != "" {
				return delegate.Verdict{Found: true, Extracted: n, Method: m.method}
			}
		}
	}
	if s, ok := ExtractNumber(response); ok {
		return delegate.Verdict{Found: true, Extracted: normalizeMath(s), Method: "last number"}
	}
	return delegate.Verdict{}
}

var (
	mathSpacing = strings.NewReplacer(
		`\\`, `\\`, // a row break stays, so "\\ " is not read as "\ "
		"\u2212", "-", `\left`, "", `\right`, "", `\!`, "", `\,`, "", `\;`, "", `\:`, "", `\qquad`, "", `\quad`, "",
		`\displaystyle`, "", `\dfrac`, `\frac`, `\tfrac`, `\frac`, `\$`, "", `\%`, "", `%`, "",
		`^{\circ}`, "", `^\circ`, "", `°`, "", `\circ`, "", `\ `, "", "~", "", `{,}`, ",", `\dots`, `\ldots`,
	)
	mathTextRE  = regexp.MustCompile(`\\(?:text|textbf|textit|mbox|mathrm|mathbf|operatorname)\s*\{([^{}]*)\}`)
	mathVarEqRE = regexp.MustCompile(`^[a-zA-Z]\s*(?:=|\\in\b)`)
	// mathTextUnitRE is a number followed by words in a text wrapper:
	// "65 \text{ children tickets }", "440\text{ cm}^2", "9\text{ a.m.}".
	mathTextUnitRE = regexp.MustCompile(`^(.*?)\s*\\(?:text|mbox|mathrm)\s*\{\s*[A-Za-z][A-Za-z .]*\}(?:\^\{?[23]\}?)?\s*$`)
	mathUnitRE     = regexp.MustCompile(`(?i)\s*(?:square|sq\.?|cubic)?\s*\b(?:units?|cm|centimeters?|mm|m|meters?|km|kilometers?|inches|inch|in|feet|foot|ft|yards?|miles?|mph|hours?|hrs?|minutes?|mins?|seconds?|secs?|days?|weeks?|months?|years?|dollars?|cents?|degrees?|pounds?|lbs?|ounces?|oz|gallons?|liters?|grams?|kg|people|students?|ways|points?)\.?(?:\^\{?[23]\}?)?\s*$`)
	mathThousRE    = regexp.MustCompile(`^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$`)
)

// normalizeMath puts a LaTeX answer into a canonical string.
// It removes spacing, \left/\right, text wrappers, degrees, percent, units
// and a leading "x =". It braces \frac and \sqrt arguments and drops blanks.
func normalizeMath(s string) string {
	// Repeat to a fixed point so that a normalised answer normalises to
	// itself (it is compared as a reference later).
	for i := 0; i < 4; i++ {
		t := normalizeMathOnce(s)
		if t == s {
			break
		}
		s = t
	}
	return s
}

func normalizeMathOnce(s string) string {
	s = strings.TrimSpace(s)
	s = strings.Trim(s, "$")
	s = strings.ReplaceAll(s, "\n", " ")
	if m := mathTextUnitRE.FindStringSubmatch(s); m != nil {
		if _, ok := parseNumber(mathSpacing.Replace(m[1]), false); ok {
			s = m[1]
		}
	}
	for i := 0; i < 4; i++ { // nested text wrappers
		t := mathTextRE.ReplaceAllString(s, "$1")
		if t == s {
			break
		}
		s = t
	}
	s = mathSpacing.Replace(s)
	s = strings.TrimSpace(s)
	if loc := mathVarEqRE.FindStringIndex(s); loc != nil && strings.Count(s, "=") <= 1 {
		s = strings.TrimSpace(s[loc[1]:])
	}
	// Units only when a number remains, so "2m" stays an expression.
	if mayHaveUnit(s) {
		if loc := mathUnitRE.FindStringIndex(s); loc != nil && loc[0] > 0 {
			if _, ok := parseNumber(s[:loc[0]], false); ok {
				s = s[:loc[0]]
			}
		}
	}
	s = braceArgs(s, `\frac`, 2)
	s = braceArgs(s, `\sqrt`, 1)
	s = strings.Join(strings.Fields(s), "")
	s = strings.TrimSuffix(s, ".")
	if mathThousRE.MatchString(s) {
		s = strings.ReplaceAll(s, ",", "")
	}
	return s
}

// braceArgs rewrites the brace-less arguments of cmd ("\frac12",
// "\sqrt2") into braced form ("\frac{1}{2}", "\sqrt{2}").
func braceArgs(s, cmd string, n int) string {
	var b strings.Builder
	for {
		i := strings.Index(s, cmd)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+len(cmd)])
		s = s[i+len(cmd):]
		if s != "" && isLetter(s[0]) {
			continue // a longer command such as \fracx? leave it
		}
		for k := 0; k < n; k++ {
			t := strings.TrimLeft(s, " ")
			switch {
			case strings.HasPrefix(t, "{"):
				inner, rest, ok := delegate.Braced(t)
				if !ok {
					b.WriteString(s)
					return b.String()
				}
				b.WriteString("{" + inner + "}")
				s = rest
			case strings.HasPrefix(t, "["): // \sqrt[3]{x}: keep the index, brace the radicand
				j := strings.IndexByte(t, ']')
				if j < 0 {
					b.WriteString(s)
					return b.String()
				}
				b.WriteString(t[:j+1])
				s = t[j+1:]
				k--
			case t != "" && t[0] == '\\':
				// a command argument such as \frac\pi2: take the command name
				j := 1
				for j < len(t) && isLetter(t[j]) {
					j++
				}
				b.WriteString("{" + t[:j] + "}")
				s = t[j:]
			case t != "" && t[0] != '}':
				b.WriteString("{" + t[:1] + "}")
				s = t[1:]
			}
		}
	}
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// mathValue reads a normalised answer as an exact number: an integer, a
// decimal, "a/b" or \frac{a}{b} with an optional sign.
func mathValue(s string) (*big.Rat, bool) {
	return parseNumber(s, false)
}

// mathEqual compares two normalised answers.
func mathEqual(a, b string) bool {
	if a == b {
		return true
	}
	if x, ok := mathValue(a); ok {
		if y, ok := mathValue(b); ok {
			return x.Cmp(y) == 0
		}
		return false
	}
	ao, ae, ai := splitGroup(a)
	bo, be, bi := splitGroup(b)
	if len(ai) > 1 || len(bi) > 1 {
		if ao != bo || ae != be || len(ai) != len(bi) {
			return false
		}
		if ao == "" { // a bare list: order does not matter
			return sameMultiset(ai, bi)
		}
		for i := range ai {
			if !mathEqual(ai[i], bi[i]) {
				return false
			}
		}
		return true
	}
	return strings.EqualFold(a, b) && !strings.ContainsAny(a, `\^_{}`)
}

func sameMultiset(a, b []string) bool {
	used := make([]bool, len(b))
outer:
	for _, x := range a {
		for j, y := range b {
			if !used[j] && mathEqual(x, y) {
				used[j] = true
				continue outer
			}
		}
		return false
	}
	return true
}

// splitGroup splits "(a,b]" into its brackets and top-level elements; a
// string without enclosing brackets gives empty brackets.
func splitGroup(s string) (open, close string, items []string) {
	if len(s) >= 2 && strings.ContainsRune("([", rune(s[0])) && strings.ContainsRune(")]", rune(s[len(s)-1])) && enclosed(s) {
		open, close, s = s[:1], s[len(s)-1:], s[1:len(s)-1]
	}
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case ',':
			if depth == 0 {
				items = append(items, s[start:i])
				start = i + 1
			}
		}
	}
	return open, close, append(items, s[start:])
}

// enclosed reports whether the first bracket of s closes at its last byte.
func enclosed(s string) bool {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
			if depth == 0 {
				return i == len(s)-1
			}
		}
	}
	return false
}

// afterLastBalanced is afterLast extended over lines while braces are open.
// It goes on while the answer's braces or environments are open, as in a
// matrix or \text{} broken across lines.
func afterLastBalanced(re *regexp.Regexp, s string) (string, bool) {
	locs := re.FindAllStringIndex(s, -1)
	if len(locs) == 0 {
		return "", false
	}
	rest := strings.TrimLeft(s[locs[len(locs)-1][1]:], " \t*:")
	depth := 0
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
		case '\n':
			if depth <= 0 && strings.Count(rest[:i], `\begin{`) <= strings.Count(rest[:i], `\end{`) {
				return rest[:i], true
			}
		}
	}
	return rest, true
}

// cutStatement isolates the answer in the text after "the answer is".
// When the text opens with a math span, $...$, \(...\) or \[...\], it is
// that span; else it is the text up to the end of its sentence.
func cutStatement(s string) string {
	s = strings.TrimSpace(s)
	for _, d := range [][2]string{{"$$", "$$"}, {"$", "$"}, {`\(`, `\)`}, {`\[`, `\]`}} {
		if rest, ok := strings.CutPrefix(s, d[0]); ok {
			if i := indexUnescaped(rest, d[1]); i >= 0 {
				return rest[:i]
			}
			return rest
		}
	}
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(strings.Trim(s, "$ "), ".")
}

// indexUnescaped is strings.Index skipping matches escaped by a backslash
// ("\$6" holds no closing dollar).
func indexUnescaped(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i] == '\\' && sub[0] != '\\' {
			i++
			continue
		}
		if strings.HasPrefix(s[i:], sub) {
			return i
		}
	}
	return -1
}

// mayHaveUnit is a cheap test that s could be a number followed by a unit word.
// It runs before the slow unit expression: s starts like a number and ends
// with a letter, a period or an exponent.
func mayHaveUnit(s string) bool {
	if s == "" || !strings.ContainsRune("0123456789-+.\\", rune(s[0])) {
		return false
	}
	c := s[len(s)-1]
	return isLetter(c) || c == '.' || c == '}' || c == '2' || c == '3'
}
