package strategy

import (
	"fmt"
	"strings"
)

// Plan is a parsed stage-1 output of decompose.
type Plan struct {
	Reasoning string   // the text inside the reasoning tags, trimmed
	Subtasks  []string // each subtask's text, trimmed, in order
}

// Plan tags. A subtask opens with SubtaskOpen and closes with any of
// SubtaskCloses; reasoning opens with ReasoningOpen and closes with any of
// ReasoningCloses. The reference's prompt asked for one closing spelling
// and its parser accepted another; here every spelling is accepted.
const (
	ReasoningOpen = "<|reasoning|>"
	SubtaskOpen   = "<|subtask|>"
)

// Closing spellings accepted by ParsePlan.
var (
	ReasoningCloses = []string{"</|reasoning|>", "<|end_reasoning|>"}
	SubtaskCloses   = []string{"<|end_subtask|>", "</|end_subtask|>", "</|subtask|>"}
)

// PlanReason names why a plan was rejected; a caller counts failures by it.
type PlanReason string

// The reasons a plan is rejected.
const (
	PlanNoReasoning     PlanReason = "no_reasoning"      // no reasoning block, or an empty one
	PlanUnclosedTag     PlanReason = "unclosed_tag"      // an opening tag with no closing tag before the next opening or the end
	PlanEmptySubtask    PlanReason = "empty_subtask"     // a subtask with nothing but white space inside
	PlanTooFewSubtasks  PlanReason = "too_few_subtasks"  // fewer subtasks than the minimum
	PlanTooManySubtasks PlanReason = "too_many_subtasks" // more subtasks than the maximum
	PlanTruncated       PlanReason = "truncated"         // the generation stopped at max_tokens (finish_reason "length")
)

// PlanError is a rejected plan: the reason and the figures that explain it.
type PlanError struct {
	Reason PlanReason
	Count  int    // subtasks found (too few, too many)
	Min    int    // the bounds (too few, too many)
	Max    int    //
	Index  int    // the empty subtask's number, from 1
	Tag    string // the unclosed tag
	Offset int    // the unclosed tag's byte offset in the text
}

// Error reads "plan <reason>: <detail>"; a trace failure made from it has
// kind delegate.FailurePlan, or FailurePlanTruncated.
func (e *PlanError) Error() string {
	var detail string
	switch e.Reason {
	case PlanNoReasoning:
		detail = "no text inside " + ReasoningOpen + " ... " + ReasoningCloses[0]
	case PlanUnclosedTag:
		detail = fmt.Sprintf("%s at offset %d is not closed", e.Tag, e.Offset)
	case PlanEmptySubtask:
		detail = fmt.Sprintf("subtask %d is empty", e.Index)
	case PlanTooFewSubtasks:
		detail = fmt.Sprintf("%d subtasks, want at least %d", e.Count, e.Min)
	case PlanTooManySubtasks:
		detail = fmt.Sprintf("%d subtasks, want at most %d", e.Count, e.Max)
	case PlanTruncated:
		detail = "the generation stopped at max_tokens (finish_reason length)"
	default:
		detail = "rejected"
	}
	return "plan " + string(e.Reason) + ": " + detail
}

// ParsePlan reads a delegator's plan: a reasoning block and between min and
// max subtasks. Subtask tags inside the reasoning block are not subtasks.
// Failures are returned as a *PlanError. They are checked in this order:
// no or empty reasoning; an unclosed tag; an empty subtask; too few or too
// many subtasks. With a nil error the plan has non-empty reasoning and
// between min and max non-empty subtasks.
func ParsePlan(text string, min, max int) (Plan, error) {
	var p Plan
	rOpen := strings.Index(text, ReasoningOpen)
	if rOpen < 0 {
		return Plan{}, &PlanError{Reason: PlanNoReasoning}
	}
	rBody := rOpen + len(ReasoningOpen)
	rClose, rCloseLen := firstOf(text[rBody:], ReasoningCloses)
	if rClose < 0 {
		return Plan{}, &PlanError{Reason: PlanUnclosedTag, Tag: ReasoningOpen, Offset: rOpen}
	}
	p.Reasoning = strings.TrimSpace(text[rBody : rBody+rClose])
	if p.Reasoning == "" {
		return Plan{}, &PlanError{Reason: PlanNoReasoning}
	}
	rEnd := rBody + rClose + rCloseLen

	for pos := 0; pos < len(text); {
		i := strings.Index(text[pos:], SubtaskOpen)
		if i < 0 {
			break
		}
		open := pos + i
		if open >= rOpen && open < rEnd { // a mention inside the reasoning
			pos = rEnd
			continue
		}
		body := open + len(SubtaskOpen)
		closeAt, closeLen := firstOf(text[body:], SubtaskCloses)
		next := strings.Index(text[body:], SubtaskOpen)
		if closeAt < 0 || (next >= 0 && next < closeAt) {
			return Plan{}, &PlanError{Reason: PlanUnclosedTag, Tag: SubtaskOpen, Offset: open}
		}
		s := strings.TrimSpace(text[body : body+closeAt])
		if s == "" {
			return Plan{}, &PlanError{Reason: PlanEmptySubtask, Index: len(p.Subtasks) + 1}
		}
		p.Subtasks = append(p.Subtasks, s)
		pos = body + closeAt + closeLen
	}
	switch n := len(p.Subtasks); {
	case n < min:
		return Plan{}, &PlanError{Reason: PlanTooFewSubtasks, Count: n, Min: min, Max: max}
	case n > max:
		return Plan{}, &PlanError{Reason: PlanTooManySubtasks, Count: n, Min: min, Max: max}
	}
	return p, nil
}

// firstOf returns the offset and length of the earliest of seps in s, or
// -1, 0 when none occurs.
func firstOf(s string, seps []string) (int, int) {
	at, n := -1, 0
	for _, sep := range seps {
		if i := strings.Index(s, sep); i >= 0 && (at < 0 || i < at) {
			at, n = i, len(sep)
		}
	}
	return at, n
}
