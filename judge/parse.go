package judge

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// ParseError says why a judge's answer gave no usable scores.
// It lists the score lines that are missing and those found but invalid.
type ParseError struct {
	Missing []string // e.g. "Score A", "Score B", "Score"
	Invalid []string // e.g. "Score A: 150 is outside 0..100"
}

func (e *ParseError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, "missing "+strings.Join(e.Missing, ", "))
	}
	parts = append(parts, e.Invalid...)
	return "parse judge scores: " + strings.Join(parts, "; ")
}

// scoreNum is the number after a score label: sign, digits, decimals and scale.
// All but the digits are optional. The sign is read so that "-5" is seen and
// rejected as out of range, not read as 5. A scale is "/100" or "out of 100".
const scoreNum = `\[?\s*([+-]?\d+(?:\.\d+)?)\s*\]?(?:\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?))?`

var (
	// strongScore is a labelled score anywhere in a line.
	// It reads "Score A: 85", "Score for Answer B = 70", "Answer A score: 85"
	// and "score (B) - 60".
	strongScore = regexp.MustCompile(`(?i)(?:\bscores?\s*(?:for\s+)?(?:(?:answer|response)\s*)?[(\[]?([AB])\b[)\]]?|\b(?:answer|response)\s*[(\[]?([AB])\b[)\]]?(?:'s)?\s+scores?)\s*(?:[:=]|[-–—]\s|is\b)\s*` + scoreNum)
	// weakScore is a bare "A: 85" or "Answer B: 70" at the start of a line.
	// It counts only when no strong line names the same answer. The label
	// must be a capital letter, so prose such as "a: 3" is left alone.
	weakScore = regexp.MustCompile(`^(?:(?i:answer|response)\s*)?[(\[]?([AB])[)\]]?\s*[:=]\s*` + scoreNum)
	// singleScore is the pointwise "Score: 85" or "Rating = 85/100".
	singleScore = regexp.MustCompile(`(?i)\b(?:(?:final|overall)\s+)?(?:score|rating)\s*(?:[:=]|is\b)\s*` + scoreNum)
	// lineLead is list and quote markup at the start of a line.
	lineLead = regexp.MustCompile(`^(?:\s*(?:[-+>]|\d+[.)])\s+)+`)
)

// cleanLine strips markdown marks, so that "**Score A:** `85`" reads "Score A: 85".
// It strips emphasis, code and heading marks and list or quote markers.
func cleanLine(line string) string {
	line = strings.Map(func(r rune) rune {
		switch r {
		case '*', '_', '`', '#':
			return -1
		}
		return r
	}, line)
	line = strings.TrimSpace(line)
	return strings.TrimSpace(lineLead.ReplaceAllString(line, ""))
}

// found is one score candidate: the label's text and its value or the
// reason it is invalid.
type found struct {
	value   float64
	invalid string
}

func readScore(label, num, scale string) found {
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return found{invalid: fmt.Sprintf("%s: %q is not a number", label, num)}
	}
	if scale != "" {
		d, err := strconv.ParseFloat(scale, 64)
		if err != nil || d != 100 {
			return found{invalid: fmt.Sprintf("%s: %s out of %s, want a score out of 100", label, num, scale)}
		}
	}
	if v < 0 || v > 100 {
		return found{invalid: fmt.Sprintf("%s: %s is outside 0..100", label, num)}
	}
	return found{value: v}
}

// ParseScores reads the scores of answers A and B from a pairwise judge's
// answer. It accepts the lines in any order, with markdown and extra text
// around them: "Score A: 85", "**Score A:** 85/100", "Score A = 85.5" or
// "Answer B score: 70". A bare "A: 85" at the start of a line counts only
// when no such line names the answer. When a label appears more than once
// the last one counts, as judges restate their final scores at the end.
// A score outside 0..100, on another scale, or missing is an error of type
// *ParseError naming each problem; no score is ever guessed.
func ParseScores(text string) (a, b float64, err error) {
	var strong, weak [2]*found
	for _, line := range strings.Split(text, "\n") {
		line = cleanLine(line)
		if line == "" {
			continue
		}
		for _, m := range strongScore.FindAllStringSubmatch(line, -1) {
			l := m[1] + m[2]
			i := labelIndex(l)
			f := readScore("Score "+strings.ToUpper(l), m[3], m[4])
			strong[i] = &f
		}
		if m := weakScore.FindStringSubmatch(line); m != nil {
			i := labelIndex(m[1])
			f := readScore("Score "+m[1], m[2], m[3])
			weak[i] = &f
		}
	}
	pe := &ParseError{}
	var vals [2]float64
	for i, name := range []string{"Score A", "Score B"} {
		f := strong[i]
		if f == nil {
			f = weak[i]
		}
		switch {
		case f == nil:
			pe.Missing = append(pe.Missing, name)
		case f.invalid != "":
			pe.Invalid = append(pe.Invalid, f.invalid)
		default:
			vals[i] = f.value
		}
	}
	if len(pe.Missing) > 0 || len(pe.Invalid) > 0 {
		return 0, 0, pe
	}
	return vals[0], vals[1], nil
}

func labelIndex(l string) int {
	if strings.EqualFold(l, "B") {
		return 1
	}
	return 0
}

// ParseScore reads the single score of a pointwise judge's answer.
// It reads "Score: 85", "**Rating:** 85/100" or "Overall score = 85.5"; the
// last such line counts. Errors are *ParseError, as for ParseScores.
func ParseScore(text string) (float64, error) {
	var last *found
	for _, line := range strings.Split(text, "\n") {
		line = cleanLine(line)
		for _, m := range singleScore.FindAllStringSubmatch(line, -1) {
			f := readScore("Score", m[1], m[2])
			last = &f
		}
	}
	switch {
	case last == nil:
		return 0, &ParseError{Missing: []string{"Score"}}
	case last.invalid != "":
		return 0, &ParseError{Invalid: []string{last.invalid}}
	}
	return last.value, nil
}
