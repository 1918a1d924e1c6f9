package atropos

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
)

func TestGroupOf(t *testing.T) {
	const I = delegate.MaskIgnore
	base := func() ScoredData {
		return ScoredData{
			Tokens:            [][]int{{1, 2, 3}, {1, 2, 4}},
			Masks:             [][]int{{I, 2, 3}, {I, 2, 4}},
			Scores:            []float64{1, 0},
			InferenceLogprobs: [][]float64{{1, -0.5, -0.5}, {1, -0.5, -1}},
		}
	}
	t.Run("advantages from the scores", func(t *testing.T) {
		g, err := groupOf(base(), reward.GRPO, reward.CreditTask)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Rollouts) != 2 || !(g.Rollouts[0].Advantage > 0) || !(g.Rollouts[1].Advantage < 0) || !g.Rollouts[0].HasAdvantage {
			t.Errorf("rollouts %+v: want the right one above 0, the wrong one below", g.Rollouts)
		}
		if e := g.Rollouts[0].Episodes[0]; len(e.Prompt) != 1 || e.Generated() != 2 {
			t.Errorf("episode %+v: want a 1-token prompt and 2 trained tokens", e)
		}
	})
	t.Run("advantages given, one zeroed", func(t *testing.T) {
		sd := base()
		sd.Advantages = [][]float64{{9, 0.7, 0.7}, {9, -0.7, -0.7}} // untrained positions do not count
		sd.Overrides = []map[string]any{{"set_advantage_to_zero": true}, {}}
		g, err := groupOf(sd, reward.GRPO, reward.CreditTask)
		if err != nil {
			t.Fatal(err)
		}
		if g.Rollouts[0].Advantage != 0 || g.Rollouts[1].Advantage != -0.7 {
			t.Errorf("advantages %v, %v; want 0 (overridden) and -0.7", g.Rollouts[0].Advantage, g.Rollouts[1].Advantage)
		}
	})
	t.Run("what each sequence was scored from", func(t *testing.T) {
		sd := base()
		// As decoded from JSON: numbers are float64. The second sequence
		// comes from an environment that says nothing, or says it wrong.
		sd.Overrides = []map[string]any{
			{OverrideCorrect: true, OverrideDelegated: true, OverrideCalls: 2.0, OverrideTokens: 31.0, OverrideCost: 0.25},
			{OverrideCorrect: "yes", OverrideCalls: "two"},
		}
		g, err := groupOf(sd, reward.GRPO, reward.CreditTask)
		if err != nil {
			t.Fatal(err)
		}
		a, b := g.Rollouts[0], g.Rollouts[1]
		want := map[string]float64{"subagent_calls": 2, "delegator_tokens": 31, "cost": 0.25}
		if !a.Correct || !a.Delegated || fmt.Sprint(a.Scalars) != fmt.Sprint(want) {
			t.Errorf("first: correct %v, delegated %v, scalars %v; want true, true, %v", a.Correct, a.Delegated, a.Scalars, want)
		}
		if b.Correct || b.Delegated || b.Scalars != nil {
			t.Errorf("second: correct %v, delegated %v, scalars %v; want nothing read", b.Correct, b.Delegated, b.Scalars)
		}
	})
	t.Run("rloo of one sequence trains nothing", func(t *testing.T) {
		sd := base()
		sd.Tokens, sd.Masks, sd.Scores, sd.InferenceLogprobs = sd.Tokens[:1], sd.Masks[:1], sd.Scores[:1], sd.InferenceLogprobs[:1]
		g, err := groupOf(sd, reward.RLOO, reward.CreditTask)
		if err != nil || len(g.Rollouts) != 0 {
			t.Errorf("groupOf: %+v, %v; want an empty group", g, err)
		}
	})
	for _, tt := range []struct {
		name string
		edit func(*ScoredData)
		want string
	}{
		{"no logprobs", func(sd *ScoredData) { sd.InferenceLogprobs = nil }, "inference_logprobs"},
		{"advantages differ within a sequence", func(sd *ScoredData) { sd.Advantages = [][]float64{{0, 1, 2}, {0, 1, 1}} }, "one advantage per sequence"},
		{"a mask that is not its token", func(sd *ScoredData) { sd.Masks[1][2] = 7 }, "sequence 1: mask 7"},
		{"scores missing", func(sd *ScoredData) { sd.Scores = sd.Scores[:1] }, "1 scores"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sd := base()
			tt.edit(&sd)
			if _, err := groupOf(sd, reward.GRPO, reward.CreditTask); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("groupOf: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestOrderBatch checks batch_order. A batch whose groups all carry it is
// put in that order, stable for equal places. A batch where some group has
// none is left as it came.
func TestOrderBatch(t *testing.T) {
	group := func(score float64, order ...float64) ScoredData {
		sd := ScoredData{Scores: []float64{score}, GroupOverrides: map[string]any{}}
		if len(order) > 0 {
			sd.GroupOverrides[keyBatchOrder] = order[0]
		}
		return sd
	}
	tests := []struct {
		name  string
		batch []ScoredData
		want  []float64 // the scores, in order
	}{
		{"ordered", []ScoredData{group(2, 2), group(0, 0), group(3, 3), group(1, 1)}, []float64{0, 1, 2, 3}},
		{"equal places keep their order", []ScoredData{group(1, 1), group(0, 0), group(2, 1)}, []float64{0, 1, 2}},
		{"one without a place", []ScoredData{group(2, 2), group(0), group(1, 1)}, []float64{2, 0, 1}},
		{"none", []ScoredData{group(1), group(0)}, []float64{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orderBatch(tt.batch)
			var got []float64
			for _, sd := range tt.batch {
				got = append(got, sd.Scores[0])
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("order %v, want %v", got, tt.want)
			}
		})
	}
}
