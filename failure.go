package delegate

import (
	"fmt"
	"strings"
)

// FailureKind names why a run produced no proper answer; "" when it did.
type FailureKind string

// Kinds of failure. A strategy records one in Trace.FailureKind.
const (
	FailureCall          FailureKind = "call failed"    // a call the run cannot do without failed
	FailureAnswerFormat  FailureKind = "answer format"  // no answer marker: the whole reply is the answer
	FailureTruncated     FailureKind = "truncated"      // the final reply stopped at max_tokens; the answer is kept
	FailureMaxTurns      FailureKind = "max turns"      // route: the strong model still called tools after max_turns
	FailureCanceled      FailureKind = "canceled"       // the context ended the run
	FailurePrompt        FailureKind = "prompt"         // a prompt template failed to render
	FailurePanic         FailureKind = "panic"          // a goroutine of the run panicked (a bug)
	FailurePlan          FailureKind = "plan"           // the delegator's plan was rejected
	FailurePlanTruncated FailureKind = "plan truncated" // the delegator's plan stopped at max_tokens
)

// Failure is why a run produced no proper answer.
// It has a kind for code to switch on and a message for people.
// The zero Failure is no failure.
type Failure struct {
	Kind FailureKind
	// Message reads "<kind>: <detail>"; a rejected plan's reads
	// "plan <reason>: <detail>".
	Message string
}

// Failed returns a failure of kind whose detail is formatted from format
// and args.
func Failed(kind FailureKind, format string, args ...any) Failure {
	return Failure{Kind: kind, Message: string(kind) + ": " + fmt.Sprintf(format, args...)}
}

// ParseFailureKind returns the kind of a failure message. It is for text
// written before the kind was recorded beside it (trace files of earlier
// builds, bench records); new code reads Trace.FailureKind.
func ParseFailureKind(message string) FailureKind {
	if message == "" {
		return ""
	}
	kind, _, _ := strings.Cut(message, ": ")
	switch {
	case kind == string(FailurePlanTruncated):
		return FailurePlanTruncated
	case strings.HasPrefix(kind, string(FailurePlan)+" "):
		return FailurePlan
	}
	return FailureKind(kind)
}
