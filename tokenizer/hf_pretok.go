package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// pattern is a pre-tokenizer regex of a supported family, matched by a hand-written scanner.
// Go's regexp has no lookahead, and the patterns end in \s+(?!\S). Each
// scanner tries the pattern's alternatives in order at a position and
// returns the end of the first that matches. It keeps the regex's greedy
// quantifiers and backtracking, as Oniguruma, the tokenizers library's
// regex engine, does.
type pattern int

const (
	patternGPT2   pattern = iota + 1 // GPT-2's, applied by ByteLevel with use_regex
	patternLlama3                    // Llama 3's: Qwen2's with digits in runs of up to three
	patternQwen2                     // Qwen2's, Qwen2.5's and Qwen3's
)

// The patterns as tokenizer.json spells them.
const (
	regexGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	regexLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

var knownPatterns = map[string]pattern{
	regexGPT2:   patternGPT2,
	regexLlama3: patternLlama3,
	regexQwen2:  patternQwen2,
}

// Character classes of the patterns. A byte that is not valid UTF-8 is
// classOther (it is matched by [^\s\p{L}\p{N}]).
type class uint8

const (
	classOther   class = iota
	classLetter        // \p{L}
	classNumber        // \p{N}
	classSpace         // \s other than \r and \n
	classNewline       // \r or \n
)

var asciiClass [128]class

func init() {
	for c := range 128 {
		r := rune(c)
		switch {
		case r == '\r' || r == '\n':
			asciiClass[c] = classNewline
		case unicode.IsSpace(r):
			asciiClass[c] = classSpace
		case unicode.IsLetter(r):
			asciiClass[c] = classLetter
		case unicode.IsNumber(r):
			asciiClass[c] = classNumber
		}
	}
}

// at returns the rune at s[i], its class and its width in bytes (0 at the
// end of s).
func at(s string, i int) (rune, class, int) {
	if i >= len(s) {
		return 0, classOther, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n == 1 {
		return r, classOther, 1
	}
	return r, runeClass(r), n
}

// runeClass is the class of a non-ASCII rune by Go's Unicode tables, with overrides.
// classOverrides corrects it where the tokenizers library's regex engine,
// on a newer Unicode version, differs.
func runeClass(r rune) class {
	if r >= overridesFrom {
		lo, hi := 0, len(classOverrides)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			switch o := classOverrides[m]; {
			case r < o.lo:
				hi = m
			case r > o.hi:
				lo = m + 1
			default:
				return o.c
			}
		}
	}
	return goClass(r)
}

// classRange gives the runes lo..hi the class c.
type classRange struct {
	lo, hi rune
	c      class
}

// overridesFrom is the lowest rune that classOverrides lists.
var overridesFrom = func() rune {
	if len(classOverrides) == 0 {
		return utf8.MaxRune + 1
	}
	return classOverrides[0].lo
}()

// goClass is the class of r by Go's Unicode tables.
func goClass(r rune) class {
	switch {
	case r == '\r' || r == '\n':
		return classNewline
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case unicode.IsSpace(r):
		return classSpace
	}
	return classOther
}

func isSpaceClass(c class) bool { return c == classSpace || c == classNewline }

// run returns the end of the run of runes from i whose class satisfies ok.
// It also returns the number of runes in the run.
func run(s string, i int, ok func(class) bool) (end, count int) {
	for {
		_, c, n := at(s, i)
		if n == 0 || !ok(c) {
			return i, count
		}
		i += n
		count++
	}
}

func isLetter(c class) bool { return c == classLetter }
func isNumber(c class) bool { return c == classNumber }
func isOther(c class) bool  { return c == classOther }

// next returns the end of the piece that starts at i (i < len(s)).
func (p pattern) next(s string, i int) int {
	switch p {
	case patternGPT2:
		return nextGPT2(s, i)
	case patternLlama3:
		return nextLlama(s, i, 3)
	case patternQwen2:
		return nextLlama(s, i, 1)
	}
	return len(s)
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at s[i:] (s[i] is the
// apostrophe) and returns its end or -1. With fold, letters match under
// Unicode simple case folding, which also folds U+017F LATIN SMALL LETTER
// LONG S to s.
func contraction(s string, i int, fold bool) int {
	lower := func(k int) (rune, int) {
		r, _, n := at(s, k)
		if fold {
			switch {
			case r >= 'A' && r <= 'Z':
				r += 'a' - 'A'
			case r == 'ſ':
				r = 's'
			}
		}
		return r, n
	}
	j := i + 1
	r1, n1 := lower(j)
	switch r1 {
	case 's', 't', 'm', 'd':
		return j + n1
	case 'r', 'v', 'l':
		r2, n2 := lower(j + n1)
		if r1 == 'r' && r2 == 'e' || r1 == 'v' && r2 == 'e' || r1 == 'l' && r2 == 'l' {
			return j + n1 + n2
		}
	}
	return -1
}

// nextGPT2 matches
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func nextGPT2(s string, i int) int {
	r, c, n := at(s, i)
	if r == '\'' {
		if e := contraction(s, i, false); e >= 0 {
			return e
		}
	}
	// ' ?X+' for the three classes: a space followed by X, or X.
	j := i
	if r == ' ' {
		_, c2, n2 := at(s, i+n)
		if n2 > 0 && !isSpaceClass(c2) {
			j, c = i+n, c2
		}
	}
	switch c {
	case classLetter:
		e, _ := run(s, j, isLetter)
		return e
	case classNumber:
		e, _ := run(s, j, isNumber)
		return e
	case classOther:
		e, _ := run(s, j, isOther)
		return e
	}
	return spaces(s, i)
}

// spaces matches \s+(?!\S)|\s+ at s[i:], where s[i] is white space.
// It takes the whole run at the end of s or before more white space.
// Otherwise it takes the run less its last character, or that one
// character when the run has only it.
func spaces(s string, i int) int {
	end, count := run(s, i, isSpaceClass)
	if end == len(s) || count == 1 {
		return end
	}
	_, size := utf8.DecodeLastRuneInString(s[i:end])
	return end - size
}

// nextLlama matches the Llama 3 (maxDigits 3) and Qwen2 (maxDigits 1)
// patterns
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,N}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func nextLlama(s string, i, maxDigits int) int {
	r, c, n := at(s, i)
	if r == '\'' {
		if e := contraction(s, i, true); e >= 0 {
			return e
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == classLetter {
		e, _ := run(s, i, isLetter)
		return e
	}
	if c == classOther || c == classSpace {
		if _, c2, _ := at(s, i+n); c2 == classLetter {
			e, _ := run(s, i+n, isLetter)
			return e
		}
	}
	// \p{N}{1,maxDigits}
	if c == classNumber {
		e := i
		for k := 0; k < maxDigits; k++ {
			_, ck, nk := at(s, e)
			if nk == 0 || ck != classNumber {
				break
			}
			e += nk
		}
		return e
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	j := -1
	if c == classOther {
		j = i
	} else if r == ' ' {
		if _, c2, _ := at(s, i+n); c2 == classOther {
			j = i + n
		}
	}
	if j >= 0 {
		e, _ := run(s, j, isOther)
		e, _ = run(s, e, func(c class) bool { return c == classNewline })
		return e
	}
	// \s*[\r\n]+: the white-space run up to and including its last \r or \n.
	end, _ := run(s, i, isSpaceClass)
	for k := end; k > i; {
		_, size := utf8.DecodeLastRuneInString(s[i:k])
		if s[k-size] == '\r' || s[k-size] == '\n' {
			return k
		}
		k -= size
	}
	return spaces(s, i)
}
