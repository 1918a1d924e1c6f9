package score

import (
	"math/big"
	"regexp"
	"strings"

	"github.com/delegatelab/delegate"
)

// marker is an explicit answer statement in a response.
type marker struct {
	re     *regexp.Regexp
	method string
}

// numericMarkers are tried in order after \boxed{}; within one marker the
// last occurrence in the response wins.
var numericMarkers = []marker{
	{regexp.MustCompile(`(?i)answer\s+is\s*:?`), "answer is"},
	{regexp.MustCompile(`####`), "####"},
	{regexp.MustCompile(`(?i)final\s+answer\s*[:=]|(?:^|\n)\W*answer\s*[:=]`), "final answer"},
}

// afterLast returns the text after the last match of re in s, to the line's end.
// It reports false when re does not match.
func afterLast(re *regexp.Regexp, s string) (string, bool) {
	locs := re.FindAllStringIndex(s, -1)
	if len(locs) == 0 {
		return "", false
	}
	rest := s[locs[len(locs)-1][1]:]
	rest = strings.TrimLeft(rest, " \t*:")
	if i := strings.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[:i]
	}
	return rest, true
}

// Numeric verifies a GSM8K-style numeric answer. It looks for the last
// \boxed{}, then "the answer is", "####", "Final answer:", and finally the
// last number anywhere in the response. It compares exact rationals, so
// "6.00" equals "6" and "-1,000" equals "-1000".
func Numeric(response, reference string) delegate.Verdict {
	want, ok := parseNumber(reference, true)
	got, res := extractNumeric(response)
	if !res.Found || !ok {
		return res
	}
	res.Correct = got.Cmp(want) == 0
	return res
}

func extractNumeric(response string) (r *big.Rat, res delegate.Verdict) {
	try := func(text, method string, first bool) bool {
		var s string
		var ok bool
		if v, ok2 := parseNumber(text, true); ok2 {
			r, res = v, delegate.Verdict{Found: true, Extracted: formatRat(v), Method: method}
			return true
		}
		if first {
			s, ok = firstNumber(text)
		} else {
			s, ok = ExtractNumber(text)
		}
		if !ok {
			return false
		}
		v, _ := parseNumber(s, false)
		if v == nil {
			return false
		}
		r, res = v, delegate.Verdict{Found: true, Extracted: s, Method: method}
		return true
	}
	if b, ok := delegate.Boxed(response); ok && try(b, "boxed", false) {
		return r, res
	}
	for _, m := range numericMarkers {
		if s, ok := afterLast(m.re, response); ok && try(s, m.method, true) {
			return r, res
		}
	}
	if try2 := strings.TrimSpace(response); try2 != "" && try(try2, "last number", false) {
		return r, res
	}
	return nil, delegate.Verdict{}
}
