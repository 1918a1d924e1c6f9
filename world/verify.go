package world

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/delegatelab/delegate"
)

// ErrNoAnswer is wrapped by ParseAnswer's errors.
var ErrNoAnswer = errors.New("no integer answer")

// lastInt finds integers, with an optional minus sign and well-formed
// thousands separators, not glued to letters or other digits.
var lastInt = regexp.MustCompile(`-?\d{1,3}(?:,\d{3})+\b|-?\d+\b`)

// ParseAnswer reads the integer a reply answers. It takes the first marker of
// delegate.MarkedAnswer's chain: \boxed{}, <answer>, "Final Output:" or
// "Final answer:". That answer must hold exactly one integer, or the reply is
// wrong. White space, a trailing period and thousands separators are allowed.
// A marker with something else in it is still an answer, a marker with
// something else in it is an answer, just not an integer one. With no marker
// at all, the last integer of the text is the answer. Minus signs are kept.
func ParseAnswer(text string) (int64, error) {
	if s, marker, ok := delegate.MarkedAnswer(text, nil); ok {
		return parseInt(s, marker)
	}
	all := lastInt.FindAllString(text, -1)
	if len(all) == 0 {
		return 0, fmt.Errorf("%w: no marker and no integer in %d bytes", ErrNoAnswer, len(text))
	}
	return parseInt(all[len(all)-1], "last integer")
}

func parseInt(s, where string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), ".")
	t = strings.TrimSpace(t)
	if lastInt.FindString(t) != t || t == "" {
		return 0, fmt.Errorf("%w: %s holds %q", ErrNoAnswer, where, clip(s))
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(t, ",", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s holds %q: %v", ErrNoAnswer, where, clip(s), err)
	}
	return v, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	const n = 40
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Correct reports whether a reply's answer, by ParseAnswer, is want.
func Correct(text string, want int64) bool {
	got, err := ParseAnswer(text)
	return err == nil && got == want
}

// Dataset is the Task.Dataset of the world's problems.
const Dataset = "world"

// Task is p as a task for strategies and verifiers. Its text is the prompt
// and its integer answer the reference, which Verify reads.
func (p *Problem) Task() delegate.Task {
	return delegate.Task{ID: p.ID, Dataset: Dataset, Prompt: p.Text, Answer: strconv.FormatInt(p.Answer, 10)}
}

// Verify is the delegate.Verifier of world tasks, made by Problem.Task.
// It checks the response's integer answer, by ParseAnswer, against
// t.Answer, the problem's integer. A response with no integer answer is
// wrong, not unverifiable; a task whose reference is not an integer is an
// error.
func Verify(t delegate.Task, response string) (delegate.Verdict, error) {
	want, err := strconv.ParseInt(t.Answer, 10, 64)
	if err != nil {
		return delegate.Verdict{}, fmt.Errorf("world task %s: reference %q is not an integer", t.ID, t.Answer)
	}
	got, err := ParseAnswer(response)
	if err != nil {
		return delegate.Verdict{}, nil
	}
	return delegate.Verdict{Correct: got == want, Extracted: strconv.FormatInt(got, 10), Found: true, Method: "integer"}, nil
}

var _ delegate.Verifier = Verify
