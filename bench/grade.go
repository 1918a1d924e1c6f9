package bench

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/delegatelab/delegate"
)

// Grade is a Grader's verdict on one answer.
type Grade struct {
	Correct bool
	// Extracted is what the grader read from the answer, or its account of the verdict.
	// A judge gives its score.
	Extracted string
	// Score is a graded score, such as a judge's 0-100 rating; nil when the grader gives none.
	Score *float64
	// Grading holds the calls grading made, such as a judge's, by role.
	// They are saved in Record.Grading, apart from the arm's own figures:
	// measuring an answer is no part of producing it.
	Grading map[string]delegate.Totals
}

// Grader grades a strategy's final answer where that may take calls of its own, such as an LLM judge's.
// An error means the answer could not be graded: the judge failed or answered nothing parseable.
// The item is then recorded with the error and counted wrong.
// The Grade's Grading is kept, since those calls were made.
// It is called from many goroutines at once.
type Grader func(ctx context.Context, task delegate.Task, answer string) (Grade, error)

// Verified adapts a delegate.Verifier, which makes no calls, to a Grader.
// An item whose answer the verifier cannot check is recorded as failed and wrong.
func Verified(v delegate.Verifier) Grader {
	return func(_ context.Context, task delegate.Task, answer string) (Grade, error) {
		d, err := v(task, answer)
		return Grade{Correct: d.Correct, Extracted: d.Extracted}, err
	}
}

// protectGrade calls the grader, turning a panic into an error carrying the
// stack.
func protectGrade(ctx context.Context, grade Grader, t delegate.Task, answer string) (g Grade, err error) {
	defer func() {
		if p := recover(); p != nil {
			g, err = Grade{}, fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return grade(ctx, t, answer)
}

// addTotals adds b into a, role by role.
func addTotals(a map[string]delegate.Totals, b map[string]delegate.Totals) {
	for role, t := range b {
		a[role] = a[role].Add(t)
	}
}
