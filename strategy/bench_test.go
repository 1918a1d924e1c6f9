package strategy

import (
	"context"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
)

func BenchmarkParsePlan(b *testing.B) {
	text := planText(strings.Repeat("Think about it. ", 100), "</|end_subtask|>",
		strings.Repeat("a ", 200), strings.Repeat("b ", 200), strings.Repeat("c ", 200), strings.Repeat("d ", 200))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := ParsePlan(text, 3, 5); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExtractAnswer(b *testing.B) {
	text := strings.Repeat("Some reasoning with {braces} and \\frac{1}{2}. ", 100) + "\\boxed{\\frac{a}{b+{c}}}"
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, ok := delegate.ExtractAnswer(text); !ok {
			b.Fatal("no answer")
		}
	}
}

// BenchmarkDecomposeRun measures the strategy's own overhead per run
// (prompts, recording, fan-out) with instant fake models: 5 calls a run.
func BenchmarkDecomposeRun(b *testing.B) {
	delegator := modeltest.New("d", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		if modeltest.Contains(req, "Subtask 1:") {
			return modeltest.Text(testAggregate), nil
		}
		return modeltest.Text(planText(testPlanReasoning, "<|end_subtask|>", testSubtasks...)), nil
	})
	subagent := modeltest.New("s", modeltest.Reply("a short result"))
	s, err := New(NameDecompose, Roles{Delegator: delegate.Agent{Model: delegator}, Subagent: delegate.Agent{Model: subagent}}, DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if tr, err := s.Run(context.Background(), testRequest, nil); err != nil || tr.Failure != "" {
			b.Fatal(err, tr.Failure)
		}
	}
}
