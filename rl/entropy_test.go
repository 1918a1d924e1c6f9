package rl

import (
	"math"
	"testing"
)

// Each trained token gains c times its surprisal; masked tokens and
// tokens without a logprob keep their advantage.
func TestEntropyAdvantages(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name string
		seq  trainSeq
		c    float64
		want []float64
	}{
		{"sequence advantage", trainSeq{Episode: Episode{Completion: []int{1, 2, 3}, Behaviour: []float32{0, -1, -2}}, Adv: 0.5},
			0.1, []float64{0.5, 0.6, 0.7}},
		{"token advantages", trainSeq{Episode: Episode{Completion: []int{1, 2}, Behaviour: []float32{-0.5, -3}}, Adv: 1, TokenAdv: []float64{-1, 2}},
			0.2, []float64{-0.9, 2.6}},
		{"masked token", trainSeq{Episode: Episode{Completion: []int{1, 2, 3}, Behaviour: []float32{-1, nan, -1}, Masked: []bool{false, true, false}}, Adv: 0},
			1, []float64{1, 0, 1}},
		{"no logprob", trainSeq{Episode: Episode{Completion: []int{1, 2}, Behaviour: []float32{nan, -2}}, Adv: 0}, 0.5, []float64{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := entropyAdvantages(tt.seq, tt.c)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for j := range got {
				if math.Abs(got[j]-tt.want[j]) > 1e-6 {
					t.Errorf("got %v, want %v", got, tt.want)
					break
				}
			}
		})
	}
}

// With the bonus a step's tokens get their rollout's advantage plus c
// times their surprisal; without it they get no token advantages, as
// before the field.
func TestEntropyBonusIsTheSurprisalInTheAdvantage(t *testing.T) {
	const c = 0.3
	cfg := toyConfig(t.TempDir())
	groups := handGroups(t, [][]float64{{1, 0, 0.5, 0}})
	cfg.GroupSize, cfg.ItemsPerStep = 4, 1
	tr, _, _ := newToy(t, cfg, nil)
	m, err := tr.describe(1, groups)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := tr.sequences(1, m, groups)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range plain {
		if s.TokenAdv != nil {
			t.Fatalf("without the bonus a sequence has token advantages %v", s.TokenAdv)
		}
	}
	cfg.EntropyBonus = c
	tb, _, _ := newToy(t, cfg, nil)
	bonus, err := tb.sequences(1, m, groups)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range bonus {
		if s.TokenAdv == nil {
			t.Fatalf("sequence %d: no token advantages with the bonus", i)
		}
		for j, got := range s.TokenAdv {
			want := plain[i].Adv - c*float64(s.Behaviour[j])
			if math.Abs(got-want) > 1e-9 {
				t.Fatalf("sequence %d token %d: advantage %v, want %v", i, j, got, want)
			}
		}
	}
}
