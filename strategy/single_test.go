package strategy

import (
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
)

func TestSingle(t *testing.T) {
	tests := []struct {
		name       string
		fn         modeltest.Func
		wantAnswer string
		wantKind   delegate.FailureKind
	}{
		{"final answer line", modeltest.Reply("6*7=42, +3.\nFinal answer: 45 pens"), "45 pens", ""},
		{"boxed", modeltest.Reply("So \\boxed{45}."), "45", ""},
		{"no marker", modeltest.Reply("45"), "45", delegate.FailureAnswerFormat},
		{"truncated", modeltest.Script(modeltest.Truncated("6*7=42 and th")), "6*7=42 and th", delegate.FailureTruncated},
		{"call fails", modeltest.Fail(&delegate.APIError{Status: 429, Attempts: 4}), "", delegate.FailureCall},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := fake("m", tt.fn)
			tr := mustRun(t, mustNew(t, NameSingle, Roles{Single: agent(RoleSingle, m)}, DefaultConfig()), mathRequest)
			if tr.Answer != tt.wantAnswer || tr.FailureKind != tt.wantKind {
				t.Errorf("answer, failure = %q, %q; want %q and kind %q", tr.Answer, tr.Failure, tt.wantAnswer, tt.wantKind)
			}
			if len(tr.Root.Children) != 1 || tr.Root.Children[0].Name != NodeAnswer {
				t.Errorf("trace children = %v, want [answer]", childNames(tr.Root))
			}
			r := m.Requests()[0]
			if len(r.Messages) != 2 || modeltest.LastUser(r) != mathRequest || r.MaxTokens != 2048 || *r.Temperature != 0.7 {
				t.Errorf("request = %+v, want system + question, max_tokens 2048, temperature 0.7", r)
			}
			checkRole(t, tr, RoleSingle, m)
			checkTotal(t, tr)
		})
	}
}

func TestSingleRetriesRecorded(t *testing.T) {
	m := fake("m", modeltest.Fail(&delegate.APIError{Status: 429, Attempts: 4}))
	tr := mustRun(t, mustNew(t, NameSingle, Roles{Single: agent("", m)}, DefaultConfig()), "q")
	// The empty role became the default one.
	if got := tr.Roles[RoleSingle]; got.Calls != 1 || got.Errors != 1 || got.Retries != 3 {
		t.Errorf("totals = %+v, want 1 call, 1 error, 3 retries", got)
	}
}
