package openenv

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/world/transcript"
)

// questionsOf reads a delegate call's questions argument. many is false
// when the call has none: it is a call with one question, read as route
// reads it. A bad list is an invalid_args tool error.
func questionsOf(args string) (qs []string, many bool, terr *ToolError) {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &m) != nil {
		return nil, false, nil
	}
	raw, ok := m["questions"]
	if !ok {
		return nil, false, nil
	}
	bad := func(format string, a ...any) *ToolError {
		return &ToolError{ErrorType: ToolInvalidArgs, Message: fmt.Sprintf(format, a...) + `; call delegate with {"questions": ["...", "..."]}`}
	}
	if _, both := m["question"]; both {
		return nil, false, bad("give question or questions, not both")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, false, bad("questions must be an array of strings")
	}
	switch {
	case len(items) == 0:
		return nil, false, bad("questions is empty")
	case len(items) > MaxQuestions:
		return nil, false, bad("%d questions: at most %d at once", len(items), MaxQuestions)
	}
	qs = make([]string, len(items))
	for i, it := range items {
		if err := json.Unmarshal(it, &qs[i]); err != nil {
			return nil, false, bad("questions[%d] is not a string", i)
		}
		if strings.TrimSpace(qs[i]) == "" {
			return nil, false, bad("questions[%d] is empty", i)
		}
	}
	return qs, true, nil
}

// answered is one parallel sub-agent call's outcome.
type answered struct {
	resp    *delegate.Response
	err     error
	start   time.Time
	latency time.Duration
}

// parallel asks the sub-agent every question at once. The result is a
// JSON array of the answers in order, each as delegate returns it, or
// "error: " and why. A failed call does not cancel the others. Every
// answered call is billed; the critical path grows by the slowest call.
// Only a done context fails the step.
func (e *episode) parallel(ctx context.Context, qs []string) (string, *ToolError, error) {
	t := e.d.gen.Temperature
	calls := make([]answered, len(qs))
	var g errgroup.Group
	g.SetLimit(MaxQuestions)
	for i, q := range qs {
		g.Go(func() error {
			c := &calls[i]
			defer func() {
				if v := recover(); v != nil {
					c.err = fmt.Errorf("sub-agent call panicked: %v\n%s", v, debug.Stack())
				}
				c.latency = time.Since(c.start)
			}()
			req := &delegate.Request{Messages: transcript.SolverMessages(q), Temperature: &t, MaxTokens: e.d.gen.MaxTokens, Seed: e.d.gen.Seed}
			c.start = time.Now()
			c.resp, c.err = e.d.sub.Chat(ctx, req)
			return nil // each call keeps its own error
		})
	}
	_ = g.Wait() // the calls return nil: their errors are in calls
	var slowest time.Duration
	results := make([]string, len(qs))
	var failures []string
	answeredN := 0
	for i, c := range calls {
		slowest = max(slowest, c.latency)
		if e.d.ended != nil {
			n := subagentNode(e.d.sub.Name(), e.d.prices.Solver, c.start, c.resp, c.err)
			n.Latency = c.latency // the call's own, not until the last one ended
			e.lastPar = append(e.lastPar, n)
		}
		if c.err != nil {
			results[i] = "error: the sub-agent failed: " + c.err.Error()
			failures = append(failures, fmt.Sprintf("question %d: the sub-agent failed: %v", i+1, c.err))
			continue
		}
		e.sub = e.sub.Add(c.resp.Usage)
		e.subN++
		answeredN++
		text, terr := subagentResult(c.resp)
		if terr != nil {
			results[i] = "error: " + terr.Message
			failures = append(failures, fmt.Sprintf("question %d: %s", i+1, terr.Message))
			continue
		}
		results[i] = text
	}
	e.path += slowest
	if answeredN > 0 {
		e.pathN++
	}
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	if len(failures) == len(qs) {
		return "", &ToolError{ErrorType: ToolExecutionError, Message: strings.Join(failures, "; ")}, nil
	}
	b, err := MarshalUnescaped(results)
	if err != nil {
		return "", &ToolError{ErrorType: ToolExecutionError, Message: "encode the answers: " + err.Error()}, nil
	}
	return string(b), nil, nil
}
