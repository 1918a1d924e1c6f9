package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/world"
)

// TestDelegationJudged ends episodes of open questions by the judge's
// verdict. Without a configured reward the reward is the world's form of
// the quality, Diff/100; a failing judge is a tool error and the episode
// goes on.
func TestDelegationJudged(t *testing.T) {
	tasks := []delegate.Task{{ID: "o1", Dataset: "open", Prompt: "Why do tides happen?"}}
	failing := true
	judgeFn := func(_ context.Context, task delegate.Task, answer string, o *reward.Outcome) error {
		if failing {
			return errors.New("judge unreachable")
		}
		if task.ID != "o1" || answer != "the moon" {
			return errors.New("wrong task or answer")
		}
		o.Verdict = &judge.Verdict{Diff: 40, Candidate: 70, Baseline: 30}
		return nil
	}
	if _, err := NewDelegation(DelegationConfig{Subagent: fakeSolver(), Tasks: tasks, Verify: world.Verify}); err == nil {
		t.Error("open tasks without a judge: got no error")
	}
	d, err := NewDelegation(DelegationConfig{Subagent: fakeSolver(), Tasks: tasks, Verify: world.Verify, Judge: judgeFn})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	env, _ := d.New() // never fails
	if _, err := env.Reset(ctx, ptr[int64](0), ""); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(call(ToolAnswer, map[string]string{"answer": "the moon"}))
	res, err := env.Step(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if o := res.Value.(DelegationObservation); o.Error == nil || o.Error.ErrorType != ToolExecutionError || res.Done {
		t.Fatalf("a failing judge: error %+v, done %v; want an execution_error and the episode going on", o.Error, res.Done)
	}
	failing = false
	res, err = env.Step(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	o := res.Value.(DelegationObservation)
	st := env.State().(DelegationState)
	acc := env.(*episode).account()
	want := world.DefaultReward().Reward(reward.Outcome{FormatOK: true, Verdict: &judge.Verdict{Diff: 40}, Tokens: acc.Delegator.CompletionTokens})
	if !res.Done || res.Reward == nil || *res.Reward != want || st.Correct != nil || st.Terms != nil || !strings.Contains(o.Result, "quality 0.40") {
		t.Errorf("judged: done %v, reward %v, correct %v, terms %+v, result %q; want reward %v", res.Done, res.Reward, st.Correct, st.Terms, o.Result, want)
	}
}
