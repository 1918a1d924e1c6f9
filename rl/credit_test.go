package rl

import (
	"math"
	"strings"
	"testing"
)

// Episode advantages, when given, replace the rollout's advantage episode
// by episode; they must be one per episode and finite.
func TestEpisodeAdvantages(t *testing.T) {
	base := func() []Group {
		groups := handGroups(t, [][]float64{{1, 0, 0.5, 0}})
		for k := range groups[0].Rollouts {
			r := &groups[0].Rollouts[k]
			r.HasAdvantage, r.Advantage = true, 0.25
			r.EpisodeAdvantages = make([]float64, len(r.Episodes))
			for j := range r.EpisodeAdvantages {
				r.EpisodeAdvantages[j] = float64(10*k + j + 1)
			}
		}
		return groups
	}
	cfg := toyConfig(t.TempDir())
	cfg.GroupSize, cfg.ItemsPerStep = 4, 1
	tr, err := New(cfg, tinyParams(t, 32, 1), &fixedSource{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("per episode", func(t *testing.T) {
		groups := base()
		m, err := tr.describe(1, groups)
		if err != nil {
			t.Fatal(err)
		}
		seqs, err := tr.sequences(1, m, groups)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []float64
		for _, s := range seqs {
			got = append(got, s.Adv)
		}
		for _, r := range groups[0].Rollouts {
			want = append(want, r.EpisodeAdvantages...)
		}
		if len(got) != len(want) {
			t.Fatalf("got %d sequences, want %d", len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("sequence %d: got advantage %v, want %v", i, got[i], want[i])
			}
		}
	})
	t.Run("all zero is degenerate", func(t *testing.T) {
		groups := base()
		for k := range groups[0].Rollouts {
			clear(groups[0].Rollouts[k].EpisodeAdvantages)
		}
		m, err := tr.describe(1, groups)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := m.DegenerateGroups, 1; got != want {
			t.Errorf("degenerate groups: got %d, want %d", got, want)
		}
	})
	for _, tc := range []struct {
		name, want string
		edit       func(r *ScoredRollout)
	}{
		{"too few", "episode advantages", func(r *ScoredRollout) { r.EpisodeAdvantages = r.EpisodeAdvantages[:0] }},
		{"not finite", "not finite", func(r *ScoredRollout) { r.EpisodeAdvantages[0] = math.Inf(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups := base()
			tc.edit(&groups[0].Rollouts[1])
			_, err := tr.describe(1, groups)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
