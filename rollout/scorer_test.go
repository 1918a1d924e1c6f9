package rollout

import (
	"context"
	"errors"
	"maps"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/strategy"
)

// between returns the text of s between open and close.
func between(s, open, close string) string {
	_, rest, _ := strings.Cut(s, open)
	body, _, _ := strings.Cut(rest, close)
	return strings.TrimSpace(body)
}

// rate is the fake judge's opinion: "score N" is worth 10N, anything else 50.
func rate(answer string) int {
	if n, err := strconv.Atoi(strings.TrimPrefix(answer, "score ")); err == nil {
		return min(100, 10*n)
	}
	return 50
}

// newJudge returns a real judge over a fake model that rates answers by
// rate, in whichever order they come.
func newJudge(t *testing.T) (*judge.Judge, *modeltest.Model) {
	t.Helper()
	m := modeltest.New("judge-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		u := modeltest.LastUser(req)
		a, b := between(u, "[Answer A]", "[End of Answer A]"), between(u, "[Answer B]", "[End of Answer B]")
		return modeltest.Text("Score A: " + strconv.Itoa(rate(a)) + "\nReasoning A: fine.\nScore B: " + strconv.Itoa(rate(b)) + "\nReasoning B: fine."), nil
	})
	j, err := judge.New(delegate.Agent{Role: "judge", Model: m}, judge.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return j, m
}

// decomposeTrace runs decompose with a delegator that plans plan and
// aggregates into agg (finished with finish).
func decomposeTrace(t *testing.T, plan, agg, finish string) *delegate.Trace {
	t.Helper()
	del := modeltest.New("delegator-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		if modeltest.Contains(req, "Subtask 1") {
			r := modeltest.Text(agg)
			r.Choices[0].FinishReason = finish
			return r, nil
		}
		return modeltest.Text(plan), nil
	})
	sub := modeltest.New("subagent-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("done"), nil
	})
	s, err := strategy.New(strategy.NameDecompose, strategy.Roles{Delegator: delegate.Agent{Model: del}, Subagent: delegate.Agent{Model: sub}}, strategy.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := s.Run(context.Background(), "Request.", nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func baseTrace(t *testing.T, answer string) *delegate.Trace {
	t.Helper()
	m := modeltest.New("single-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("Final answer: " + answer), nil
	})
	s, err := strategy.New(strategy.NameSingle, strategy.Roles{Single: delegate.Agent{Model: m}}, strategy.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := s.Run(context.Background(), "Request.", nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestRewardScorer(t *testing.T) {
	goodPlan := planText("A.", "B.", "C.")
	graded := reward.DefaultGraded()
	tests := []struct {
		name       string
		task       delegate.Task
		plan, agg  string
		finish     string
		reward     func(reward.Outcome) float64
		wantFixed  string
		wantJudged bool
		want       func(o reward.Outcome) float64
	}{
		{"judged win", delegate.Task{ID: "o", Prompt: "Request."}, goodPlan, "Final Output:\nscore 8", "stop", graded.Reward, "", true,
			func(o reward.Outcome) float64 { return 0.3 - graded.CostTerm(o) }},
		{"judged win, parity", delegate.Task{ID: "o", Prompt: "Request."}, goodPlan, "Final Output:\nscore 8", "stop", reward.Parity, "", true,
			func(reward.Outcome) float64 { return 3 }},
		{"plan format failure", delegate.Task{ID: "o", Prompt: "Request."}, "no plan here", "", "stop", reward.Parity, FixedFormat, false,
			func(reward.Outcome) float64 { return -10 }},
		{"truncated answer", delegate.Task{ID: "o", Prompt: "Request."}, goodPlan, "Final Output:\nscore 8 and", "length", graded.Reward, FixedTruncated, false,
			func(o reward.Outcome) float64 { return -1 - graded.CostTerm(o) }},
		{"reference answer", delegate.Task{ID: "g", Dataset: "gsm8k", Prompt: "Request.", Answer: "45"}, goodPlan, "Final Output:\n6 * 7 + 3 = \\boxed{45}", "stop", graded.Reward, "", false,
			func(o reward.Outcome) float64 { return 1 - graded.CostTerm(o) }},
		{"wrong answer", delegate.Task{ID: "g", Dataset: "gsm8k", Prompt: "Request.", Answer: "45"}, goodPlan, "Final Output:\nThe answer is 44.", "stop", graded.Reward, "", false,
			func(o reward.Outcome) float64 { return 0 - graded.CostTerm(o) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, jm := newJudge(t)
			s := &RewardScorer{Judge: j, Reward: tt.reward} // score.Verify checks reference answers
			tr := decomposeTrace(t, tt.plan, tt.agg, tt.finish)
			rec := delegate.NewRecorder("score", "Request.", nil)
			sc, err := s.Score(context.Background(), rec, tt.task, baseTrace(t, "base"), tr)
			if err != nil {
				t.Fatal(err)
			}
			if sc.Fixed != tt.wantFixed {
				t.Errorf("fixed = %q, want %q", sc.Fixed, tt.wantFixed)
			}
			if judged := jm.Calls() > 0; judged != tt.wantJudged || (sc.Judge != nil) != tt.wantJudged {
				t.Errorf("judge calls %d, verdict %v; want judged %v", jm.Calls(), sc.Judge != nil, tt.wantJudged)
			}
			if tt.wantJudged && (sc.Judge.Outcome != judge.Win || jm.Calls() != 2 || len(rec.Finish("", delegate.Failure{}).Calls()) != 2) {
				t.Errorf("verdict %q after %d calls; want a win judged in both orders and recorded", sc.Judge.Outcome, jm.Calls())
			}
			if sc.Inputs == nil {
				t.Fatal("no reward inputs recorded")
			}
			if want := tt.want(*sc.Inputs); math.Abs(sc.Reward-want) > 1e-12 {
				t.Errorf("reward = %v, want %v", sc.Reward, want)
			}
			if got := sc.Inputs.Calls; got != 3 && tt.plan == goodPlan {
				t.Errorf("delegated calls = %d, want the 3 sub-agents", got)
			}
		})
	}
}

// TestRunWithRewardScorer runs the whole composition: real strategies, the
// real judge and reward packages, the default advantage estimator.
func TestRunWithRewardScorer(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	j, _ := newJudge(t)
	cfg := config(dir, 2, 4)
	cfg.Advantages = nil // reward.Advantages(grpo)
	sum, err := Run(context.Background(), cfg, tasks(2), f.baseline, Same(f.policy), &RewardScorer{Judge: j, Reward: reward.DefaultGraded().Reward}, nil)
	if err != nil {
		t.Fatal(err)
	}
	arts, groups, _ := checkComplete(t, dir, 2, 4)
	if sum.RolloutsScored != 8 || len(groups) != 2 {
		t.Fatalf("scored %d, groups %d; want 8 and 2", sum.RolloutsScored, len(groups))
	}
	for _, a := range arts {
		if a.Score.Judge == nil || len(a.Score.Judge.Orders) != 2 || a.ScoreTotals.Calls != 2 {
			t.Errorf("artifact %s: verdict %+v, %d judge calls; want both orders recorded", a.ID, a.Score.Judge, a.ScoreTotals.Calls)
		}
	}
	for _, gr := range groups {
		var s float64
		for _, m := range gr.Rollouts {
			s += m.Advantage
		}
		if math.Abs(s) > 1e-9 {
			t.Errorf("group %s: advantages sum to %v", gr.ID, s)
		}
		checkSequences(t, gr)
	}
}

// TestRewardScorerCostInputs checks what the cost-aware rewards read from a decompose trace.
// They read every call and the calls per model.
// The critical path is the plan, one of the three sub-agents that run side by side, and the aggregation.
func TestRewardScorerCostInputs(t *testing.T) {
	tr := parallelTrace(t)
	sc := &RewardScorer{Reward: reward.DefaultGraded().Reward}
	got, err := sc.Score(context.Background(), delegate.NewRecorder("score", "Request.", nil),
		delegate.Task{ID: "g", Dataset: "gsm8k", Prompt: "Request.", Answer: "45"}, nil, tr)
	if err != nil {
		t.Fatal(err)
	}
	o := got.Inputs
	if o.AllCalls != 5 || o.CriticalCalls != 3 {
		t.Errorf("calls %d, critical %d; want 5 and 3", o.AllCalls, o.CriticalCalls)
	}
	if want := map[string]int{"delegator-model": 2, "subagent-model": 3}; !maps.Equal(o.ModelCalls, want) {
		t.Errorf("model calls %v, want %v", o.ModelCalls, want)
	}
	if o.Latency != tr.Latency || o.CriticalPath <= 0 || o.CriticalPath > tr.Latency {
		t.Errorf("latency %v, critical path %v; want the trace's %v and a critical path within it", o.Latency, o.CriticalPath, tr.Latency)
	}
}

// TestRewardScorerAnneals checks a scorer At a trainer step, which records the step.
// It pays the critical path reward's parallelism bonus at that step's weight, Bonus·max(0, 1-step/AnnealSteps).
func TestRewardScorerAnneals(t *testing.T) {
	tr := parallelTrace(t)
	cp := reward.DefaultConfig().CriticalPath // bonus 0.2 over 100 steps
	sc := &RewardScorer{Reward: cp.Reward}
	task := delegate.Task{ID: "g", Dataset: "gsm8k", Prompt: "Request.", Answer: "45"}
	score := func(step int) Score {
		t.Helper()
		got, err := sc.At(step).Score(context.Background(), delegate.NewRecorder("score", "Request.", nil), task, nil, tr)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	none := score(cp.AnnealSteps).Reward // the bonus is spent
	const parallelism = 1 - 3.0/5        // 3 of the 5 calls on the critical path
	tests := []struct {
		step   int
		weight float64
	}{{0, 0.2}, {1, 0.198}, {50, 0.1}, {100, 0}, {150, 0}}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.step), func(t *testing.T) {
			got := score(tt.step)
			if got.Inputs.Step != tt.step {
				t.Errorf("inputs step %d, want %d", got.Inputs.Step, tt.step)
			}
			if bonus, want := got.Reward-none, tt.weight*parallelism; math.Abs(bonus-want) > 1e-9 {
				t.Errorf("bonus %v, want %v (weight %v)", bonus, want, tt.weight)
			}
		})
	}
	if sc.Step != 0 {
		t.Errorf("At changed the scorer's own step to %d", sc.Step)
	}
}

// parallelTrace is a decompose trace whose three sub-agents run side by side.
// Its right answer is 45. It has 5 calls, 3 on the critical path.
func parallelTrace(t *testing.T) *delegate.Trace {
	t.Helper()
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	del := modeltest.New("delegator-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		if modeltest.Contains(req, "Subtask 1") {
			return modeltest.Text("Final Output:\n\\boxed{45}"), nil
		}
		return modeltest.Text(planText("A.", "B.", "C.")), nil
	})
	sub := modeltest.New("subagent-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		// Each sub-agent waits for the other two, so that all three
		// overlap in time whatever the scheduler does.
		mu.Lock()
		arrived++
		if arrived == 3 {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			return nil, errors.New("the three sub-agents did not run side by side")
		}
		return modeltest.Text("done"), nil
	})
	s, err := strategy.New(strategy.NameDecompose, strategy.Roles{Delegator: delegate.Agent{Model: del}, Subagent: delegate.Agent{Model: sub}}, strategy.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := s.Run(context.Background(), "Request.", nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
