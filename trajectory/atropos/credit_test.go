package atropos

import (
	"encoding/json"
	"slices"
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

// TestCheckedSamples: a pusher's CheckSample gives each sample without
// its own result one, sent as sample_correct. The record on disk keeps
// its samples as they were.
func TestCheckedSamples(t *testing.T) {
	rec := creditGroup([]float64{1, 0, 1}, false)
	// "12+5" and "9-4" have no result in the record; the check says the
	// first is right and knows nothing of the second.
	check := func(sm delegate.Sample) *bool {
		if sm.Question != "12+5" {
			return nil
		}
		ok := true
		return &ok
	}
	sd := pushed(t, checkedSamples(rec, check))
	want := []any{nil, true, true, nil, false, nil, true, nil}
	if len(sd.Overrides) != len(want) {
		t.Fatalf("%d sequences, want %d", len(sd.Overrides), len(want))
	}
	for i, ov := range sd.Overrides {
		if got := ov[OverrideSampleCorrect]; got != want[i] {
			t.Errorf("sequence %d: sample_correct %v, want %v", i, got, want[i])
		}
	}
	if c := rec.Episodes[0].Samples[2].Correct; c != nil {
		t.Errorf("the record's sample was changed: Correct %v, want nil", *c)
	}
}

// TestNextViewsSplitsByRole: each view gets the sequences of its roles,
// with the advantages the whole group gives them; a role no view takes
// trains nothing; a sequence too long for its own view's policy
// quarantines the group.
func TestNextViewsSplitsByRole(t *testing.T) {
	rec := creditGroup([]float64{0.8, 0.1, 0.75}, false)
	sd := pushed(t, rec)
	whole, err := groupOf(sd, reward.GRPO, reward.CreditRole)
	if err != nil {
		t.Fatal(err)
	}
	lead := View{Others: true, Vocab: 10, Context: 10}
	sub := View{Roles: []string{"subagent"}, Vocab: 10, Context: 10}
	tests := []struct {
		name  string
		views []View
		want  []int // each sequence's view, -1 for none
		err   string
	}{
		{"both trained", []View{lead, sub}, []int{0, 1, 1, 0, 1, 0, 1, 1}, ""},
		{"the lead frozen", []View{sub}, []int{-1, 0, 0, -1, 0, -1, 0, 0}, ""},
		{"the sub-agent's context too short", []View{lead, {Roles: []string{"subagent"}, Vocab: 10, Context: 1}}, nil, "sequence 1 has 2 tokens, over the policy's context of 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Source{Vocab: 10, Context: 10}
			at, err := s.viewsOf(sd, tc.views)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(at, tc.want) {
				t.Fatalf("views %v, want %v", at, tc.want)
			}
			parts := splitGroup(whole, at, len(tc.views))
			next := make([]int, len(parts))
			for i, v := range tc.want {
				if v < 0 {
					continue
				}
				got := parts[v].Rollouts[next[v]]
				next[v]++
				if got.Advantage != whole.Rollouts[i].Advantage || got.Reward != whole.Rollouts[i].Reward {
					t.Errorf("sequence %d in view %d: advantage %v reward %v, want %v and %v", i, v, got.Advantage, got.Reward, whole.Rollouts[i].Advantage, whole.Rollouts[i].Reward)
				}
			}
			for v, p := range parts {
				if len(p.Rollouts) != next[v] {
					t.Errorf("view %d: %d sequences, want %d", v, len(p.Rollouts), next[v])
				}
			}
		})
	}
}
