package rl

import (
	"math"
	"slices"
	"testing"

	"github.com/delegatelab/delegate/reward"
)

// TestCheckRollout checks each reason a rollout is refused, and that a
// sound one passes.
func TestCheckRollout(t *testing.T) {
	ep := Episode{Node: "delegator#1", Calls: 1, Prompt: []int{1, 2, 3}, Completion: []int{4, 5}}
	tests := []struct {
		name string
		r    ScoredRollout
		want string // "" for no error
	}{
		{"sound", ScoredRollout{Episodes: []Episode{ep}, Reward: 1, Scalars: map[string]float64{"calls": 2}}, ""},
		{"reward NaN", ScoredRollout{Episodes: []Episode{ep}, Reward: math.NaN()}, "a reward or advantage is not finite"},
		{"advantage infinite", ScoredRollout{Episodes: []Episode{ep}, Advantage: math.Inf(-1)}, "a reward or advantage is not finite"},
		{"episode advantages without HasAdvantage", ScoredRollout{Episodes: []Episode{ep}, EpisodeAdvantages: []float64{1}},
			"1 episode advantages for 1 episodes (with HasAdvantage false): want one per episode, given"},
		{"episode advantage NaN", ScoredRollout{Episodes: []Episode{ep}, HasAdvantage: true, EpisodeAdvantages: []float64{math.NaN()}},
			"an episode advantage is not finite"},
		{"scalar infinite", ScoredRollout{Episodes: []Episode{ep}, Scalars: map[string]float64{"cost": math.Inf(1)}}, `metric "cost" is +Inf`},
		{"sequence at the context", ScoredRollout{Episodes: []Episode{{Node: "delegator#2", Prompt: make([]int, 6), Completion: make([]int, 3)}}},
			"sequence delegator#2 of 9 tokens exceeds the context of 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkRollout(tt.r, 8)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("checkRollout: got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCountStaleness checks the staleness histogram, maximum, mean and
// the count of unknown versions.
func TestCountStaleness(t *testing.T) {
	tests := []struct {
		name      string
		staleness []int
		histogram []int
		max       int
		mean      float64
		unknown   int
	}{
		{"none", nil, nil, 0, 0, 0},
		{"on-policy", []int{0, 0}, []int{2}, 0, 0, 0},
		{"mixed", []int{0, 2, 2, -1}, []int{1, 0, 2}, 2, 4.0 / 3, 1},
		{"all unknown", []int{-1, -1}, nil, 0, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Metrics{}
			s := stepSums{rewards: []float64{1}}
			for _, st := range tt.staleness {
				s.countStaleness(m, st)
			}
			s.means(m)
			if !slices.Equal(m.StalenessGroups, tt.histogram) || m.StalenessMax != tt.max || m.UnknownVersion != tt.unknown || math.Abs(m.StalenessMean-tt.mean) > 1e-12 {
				t.Errorf("got histogram %v, max %d, mean %v, unknown %d; want %v, %d, %v, %d",
					m.StalenessGroups, m.StalenessMax, m.StalenessMean, m.UnknownVersion, tt.histogram, tt.max, tt.mean, tt.unknown)
			}
		})
	}
}

// TestAdvantages checks how a group's advantages are settled: kept,
// computed, refused when only some rollouts carry one, or the group
// dropped when RLOO has too few rollouts.
func TestAdvantages(t *testing.T) {
	rollouts := func(has ...bool) []ScoredRollout {
		var rs []ScoredRollout
		for i, h := range has {
			rs = append(rs, ScoredRollout{Reward: float64(i), HasAdvantage: h, Advantage: map[bool]float64{true: 0.5}[h]})
		}
		return rs
	}
	tests := []struct {
		name               string
		est                reward.Estimator
		rs                 []ScoredRollout
		failed, degenerate int
		kept               int  // rollouts left in the group
		computed           bool // the estimator gave the advantages
		wantErr            string
	}{
		{"no rollouts", reward.GRPO, nil, 1, 0, 0, false, ""},
		{"all carry one", reward.GRPO, rollouts(true, true), 0, 0, 2, false, ""},
		{"some carry one", reward.GRPO, rollouts(true, false, false), 0, 0, 3, false, "1 of 3 rollouts carry an advantage; all or none must"},
		{"computed", reward.GRPO, rollouts(false, false), 0, 0, 2, true, ""},
		{"rloo alone", reward.RLOO, rollouts(false), 1, 0, 0, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &Trainer{cfg: Config{Estimator: tt.est}}
			g := &Group{Rollouts: tt.rs}
			var rewards []float64
			has := 0
			for _, r := range tt.rs {
				rewards = append(rewards, r.Reward)
				if r.HasAdvantage {
					has++
				}
			}
			m := &Metrics{}
			err := tr.advantages(m, g, rewards, has)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.FailedGroups != tt.failed || m.DegenerateGroups != tt.degenerate || len(g.Rollouts) != tt.kept {
				t.Errorf("got failed %d, degenerate %d, %d rollouts; want %d, %d, %d", m.FailedGroups, m.DegenerateGroups, len(g.Rollouts), tt.failed, tt.degenerate, tt.kept)
			}
			for j, r := range g.Rollouts {
				if !r.HasAdvantage {
					t.Errorf("rollout %d has no advantage", j)
				}
			}
			if tt.computed && g.Rollouts[0].Advantage >= g.Rollouts[1].Advantage {
				t.Errorf("computed advantages %v, %v: want the higher reward's higher", g.Rollouts[0].Advantage, g.Rollouts[1].Advantage)
			}
		})
	}
}
