package atropos

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rollout"
)

// creditGroup is a group record of three attempts at one task. Each has a
// lead sample and sub-agent samples. "47*28" is asked in every attempt and
// judged by its own answer; other questions are asked once.
func creditGroup(rewards []float64, tied bool) *rollout.GroupRecord {
	yes, no := true, false
	samples := [][]delegate.Sample{
		{{Role: "delegator", Question: "task"}, {Role: "subagent", Question: "47*28", Correct: &yes}, {Role: "subagent", Question: "12+5"}},
		{{Role: "delegator", Question: "task"}, {Role: "subagent", Question: "47*28", Correct: &no}},
		{{Role: "delegator", Question: "task"}, {Role: "subagent", Question: "47*28", Correct: &yes}, {Role: "subagent", Question: "9-4"}},
	}
	g := &rollout.GroupRecord{ID: "t0#0", Run: "r", GroupOverrides: rollout.GroupOverride{GroupSize: len(samples)}}
	if tied {
		g.Reason = rollout.DropEqual
	}
	for k, ss := range samples {
		g.Rollouts = append(g.Rollouts, rollout.Member{Index: k, Reward: rewards[k]})
		g.Episodes = append(g.Episodes, &delegate.Episode{Samples: ss, Outcome: delegate.Outcome{Reward: rewards[k]}})
		for range ss {
			g.Tokens = append(g.Tokens, []int{1, 2})
			g.Masks = append(g.Masks, []int{delegate.MaskIgnore, 2})
			g.InferenceLogprobs = append(g.InferenceLogprobs, []float64{1, -0.5})
			g.Messages = append(g.Messages, []delegate.Turn{})
			g.Scores = append(g.Scores, rewards[k])
			g.Advantages = append(g.Advantages, 0)
			g.SequenceRollout = append(g.SequenceRollout, k)
			g.NoTokens = append(g.NoTokens, "")
			g.Overrides = append(g.Overrides, rollout.Override{SetAdvantageToZero: tied})
		}
	}
	return g
}

// TestRoleAdvantagesArePushedCredit pushes groups as process does:
// ScoredDataOf, then JSON as the API stores it. The trainer's advantages
// per role must be reward.RoleCredit's of process's episodes, exactly,
// sample for sample. In a tie only samples judged by their own answer keep
// theirs.
func TestRoleAdvantagesArePushedCredit(t *testing.T) {
	tests := []struct {
		name    string
		rewards []float64
		tied    bool
	}{
		{"rewards differ", []float64{0.8, 0.1, 0.75}, false},
		{"tied", []float64{0.5, 0.5, 0.5}, true},
	}
	for _, tc := range tests {
		for _, est := range []reward.Estimator{reward.GRPO, reward.DrGRPO, reward.RLOO} {
			t.Run(tc.name+"/"+string(est), func(t *testing.T) {
				rec := creditGroup(tc.rewards, tc.tied)
				credits, err := reward.RoleCredit(est, rec.Episodes)
				if err != nil {
					t.Fatal(err)
				}
				var want []float64
				for _, cs := range credits {
					for _, c := range cs {
						want = append(want, c.Advantage)
					}
				}
				if tc.tied {
					n := 0
					for _, e := range rec.Episodes {
						for _, sm := range e.Samples {
							if sm.Correct == nil {
								want[n] = 0
							}
							n++
						}
					}
				}
				sd := pushed(t, rec)
				got, err := RoleAdvantages(sd, est)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("got %d advantages, want %d", len(got), len(want))
				}
				nonzero := false
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("sequence %d: got %v, want %v", i, got[i], want[i])
					}
					nonzero = nonzero || want[i] != 0
				}
				if !nonzero {
					t.Error("every advantage is 0: the comparison says nothing")
				}
				g, err := groupOf(sd, est, reward.CreditRole)
				if err != nil {
					t.Fatal(err)
				}
				for i, ro := range g.Rollouts {
					if ro.Advantage != want[i] || ro.Reward != sd.Scores[i] {
						t.Errorf("trainer's sequence %d: advantage %v reward %v, want %v and %v", i, ro.Advantage, ro.Reward, want[i], sd.Scores[i])
					}
				}
			})
		}
	}
}

// pushed is rec as a trainer reads it from the API: ScoredDataOf, encoded
// and decoded.
func pushed(t *testing.T, rec *rollout.GroupRecord) ScoredData {
	t.Helper()
	sd, err := ScoredDataOf(rec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(sd)
	if err != nil {
		t.Fatal(err)
	}
	var out ScoredData
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A group whose sequences are not its episodes' samples names no roles.
// Role credit sets it aside with the reason.
func TestRoleAdvantagesNeedRoles(t *testing.T) {
	rec := creditGroup([]float64{1, 0, 1}, false)
	rec.Episodes[1].Samples = rec.Episodes[1].Samples[:1] // one sample, two sequences
	sd := pushed(t, rec)
	for i, ov := range sd.Overrides {
		if _, ok := ov[OverrideRole]; ok {
			t.Errorf("sequence %d names role %v, want none", i, ov[OverrideRole])
		}
	}
	if _, err := groupOf(sd, reward.GRPO, reward.CreditRole); err == nil || !strings.Contains(err.Error(), "names no role") {
		t.Errorf("got error %v, want one saying a sequence names no role", err)
	}
	if _, err := groupOf(sd, reward.GRPO, reward.CreditTask); err != nil {
		t.Errorf("under task credit: %v, want the group trained", err)
	}
}
