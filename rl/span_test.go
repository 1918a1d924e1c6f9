package rl

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
)

// withSpans copies seqs and gives sequence i the spans sp, checked.
func withSpans(t *testing.T, seqs []trainSeq, sp func(i int, s trainSeq) []Span) []trainSeq {
	t.Helper()
	out := slices.Clone(seqs)
	for i := range out {
		spans := sp(i, out[i])
		if spans == nil {
			continue
		}
		if err := checkSpans(spans, len(out[i].Completion)); err != nil {
			t.Fatal(err)
		}
		out[i].TokenAdv = tokenAdvantages(out[i].Adv, len(out[i].Completion), spans)
	}
	return out
}

// updated returns the parameters after one update of a fresh toy on seqs.
func updated(t *testing.T, cfg Config, seqs []trainSeq, check bool) []float32 {
	t.Helper()
	tr, _, p := newToy(t, cfg, nil)
	if _, err := tr.l.update(context.Background(), seqs, 1e-2, check); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(p.Data)
}

// Spans that give every token its sequence's advantage take the very same
// step as no spans, on the fast path and the clipped one.
func TestSpansOfTheTurnsAdvantageChangeNothing(t *testing.T) {
	tests := []struct {
		name   string
		epochs int
		beta   float64
		check  bool
	}{
		{"fast", 1, 0, false},
		{"checked", 1, 0, true},
		{"two epochs and kl", 2, 0.1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := toyConfig(t.TempDir())
			cfg.Epochs, cfg.KLBeta = tt.epochs, tt.beta
			_, env, _ := newToy(t, cfg, nil)
			seqs := sampledSeqs(t, env, 6)
			want := updated(t, cfg, seqs, tt.check)
			// Two spans and a gap, each at the sequence's own advantage.
			spanned := withSpans(t, seqs, func(_ int, s trainSeq) []Span {
				n := len(s.Completion)
				if n < 3 {
					return []Span{{0, n, s.Adv}}
				}
				return []Span{{0, n / 3, s.Adv}, {n/3 + 1, n, s.Adv}}
			})
			got := updated(t, cfg, spanned, tt.check)
			if !slices.Equal(got, want) {
				t.Errorf("parameters differ after an update with spans at the sequences' advantages")
			}
		})
	}
}

// A sequence whose every token has a span of advantage 0 moves the
// parameters as if it were not there (up to summation order).
func TestZeroSpanContributesNothing(t *testing.T) {
	cfg := toyConfig(t.TempDir())
	_, env, _ := newToy(t, cfg, nil)
	seqs := sampledSeqs(t, env, 6)
	for i := range seqs {
		seqs[i].Adv = float64(i%3) - 1 + 0.25
	}
	without := slices.Delete(slices.Clone(seqs), 2, 3)
	want := updated(t, cfg, without, false)
	zeroed := withSpans(t, seqs, func(i int, s trainSeq) []Span {
		if i != 2 {
			return nil
		}
		return []Span{{0, len(s.Completion), 0}}
	})
	got := updated(t, cfg, zeroed, false)
	var gap float64
	for i := range got {
		gap = max(gap, math.Abs(float64(got[i]-want[i])))
	}
	if gap > 1e-6 {
		t.Errorf("parameters differ by up to %v with a zero-advantage span and without its sequence", gap)
	}
}

// A rollout's spans reach its sequences' tokens; spans out of range,
// overlapping, not finite or not one list per episode are refused.
func TestRolloutSpans(t *testing.T) {
	base := func() []Group {
		groups := handGroups(t, [][]float64{{1, 0, 0.5, 0}})
		for k := range groups[0].Rollouts {
			r := &groups[0].Rollouts[k]
			r.HasAdvantage, r.Advantage = true, 0.25
			r.Spans = make([][]Span, len(r.Episodes))
			r.Spans[0] = []Span{{0, 1, float64(k + 1)}}
		}
		return groups
	}
	cfg := toyConfig(t.TempDir())
	cfg.GroupSize, cfg.ItemsPerStep = 4, 1
	tr, err := New(cfg, tinyParams(t, 32, 1), &fixedSource{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("per token", func(t *testing.T) {
		groups := base()
		m, err := tr.describe(1, groups)
		if err != nil {
			t.Fatal(err)
		}
		seqs, err := tr.sequences(1, m, groups)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for k, r := range groups[0].Rollouts {
			for j, e := range r.Episodes {
				s := seqs[i]
				i++
				for n := range e.Completion {
					want := 0.25
					if j == 0 && n == 0 {
						want = float64(k + 1)
					}
					if got := s.adv(n); got != want {
						t.Errorf("rollout %d sequence %d token %d: got advantage %v, want %v", k, j, n, got, want)
					}
				}
			}
		}
	})
	t.Run("zero spans and advantages are degenerate", func(t *testing.T) {
		groups := base()
		for k := range groups[0].Rollouts {
			r := &groups[0].Rollouts[k]
			r.Advantage, r.Spans[0][0].Advantage = 0, 0
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
		spans      []Span
	}{
		{"past the end", "out of range", []Span{{0, 99, 1}}},
		{"negative", "out of range", []Span{{-1, 1, 1}}},
		{"empty", "out of range", []Span{{1, 1, 1}}},
		{"overlapping", "overlaps", []Span{{0, 2, 1}, {1, 2, 1}}},
		{"out of order", "overlaps", []Span{{1, 2, 1}, {0, 1, 1}}},
		{"nan", "not finite", []Span{{0, 1, math.NaN()}}},
		{"infinite", "not finite", []Span{{0, 1, math.Inf(-1)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups := base()
			groups[0].Rollouts[1].Spans[0] = tc.spans
			_, err := tr.describe(1, groups)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one saying %q", err, tc.want)
			}
		})
	}
	t.Run("too few lists", func(t *testing.T) {
		groups := base()
		groups[0].Rollouts[1].Spans = groups[0].Rollouts[1].Spans[:0]
		_, err := tr.describe(1, groups)
		if err == nil || !strings.Contains(err.Error(), "span lists") {
			t.Errorf("got error %v, want one saying %q", err, "span lists")
		}
	})
}
