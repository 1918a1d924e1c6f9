package rl

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/reward"
)

// fixedSource hands out prepared groups, one slice per step.
type fixedSource struct{ steps [][]Group }

func (s *fixedSource) Next(_ context.Context, step int) ([]Group, error) {
	if step > len(s.steps) {
		return nil, errors.New("no more groups")
	}
	return s.steps[step-1], nil
}

// stepOn takes one step of a fresh toy policy on groups.
// It returns the parameters after it and the step's metrics.
func stepOn(t *testing.T, cfg Config, groups []Group) ([]float32, *Metrics) {
	t.Helper()
	p := tinyParams(t, 64, 7)
	tr, err := New(cfg, p, &fixedSource{steps: [][]Group{groups}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tr.Step(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(p.Data), m
}

// toyGroups returns the toy source's groups of step 1 with their GRPO advantages.
// It gives them as a producer that computes them would, with the trainer's estimator.
func toyGroups(t *testing.T, cfg Config) []Group {
	t.Helper()
	_, src, _ := newToy(t, cfg, nil)
	groups, err := src.Next(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		var rewards []float64
		for _, r := range g.Rollouts {
			rewards = append(rewards, r.Reward)
		}
		grp, err := reward.NewGroup(cfg.Estimator, rewards)
		if err != nil {
			t.Fatal(err)
		}
		for j := range g.Rollouts {
			g.Rollouts[j].Advantage, g.Rollouts[j].HasAdvantage = grp.Advantages[j], true
		}
	}
	return groups
}

// TestSourceAdvantagesGivenOrComputed checks that given and computed advantages update alike, bit for bit.
// The rollout pipeline gives advantages; a trajectory API's groups carry scores only.
func TestSourceAdvantagesGivenOrComputed(t *testing.T) {
	cfg := toyConfig(t.TempDir())
	cfg.Steps = 1
	groups := toyGroups(t, cfg)
	withoutAdv := make([]Group, len(groups))
	for i, g := range groups {
		for _, r := range g.Rollouts {
			r.Advantage, r.HasAdvantage = 0, false
			withoutAdv[i].Rollouts = append(withoutAdv[i].Rollouts, r)
		}
	}
	var params [][]float32
	for _, gs := range [][]Group{groups, withoutAdv} {
		p, m := stepOn(t, cfg, gs)
		if m.Skipped || m.TrainedTokens == 0 {
			t.Fatalf("the step trained nothing: %+v", m)
		}
		params = append(params, p)
	}
	if !slices.Equal(params[0], params[1]) {
		t.Errorf("parameters after the step on given advantages differ from those on computed ones")
	}
}

// TestQuarantinedGroupsAreLeftOut checks that a quarantined group changes nothing in the update, bit for bit.
// The group is counted. A step of nothing but quarantined groups is skipped, not failed.
func TestQuarantinedGroupsAreLeftOut(t *testing.T) {
	cfg := toyConfig(t.TempDir())
	cfg.Steps = 1
	groups := toyGroups(t, cfg)
	with := append([]Group{{Quarantined: "token id 99999 outside the vocabulary"}}, groups...)
	want, _ := stepOn(t, cfg, groups)
	got, m := stepOn(t, cfg, with)
	if !slices.Equal(got, want) {
		t.Error("parameters after the step with a quarantined group differ from those without it")
	}
	if m.QuarantinedGroups != 1 || m.Groups != len(groups) {
		t.Errorf("quarantined %d, groups %d; want 1, %d", m.QuarantinedGroups, m.Groups, len(groups))
	}
	before := slices.Clone(tinyParams(t, 64, 7).Data)
	after, m := stepOn(t, cfg, []Group{{Quarantined: "no inference_logprobs"}})
	if !m.Skipped || m.QuarantinedGroups != 1 || !slices.Equal(after, before) {
		t.Errorf("a step of quarantined groups only: skipped %v, quarantined %d, parameters changed %v; want skipped, 1, unchanged",
			m.Skipped, m.QuarantinedGroups, !slices.Equal(after, before))
	}
}

// TestEmptyGroupsAreLeftOut checks that an empty group, an item that gave
// the policy nothing to train, changes nothing in the update, bit for bit.
// It is counted among the groups. A step of nothing but empty groups is
// skipped, not failed, and its means are left at zero.
func TestEmptyGroupsAreLeftOut(t *testing.T) {
	cfg := toyConfig(t.TempDir())
	cfg.Steps = 1
	groups := toyGroups(t, cfg)
	with := append([]Group{{Empty: true, Staleness: -1}}, groups...)
	want, wantM := stepOn(t, cfg, groups)
	got, m := stepOn(t, cfg, with)
	if !slices.Equal(got, want) {
		t.Error("parameters after the step with an empty group differ from those without it")
	}
	if m.EmptyGroups != 1 || m.Groups != len(groups)+1 || m.Items != len(groups)+1 || m.Reward != wantM.Reward || m.Rollouts != wantM.Rollouts || m.FailedGroups != 0 {
		t.Errorf("empty %d, groups %d, items %d, reward %v, rollouts %d, failed %d; want 1, %d, %d, %v, %d, 0",
			m.EmptyGroups, m.Groups, m.Items, m.Reward, m.Rollouts, m.FailedGroups, len(groups)+1, len(groups)+1, wantM.Reward, wantM.Rollouts)
	}
	before := slices.Clone(tinyParams(t, 64, 7).Data)
	after, m := stepOn(t, cfg, []Group{{Empty: true}, {Empty: true}})
	if !m.Skipped || m.EmptyGroups != 2 || m.Groups != 2 || m.Rollouts != 0 || !slices.Equal(after, before) {
		t.Errorf("a step of empty groups only: skipped %v, empty %d, groups %d, rollouts %d, parameters changed %v; want skipped, 2, 2, 0, unchanged",
			m.Skipped, m.EmptyGroups, m.Groups, m.Rollouts, !slices.Equal(after, before))
	}
	if math.IsNaN(m.Reward) || math.IsNaN(m.PolicyTokensMean) || m.Reward != 0 {
		t.Errorf("a step of empty groups only: reward %v, tokens per rollout %v; want 0, no NaN", m.Reward, m.PolicyTokensMean)
	}
}

func TestSourceRejectsBadGroups(t *testing.T) {
	cfg := toyConfig(t.TempDir())
	rng := rand.New(rand.NewPCG(1, 2))
	eps := randomEpisodes(rng, 2, 64)
	tests := []struct {
		name   string
		groups []Group
		want   string
	}{
		{"mixed advantages", []Group{{Rollouts: []ScoredRollout{{Episodes: eps[:1], HasAdvantage: true}, {Episodes: eps[1:]}}}}, "all or none"},
		{"no rollouts", []Group{{}}, "no rollouts"},
		{"empty with rollouts", []Group{{Empty: true, Rollouts: []ScoredRollout{{Episodes: eps[:1], HasAdvantage: true}}}}, "an empty group holds 1 rollouts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := New(cfg, tinyParams(t, 64, 7), &fixedSource{steps: [][]Group{tt.groups}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Step(context.Background()); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("step: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestOffPolicyImportanceWeights checks the truncated importance weights of stale groups.
// A stale group whose behaviour logprobs are the trainer's own trains as on-policy, with weights 1.
// One whose behaviour logprobs are one nat lower has weights e, truncated at 2.
// It takes exactly the step of its on-policy copy with doubled advantages.
func TestOffPolicyImportanceWeights(t *testing.T) {
	cfg := toyConfig(t.TempDir())
	cfg.Steps = 1
	groups := toyGroups(t, cfg)
	edit := func(stale int, shift float32, scale float64) []Group {
		var out []Group
		for _, g := range groups {
			ng := Group{Staleness: stale}
			for _, r := range g.Rollouts {
				var eps []Episode
				for _, e := range r.Episodes {
					e.Behaviour = slices.Clone(e.Behaviour)
					for j := range e.Behaviour {
						e.Behaviour[j] += shift
					}
					eps = append(eps, e)
				}
				r.Episodes, r.Advantage = eps, r.Advantage*scale
				ng.Rollouts = append(ng.Rollouts, r)
			}
			out = append(out, ng)
		}
		return out
	}
	step := func(gs []Group) ([]float32, *Metrics) { return stepOn(t, cfg, gs) }
	onPolicy, _ := step(edit(0, 0, 1))
	stale, m := step(edit(3, 0, 1))
	if m.OffPolicySequences == 0 || m.StalenessMax != 3 || math.Abs(m.ISWeightMean-1) > 1e-3 || m.ISTruncFrac != 0 {
		t.Errorf("stale group with the trainer's logprobs: metrics %+v; want weights about 1, none truncated, staleness 3", m)
	}
	if want := []int{0, 0, 0, len(groups)}; !slices.Equal(m.StalenessGroups, want) {
		t.Errorf("staleness histogram %v, want %v (every group 3 steps behind)", m.StalenessGroups, want)
	}
	var gap float64
	for i := range onPolicy {
		gap = max(gap, math.Abs(float64(onPolicy[i]-stale[i])))
	}
	if gap > 1e-4 {
		t.Errorf("weights of about 1 moved the parameters %v away from the on-policy step", gap)
	}
	doubled, _ := step(edit(0, 0, 2))
	truncated, m := step(edit(-1, -1, 1))
	if m.UnknownVersion != len(groups) || m.ISTruncFrac != 1 || m.ISWeightMin < 2.7 || m.ISWeightMax > 2.72 {
		t.Errorf("behaviour one nat lower: metrics %+v; want every weight e ≈ 2.718, all truncated, versions unknown", m)
	}
	if !slices.Equal(doubled, truncated) {
		t.Error("weights truncated at 2 do not take the step of doubled advantages")
	}
}
