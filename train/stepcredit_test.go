package train

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/world"
)

// stepTrace is a route trace of p answering answer. It has one solver
// call per question, each replied to with the matching reply.
func stepTrace(answer string, questions, replies []string) *delegate.Trace {
	root := &delegate.Node{Name: "route"}
	root.Children = append(root.Children, &delegate.Node{ID: 1, Name: "delegator", Model: "router", Role: RoleDelegator,
		Usage: delegate.Usage{CompletionTokens: 200}})
	for i, q := range questions {
		out := delegate.Message{Role: delegate.RoleAssistant, Content: replies[i]}
		root.Children = append(root.Children, &delegate.Node{ID: 2 + i, Name: "solver", Model: "solver", Role: RoleSubagent,
			Messages: []delegate.Message{delegate.User(q)}, Output: &out})
	}
	return &delegate.Trace{Strategy: "route", Answer: answer, Root: root, Roles: map[string]delegate.Totals{
		RoleDelegator: {Calls: 1, Usage: delegate.Usage{CompletionTokens: 200}},
		RoleSubagent:  {Calls: len(questions)},
	}}
}

// TestStepScorer checks that --credit step charges 1 per wrong solver
// answer beyond the one a wrong final answer pays for. Every other rollout
// scores as the task's reward does.
func TestStepScorer(t *testing.T) {
	ps, err := world.Generate(world.DefaultConfig(), 1, world.Train, 1)
	if err != nil {
		t.Fatal(err)
	}
	task := ps[0].Task()
	right, wrong := world.Boxed(ps[0].Answer), world.Boxed(ps[0].Answer+1)
	for _, c := range []struct {
		name      string
		answer    string
		questions []string
		replies   []string
		wantWrong int
		want      float64 // step's reward less the task's
	}{
		{"nothing delegated, right", right, nil, nil, 0, 0},
		{"nothing delegated, wrong", wrong, nil, nil, 0, 0},
		{"one right answer taken", right, []string{"47*28"}, []string{"1316"}, 0, 0},
		{"one wrong answer, final wrong", wrong, []string{"47*28"}, []string{"1317"}, 1, 0},
		{"two wrong answers, final wrong", wrong, []string{"67*28", "5000-37"}, []string{"1877", "5037"}, 2, -1},
		{"a right and a wrong answer, final wrong", wrong, []string{"47*28", "5000-37"}, []string{"1316", "5037"}, 1, 0},
		{"three wrong answers, final wrong", wrong, []string{"67*28", "5000-37", "81*12"}, []string{"1", "2", "3"}, 3, -2},
		{"one wrong answer, final right", right, []string{"67*28"}, []string{"1877"}, 1, -1},
		{"a question not of the world", wrong, []string{"what is 2 and 2"}, []string{"5"}, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := stepTrace(c.answer, c.questions, c.replies)
			if got := solverWrong(tr); got != c.wantWrong {
				t.Errorf("solverWrong = %d, want %d", got, c.wantWrong)
			}
			base := Scorer(world.DefaultReward())
			b, err := base.Score(context.Background(), nil, task, nil, tr)
			if err != nil {
				t.Fatal(err)
			}
			s, err := stepScorer{base}.At(3).Score(context.Background(), nil, task, nil, tr)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Reward - b.Reward; math.Abs(got-c.want) > 1e-12 {
				t.Errorf("step reward %v less task reward %v = %v, want %v", s.Reward, b.Reward, got, c.want)
			}
		})
	}
}

// TestCoverageScalars checks a rollout's metrics where the coverage
// narrows the products. They count the products worth delegating inside
// and outside it, and those handed over. Elsewhere they hold no such key.
func TestCoverageScalars(t *testing.T) {
	op := func(o world.Op, x, y int64) world.Step {
		return world.Step{Op: o, X: world.Operand{Value: x}, Y: world.Operand{Value: y}, Result: o.Apply(x, y)}
	}
	p := &world.Problem{Steps: []world.Step{op(world.Mul, 47, 28), op(world.Mul, 67, 28), op(world.Mul, 81, 3), op(world.Sub, 5000, 37)}}
	tr := stepTrace("0", []string{"47*28", "67*28", "81*3", "5000-37"}, []string{"1316", "1876", "243", "4963"})
	got := scalars(tr, p, world.DigitsCoverage())
	for key, want := range map[string]float64{
		StepsCoveredMetric: 1, StepsUncoveredMetric: 1, DelegatedCoveredMetric: 1, DelegatedUncoveredMetric: 1,
		DelegatedMetric(world.Mul): 3, "subagent_wrong": 0,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	none := stepTrace("0", nil, nil)
	for _, o := range []world.Op{world.Mul, world.Sub} {
		if v, ok := scalars(none, p, world.Coverage{})[DelegatedMetric(o)]; !ok || v != 0 {
			t.Errorf("nothing delegated: %s = %v (set %v), want 0, set", DelegatedMetric(o), v, ok)
		}
	}
	if _, ok := scalars(none, p, world.Coverage{})[DelegatedMetric(world.Add)]; ok {
		t.Errorf("a problem with no sum has key %s", DelegatedMetric(world.Add))
	}
	if v, ok := scalars(none, p, world.DigitsCoverage())[DelegatedCoveredMetric]; !ok || v != 0 {
		t.Errorf("nothing delegated: %s = %v (set %v), want 0, set", DelegatedCoveredMetric, v, ok)
	}
	if _, ok := scalars(tr, p, world.Coverage{})[StepsCoveredMetric]; ok {
		t.Errorf("the default world's coverage has key %s", StepsCoveredMetric)
	}
}

// TestConfigCreditStep: step and decision credit go with route training
// the delegator alone, and are refused elsewhere by name.
func TestConfigCreditStep(t *testing.T) {
	for _, credit := range []string{reward.CreditStep, reward.CreditDecision, reward.CreditCounterfactual} {
		for _, c := range []struct {
			mode, train string
			ok          bool
		}{
			{ModeRoute, TrainDelegator, true},
			{ModeRoute, TrainBoth, false},
			{ModeRoute, TrainSolver, false},
			{ModeMLPO, TrainDelegator, false},
			{ModeDecompose, TrainDelegator, false},
		} {
			t.Run(credit+"/"+c.mode+"/"+c.train, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.Mode, cfg.Train, cfg.Credit = c.mode, c.train, credit
				err := cfg.Validate()
				if got := err == nil; got != c.ok {
					t.Fatalf("valid %v (%v), want %v", got, err, c.ok)
				}
				if want := `credit: "` + credit + `" goes with mode route`; err != nil && !strings.Contains(err.Error(), want) {
					t.Errorf("error %q, want one saying %q", err, want)
				}
			})
		}
	}
}

// TestConfigCreditStepRefusesCostRewards: step and decision credit value
// answers on the world's reward, so a cost-aware training reward is
// refused beside them.
func TestConfigCreditStepRefusesCostRewards(t *testing.T) {
	for _, credit := range []string{reward.CreditStep, reward.CreditDecision, reward.CreditCounterfactual} {
		cfg := DefaultConfig()
		cfg.Credit, cfg.RewardKind = credit, reward.KindCriticalPath
		err := cfg.Validate()
		if want := `critical_path does not go with credit "` + credit + `"`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("credit %s: Validate: %v, want the reward kind refused", credit, err)
		}
	}
}
