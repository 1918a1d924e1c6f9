package scripted

import (
	"context"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

func decompose(t *testing.T, d delegate.Model, s delegate.Model) delegate.Strategy {
	t.Helper()
	st, err := strategy.New(strategy.NameDecompose, strategy.Roles{
		Delegator: delegate.Agent{Role: "delegator", Model: d},
		Subagent:  delegate.Agent{Role: "solver", Model: s},
	}, transcript.StrategyConfig())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestPlannerSaysTheTranscript runs the ready-step rules in decompose's
// delegator seat on two-part problems. Each plan and aggregation must be
// the policy's transcript.Decompose, token for token as the transcript
// bills it. It needs one solver call per subtask and the right answer.
func TestPlannerSaysTheTranscript(t *testing.T) {
	ps, err := world.Generate(world.Levels()[3], 3, world.Test, 12)
	if err != nil {
		t.Fatal(err)
	}
	for _, mask := range []uint{0, 1, 2, 3} {
		d := NewPlanner(ReadyRuleName(mask, 2), ps, ReadyRule(mask))
		for _, p := range ps {
			s := modeltest.New("solver", solver(""))
			tr, err := decompose(t, d, s).Run(context.Background(), p.Text, nil)
			if err != nil {
				t.Fatal(err)
			}
			k := 0
			ep := transcript.Decompose(p, func(p *world.Problem, i int) bool {
				if !p.Steps[i].Ready() {
					return false
				}
				k++
				return mask>>uint(k-1)&1 == 1
			})
			subtasks := 0
			for _, x := range ep.Delegated {
				if x {
					subtasks++
				}
			}
			want := 1
			if mask == 3 {
				want = 2
			}
			bill := ep.Bill(false).Delegator
			got := tr.Roles["delegator"].Usage
			if tr.Failure != "" || !world.Correct(tr.Answer, p.Answer) || s.Calls() != subtasks || subtasks != want ||
				got.PromptTokens != bill.PromptTokens || got.CompletionTokens != bill.CompletionTokens {
				t.Errorf("%s on %s: answer %q (failure %q), %d solver calls, usage %+v; want %d, %d calls, the transcript's %+v",
					d.Name(), p.ID, tr.Answer, tr.Failure, s.Calls(), got, p.Answer, want, bill)
			}
		}
	}
}

// TestPlannerTakesWrongAnswers checks that aggregation uses the solver's
// answer as given. A wrong product gives a wrong final output, in the
// format.
func TestPlannerTakesWrongAnswers(t *testing.T) {
	ps, err := world.Generate(world.Levels()[3], 5, world.Test, 4)
	if err != nil {
		t.Fatal(err)
	}
	d := NewPlanner("every", ps, ReadyRule(3))
	for _, p := range ps {
		wrong := p.Steps[0].Expr()
		tr, err := decompose(t, d, modeltest.New("solver", solver(wrong))).Run(context.Background(), p.Text, nil)
		if err != nil {
			t.Fatal(err)
		}
		if world.Correct(tr.Answer, p.Answer) {
			t.Errorf("%s: answer %q is right with %s answered wrong", p.ID, tr.Answer, wrong)
		}
		if tr.Failure != "" && delegate.ParseFailureKind(tr.Failure) != delegate.FailureAnswerFormat {
			t.Errorf("%s: failure %q", p.ID, tr.Failure)
		}
	}
}

func TestPlannerUnknownProblem(t *testing.T) {
	d := NewPlanner("none", nil, ReadyRule(1))
	_, err := d.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User("Ann has 3 pens.")}})
	if err == nil {
		t.Fatal("no error for a problem the planner does not know")
	}
}

func TestReadyRuleName(t *testing.T) {
	for _, c := range []struct {
		mask  uint
		ready int
		want  string
	}{
		{1, 2, "hand over ready step 1"},
		{2, 2, "hand over ready step 2"},
		{3, 2, "hand over every ready step"},
		{1, 1, "hand over ready step 1"},
		{5, 3, "hand over ready steps 1, 3"},
	} {
		if got := ReadyRuleName(c.mask, c.ready); got != c.want {
			t.Errorf("ReadyRuleName(%d, %d) = %q, want %q", c.mask, c.ready, got, c.want)
		}
	}
}
