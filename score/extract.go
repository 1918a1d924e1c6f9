// Package score checks model answers against benchmark references.
// Each verifier extracts the answer a model committed to, such as a last
// \boxed{}, an explicit "the answer is" or a final number. It compares that
// with the reference after normalisation. The delegate.Verdict says what was
// found and how, so a wrong grade can be traced to the extraction that made it.
// All functions are pure and safe for concurrent use.
package score

import (
	"math/big"
	"regexp"
	"strings"
)

// numberRE matches a number as written in prose, or a simple fraction a/b.
// A number has an optional sign and dollar sign, digits with optional
// thousands separators, and an optional decimal part.
var numberRE = regexp.MustCompile(`-?\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+(?:\.\d+)?)?|-?\$?\.\d+`)

// numbers returns the numbers in text, keeping a minus only where it reads as a sign.
// In "16-3" it is a subtraction. A Unicode minus sign counts as "-".
func numbers(text string) []string {
	text = strings.ReplaceAll(text, "\u2212", "-")
	locs := numberRE.FindAllStringIndex(text, -1)
	out := make([]string, 0, len(locs))
	for _, l := range locs {
		m := text[l[0]:l[1]]
		if strings.HasPrefix(m, "-") && l[0] > 0 {
			if c := text[l[0]-1]; isAlnum(c) || c == ')' || c == '}' {
				m = m[1:]
			}
		}
		// A trailing "/x" that is not a fraction, e.g. a date, stays a fraction
		// here; NormalizeNumber judges it.
		out = append(out, m)
	}
	return out
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// ExtractNumber returns the last number written in text, normalised by
// NormalizeNumber ("-1,000.50" -> "-1000.5"). It reports false when text
// holds no number.
func ExtractNumber(text string) (string, bool) {
	ns := numbers(text)
	for i := len(ns) - 1; i >= 0; i-- {
		if n, ok := NormalizeNumber(ns[i]); ok {
			return n, true
		}
	}
	return "", false
}

// firstNumber is ExtractNumber for the first number in text.
func firstNumber(text string) (string, bool) {
	for _, m := range numbers(text) {
		if n, ok := NormalizeNumber(m); ok {
			return n, true
		}
	}
	return "", false
}

var (
	numLeadRE  = regexp.MustCompile(`^([+-]?)\s*\$?\s*((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:\s*/\s*((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?))?`)
	texFracRE  = regexp.MustCompile(`^([+-]?)\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}`)
	unitTailRE = regexp.MustCompile(`^[\s%.]*(?:[A-Za-z][A-Za-z.'\s]*)?(?:\^?\{?[23]\}?)?[\s.]*$`)
	texNoise   = strings.NewReplacer("\u2212", "-", `\$`, "", `\%`, "%", `\!`, "", `\,`, "", `\;`, "", `\ `, " ", `{,}`, ",", `\left`, "", `\right`, "")
	textCmdRE  = regexp.MustCompile(`\\(?:text|textbf|mbox|mathrm)\s*\{([^{}]*)\}`)
)

// maxNumberLen bounds the digits of one number, so that a pathological
// response cannot make exact arithmetic slow.
const maxNumberLen = 200

// NormalizeNumber parses a number as a model or a dataset writes it, in canonical form.
// So "1,000" -> "1000", "$6.00" -> "6", "-3.50%" -> "-3.5", "7 apples" -> "7",
// "3/4" and "\frac{3}{4}" -> "0.75", "1/3" -> "1/3". Unit words may follow
// the number but no other digits. It reports false when s is not a single
// number.
func NormalizeNumber(s string) (string, bool) {
	r, ok := parseNumber(s, true)
	if !ok {
		return "", false
	}
	return formatRat(r), true
}

// parseNumber is NormalizeNumber returning the exact value. With units
// false nothing but the number (and a percent sign) may be written.
func parseNumber(s string, units bool) (*big.Rat, bool) {
	s = textCmdRE.ReplaceAllString(s, " $1")
	s = strings.TrimSpace(texNoise.Replace(s))
	s = strings.TrimLeft(s, "≈~ ")
	var r *big.Rat
	var tail string
	if m := texFracRE.FindStringSubmatch(s); m != nil {
		a, ok1 := parseNumber(m[2], false)
		b, ok2 := parseNumber(m[3], false)
		if !ok1 || !ok2 || b.Sign() == 0 {
			return nil, false
		}
		r = new(big.Rat).Quo(a, b)
		if m[1] == "-" {
			r.Neg(r)
		}
		tail = s[len(m[0]):]
	} else {
		m := numLeadRE.FindStringSubmatch(s)
		if m == nil || len(m[0]) > maxNumberLen {
			return nil, false
		}
		var ok bool
		r, ok = new(big.Rat).SetString(strings.ReplaceAll(strings.TrimSuffix(m[2], "."), ",", ""))
		if !ok {
			return nil, false
		}
		if m[3] != "" {
			d, ok := new(big.Rat).SetString(strings.ReplaceAll(m[3], ",", ""))
			if !ok || d.Sign() == 0 {
				return nil, false
			}
			r.Quo(r, d)
		}
		if m[1] == "-" {
			r.Neg(r)
		}
		tail = s[len(m[0]):]
	}
	if !units {
		if strings.Trim(tail, " %") != "" {
			return nil, false
		}
	} else if strings.HasPrefix(tail, "/") || !unitTailRE.MatchString(tail) {
		return nil, false
	}
	return r, true
}

// formatRat writes r as an integer, an exact decimal, or "a/b" when its
// decimal expansion does not terminate.
func formatRat(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	d := new(big.Int).Set(r.Denom())
	digits := 0
	two, five := big.NewInt(2), big.NewInt(5)
	m := new(big.Int)
	for _, p := range []*big.Int{two, five} {
		for {
			q, rem := new(big.Int).QuoRem(d, p, m)
			if rem.Sign() != 0 {
				break
			}
			d = q
			digits++
		}
	}
	if d.Cmp(big.NewInt(1)) != 0 {
		return r.RatString()
	}
	s := r.FloatString(digits)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
