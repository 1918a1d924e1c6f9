package score

import (
	"regexp"
	"strings"
	"unicode"

	"github.com/delegatelab/delegate"
)

var (
	bbhAnswerRE = regexp.MustCompile(`(?i)the\s+answer\s+is\s*:?`)
	bbhOptionRE = regexp.MustCompile(`^\(([A-R])\)$`)
	// bbhOptionInRE finds an option letter at the start of an answer: "(A)",
	// "A)", "A", "A." or "A:".
	bbhOptionInRE = regexp.MustCompile(`^[\s*_]*(?:\(([A-R])\)|([A-R])(?:[).:,]|\s|$))`)
	bbhAnyOptRE   = regexp.MustCompile(`\(([A-R])\)`)
	bbhWordRE     = regexp.MustCompile(`[A-Za-z]+`)
	bbhIntRE      = regexp.MustCompile(`^-?\d+$`)
)

// bbhKind is how a task's answers compare.
type bbhKind int

const (
	bbhExact  bbhKind = iota // case-insensitive exact string
	bbhOption                // "(A)".."(R)"
	bbhWord                  // one word: True/False, Yes/No, valid/invalid
	bbhNumber                // an integer
	bbhWords                 // a sequence of words (word_sorting)
	bbhDyck                  // a closing bracket sequence (dyck_languages)
)

// bbhKindOf decides the comparison from the task name.
// For a task it does not know, it falls back to the shape of the target.
func bbhKindOf(task, target string) bbhKind {
	switch task {
	case "multistep_arithmetic_two", "object_counting":
		return bbhNumber
	case "word_sorting":
		return bbhWords
	case "dyck_languages":
		return bbhDyck
	case "boolean_expressions", "causal_judgement", "formal_fallacies", "navigate", "sports_understanding", "web_of_lies":
		return bbhWord
	}
	t := strings.TrimSpace(target)
	switch {
	case bbhOptionRE.MatchString(t):
		return bbhOption
	case isBBHWord(t):
		return bbhWord
	}
	if bbhIntRE.MatchString(t) {
		return bbhNumber
	}
	return bbhExact
}

func isBBHWord(t string) bool {
	switch strings.ToLower(t) {
	case "true", "false", "yes", "no", "valid", "invalid":
		return true
	}
	return false
}

// BBH verifies a BIG-Bench Hard answer for the task named by its file without ".json".
// The answer is read after the last "the answer is" when present, else from
// a \boxed{}, else the whole response. It is compared as the task's answers
// are: option letters such as "A", "(A)" or "A)", single words, integers,
// word sequences, or bracket sequences ignoring blanks.
func BBH(task, response, target string) delegate.Verdict {
	kind := bbhKindOf(task, target)
	res := extractBBH(kind, response)
	if !res.Found {
		return res
	}
	want := strings.TrimSpace(target)
	switch kind {
	case bbhNumber:
		if w, ok := parseNumber(want, false); ok {
			g, _ := parseNumber(res.Extracted, false)
			res.Correct = g != nil && g.Cmp(w) == 0
		}
	case bbhOption:
		res.Correct = res.Extracted == want
	case bbhWords:
		res.Correct = strings.Join(wordTokens(want), " ") == res.Extracted
	case bbhDyck:
		res.Correct = dyckOnly(want) == res.Extracted
	default:
		res.Correct = strings.EqualFold(res.Extracted, bbhClean(want))
	}
	return res
}

// bbhClean trims blanks, markdown emphasis, quotes and a final period.
func bbhClean(s string) string {
	for {
		t := strings.TrimSuffix(strings.TrimFunc(s, func(r rune) bool {
			return unicode.IsSpace(r) || strings.ContainsRune("*_`\"'$", r)
		}), ".")
		if t == s {
			return s
		}
		s = t
	}
}

func wordTokens(s string) []string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return unicode.IsSpace(r) || r == ',' || r == ';'
	})
	for i := range f {
		f[i] = strings.Trim(f[i], ".\"'*`")
	}
	out := f[:0]
	for _, w := range f {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

func dyckOnly(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("()[]{}<>", r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func extractBBH(kind bbhKind, response string) delegate.Verdict {
	seg, method := "", ""
	if s, ok := afterLast(bbhAnswerRE, response); ok {
		seg, method = s, "answer is"
	} else if b, ok := delegate.Boxed(response); ok {
		seg, method = textMathStrip(b), "boxed"
	} else {
		seg = strings.TrimSpace(response)
		if i := strings.LastIndexByte(seg, '\n'); i >= 0 && kind != bbhWords && kind != bbhDyck {
			seg = seg[i+1:]
		}
		method = "whole"
	}
	if i := strings.Index(seg, ". "); i >= 0 && kind != bbhDyck {
		seg = seg[:i] // "So the answer is Yes. Because ..."
	}
	seg = bbhClean(seg)
	var got string
	switch kind {
	case bbhOption:
		if m := bbhOptionInRE.FindStringSubmatch(seg); m != nil {
			got = "(" + m[1] + m[2] + ")"
		} else if m := bbhAnyOptRE.FindStringSubmatch(seg); m != nil {
			got = m[0]
		}
	case bbhWord:
		if w := bbhWordRE.FindString(seg); w != "" {
			got = strings.ToLower(w)
		}
		if !isBBHWord(got) {
			got = ""
		}
	case bbhNumber:
		if n, ok := firstNumber(seg); ok {
			got = n
		}
	case bbhWords:
		got = strings.Join(wordTokens(seg), " ")
	case bbhDyck:
		got = dyckOnly(seg)
	default:
		got = seg
	}
	if got == "" {
		return delegate.Verdict{}
	}
	return delegate.Verdict{Found: true, Extracted: got, Method: method}
}
