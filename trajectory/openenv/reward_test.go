package openenv

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/world"
)

// TestDelegationScore ends episodes under a configured reward. The reward
// reads the episode's outcome, and the state shows its name and terms.
// Without one, the world's reward stands and the state has no terms.
func TestDelegationScore(t *testing.T) {
	graded := reward.Graded{Lambda: 0.01, Mu: 0.1, CostUnit: reward.CostTokens}
	tests := []struct {
		name    string
		score   func(reward.Outcome) float64
		genOnly bool
	}{
		{"world", nil, false},
		{"graded, whole usage", graded.Reward, false},
		{"graded, generated tokens", graded.Reward, true},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := NewDelegation(DelegationConfig{Subagent: fakeSolver(), Split: world.Test, Score: tt.score, ScoreName: "graded test", GeneratedTokens: tt.genOnly})
			if err != nil {
				t.Fatal(err)
			}
			p, err := d.Problem(4)
			if err != nil {
				t.Fatal(err)
			}
			env, _ := d.New() // never fails
			if _, err := env.Reset(ctx, ptr[int64](4), ""); err != nil {
				t.Fatal(err)
			}
			q, _ := json.Marshal(call(ToolDelegate, map[string]string{"question": p.Steps[0].Expr()}))
			if _, err := env.Step(ctx, q); err != nil {
				t.Fatal(err)
			}
			a, _ := json.Marshal(call(ToolAnswer, map[string]any{"answer": p.Answer}))
			res, err := env.Step(ctx, a)
			if err != nil || !res.Done || res.Reward == nil {
				t.Fatalf("answer: %+v, %v", res, err)
			}
			st := env.State().(DelegationState)
			ep := env.(*episode)
			acc := ep.account()
			if tt.score == nil {
				want := world.RewardOf(world.DefaultReward(), true, acc)
				if st.Terms != nil || *res.Reward != want {
					t.Errorf("reward %v, terms %+v; want %v and no terms", *res.Reward, st.Terms, want)
				}
				return
			}
			if st.Terms == nil {
				t.Fatalf("state %+v has no terms", st)
			}
			o := st.Terms.Outcome
			wantTokens := acc.Delegator.Total()
			if tt.genOnly {
				wantTokens = acc.Delegator.CompletionTokens
			}
			if got, want := *res.Reward, graded.Reward(o); got != want {
				t.Errorf("reward: got %v, want %v", got, want)
			}
			if st.Terms.Reward != "graded test" || st.Terms.Quality != 1 || o.Correct == nil || !*o.Correct {
				t.Errorf("terms: got %+v", st.Terms)
			}
			if o.Tokens != wantTokens || o.Calls != 1 || o.ModelCalls["fake-solver"] != 1 || o.Cost != st.Spend.Dollars || o.CriticalCalls != 1 || o.AllCalls != 3 {
				t.Errorf("outcome: got %+v, want %d tokens, 1 call, cost %v", o, wantTokens, st.Spend.Dollars)
			}
			if o.CriticalPath.Seconds() != st.Spend.CriticalPathS || o.Latency < o.CriticalPath {
				t.Errorf("outcome: critical path %v, latency %v; spend's path %vs", o.CriticalPath, o.Latency, st.Spend.CriticalPathS)
			}
		})
	}
}
