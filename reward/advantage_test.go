package reward

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestAdvantagesTable(t *testing.T) {
	// [1 2 3 4]: mean 2.5, deviations ±0.5 and ±1.5, population variance
	// (2.25+0.25+0.25+2.25)/4 = 1.25, std √1.25 = 1.11803398875;
	// leave-one-out means 3, 8/3, 7/3, 2.
	// [0 0 1]: mean 1/3, std √(2/9) = 0.47140452079; leave-one-out means
	// 1/2, 1/2, 0.
	s := math.Sqrt(1.25) + GRPOEps
	s3 := math.Sqrt(2.0/9) + GRPOEps
	tests := []struct {
		est     Estimator
		rewards []float64
		want    []float64
	}{
		{GRPO, []float64{1, 2, 3, 4}, []float64{-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s}},
		{GRPO, []float64{1, 2, 3, 4}, []float64{-1.3415207972320402, -0.4471735990773467, 0.4471735990773467, 1.3415207972320402}},
		{DrGRPO, []float64{1, 2, 3, 4}, []float64{-1.5, -0.5, 0.5, 1.5}},
		{RLOO, []float64{1, 2, 3, 4}, []float64{1 - 3, 2 - 8.0/3, 3 - 7.0/3, 4 - 2}},
		{GRPO, []float64{0, 0, 1}, []float64{(-1.0 / 3) / s3, (-1.0 / 3) / s3, (2.0 / 3) / s3}},
		{DrGRPO, []float64{0, 0, 1}, []float64{-1.0 / 3, -1.0 / 3, 2.0 / 3}},
		{RLOO, []float64{0, 0, 1}, []float64{-0.5, -0.5, 1}},
		// Parity rewards: mean -1.975.
		{DrGRPO, []float64{-10, 3, 0.1, -1}, []float64{-8.025, 4.975, 2.075, 0.975}},
		{RLOO, []float64{-10, 3, 0.1, -1}, []float64{-10 - 2.1/3, 3 - (-10.9)/3, 0.1 - (-8.0)/3, -1 - (-6.9)/3}},
		{RLOO, []float64{5, 7}, []float64{-2, 2}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v", tt.est, tt.rewards), func(t *testing.T) {
			got, err := Advantages(tt.est, tt.rewards)
			if err != nil {
				t.Fatalf("Advantages: %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d advantages, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if !near(got[i], tt.want[i], 1e-12) {
					t.Errorf("advantage %d = %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestGroupStats(t *testing.T) {
	g, err := NewGroup(GRPO, []float64{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	if g.Mean != 2.5 || !near(g.Std, math.Sqrt(1.25), 1e-15) || g.Degenerate || g.Estimator != GRPO {
		t.Errorf("group %+v, want mean 2.5, std √1.25, not degenerate", g)
	}
}

func TestDegenerateGroups(t *testing.T) {
	tests := []struct {
		est     Estimator
		rewards []float64
	}{
		{GRPO, []float64{0.1, 0.1, 0.1}}, // mean of 0.1s is not exactly 0.1 in floating point
		{DrGRPO, []float64{-10, -10}},
		{RLOO, []float64{1, 1, 1, 1}},
		{GRPO, []float64{7}},
		{DrGRPO, []float64{0}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v", tt.est, tt.rewards), func(t *testing.T) {
			g, err := NewGroup(tt.est, tt.rewards)
			if err != nil {
				t.Fatalf("NewGroup: %v", err)
			}
			if !g.Degenerate {
				t.Errorf("Degenerate = false, want true")
			}
			if len(g.Advantages) != len(tt.rewards) {
				t.Fatalf("%d advantages, want %d", len(g.Advantages), len(tt.rewards))
			}
			for i, a := range g.Advantages {
				if a != 0 {
					t.Errorf("advantage %d = %v, want 0", i, a)
				}
			}
			if g.Mean != tt.rewards[0] || g.Std != 0 {
				t.Errorf("mean %v std %v, want %v 0", g.Mean, g.Std, tt.rewards[0])
			}
		})
	}
}

func TestAdvantagesErrors(t *testing.T) {
	tests := []struct {
		name    string
		est     Estimator
		rewards []float64
		want    string
		index   int // for a *NonFiniteError; -1 otherwise
	}{
		{"nan", GRPO, []float64{1, math.NaN(), 2}, "reward 1 is NaN", 1},
		{"inf", DrGRPO, []float64{1, 2, math.Inf(1)}, "reward 2 is +Inf", 2},
		{"neg inf", RLOO, []float64{math.Inf(-1), 0}, "reward 0 is -Inf", 0},
		{"empty", GRPO, nil, "empty group", -1},
		{"rloo of one", RLOO, []float64{1}, "rloo needs at least 2 rewards, got 1", -1},
		{"unknown", "ppo", []float64{1, 2}, `estimator "ppo"`, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Advantages(tt.est, tt.rewards)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			var nf *NonFiniteError
			if got := errors.As(err, &nf); got != (tt.index >= 0) || (got && nf.Index != tt.index) {
				t.Errorf("NonFiniteError %v (%+v), want index %d", got, nf, tt.index)
			}
		})
	}
}

func TestParseEstimator(t *testing.T) {
	for _, s := range []string{"grpo", "drgrpo", "rloo"} {
		if e, err := ParseEstimator(s); err != nil || string(e) != s {
			t.Errorf("ParseEstimator(%q) = %q, %v", s, e, err)
		}
	}
	if _, err := ParseEstimator("GRPO "); err == nil {
		t.Errorf("ParseEstimator accepted %q", "GRPO ")
	}
}

// TestAdvantageProperties checks, over random groups, that advantages sum
// to zero, that RLOO is G/(G-1) times Dr. GRPO, and that GRPO is Dr. GRPO
// over (std + eps).
func TestAdvantageProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		g := 2 + rng.IntN(15)
		rs := make([]float64, g)
		scale := math.Pow(10, float64(rng.IntN(5)-2)) // 0.01 .. 100
		for i := range rs {
			switch rng.IntN(3) {
			case 0: // coarse, parity-like rewards with ties
				rs[i] = []float64{-10, -3, -2, -1, 0.1, 1, 2, 3}[rng.IntN(8)]
			default:
				rs[i] = scale * (2*rng.Float64() - 1)
			}
		}
		adv := map[Estimator][]float64{}
		for _, est := range []Estimator{GRPO, DrGRPO, RLOO} {
			grp, err := NewGroup(est, rs)
			if err != nil {
				t.Fatalf("trial %d %s %v: %v", trial, est, rs, err)
			}
			var sum float64
			for _, a := range grp.Advantages {
				sum += a
			}
			if math.Abs(sum) > 1e-9 {
				t.Fatalf("trial %d %s %v: advantages sum to %v", trial, est, rs, sum)
			}
			adv[est] = grp.Advantages
		}
		grp, _ := NewGroup(DrGRPO, rs)
		for i := range rs {
			if want := float64(g) / float64(g-1) * adv[DrGRPO][i]; !near(adv[RLOO][i], want, 1e-9) {
				t.Fatalf("trial %d %v: rloo[%d] = %v, want %v", trial, rs, i, adv[RLOO][i], want)
			}
			// Leave-one-out, computed directly.
			var others float64
			for j, r := range rs {
				if j != i {
					others += r
				}
			}
			if want := rs[i] - others/float64(g-1); !near(adv[RLOO][i], want, 1e-9*(1+math.Abs(want))) {
				t.Fatalf("trial %d %v: rloo[%d] = %v, leave-one-out %v", trial, rs, i, adv[RLOO][i], want)
			}
			if want := adv[DrGRPO][i] / (grp.Std + GRPOEps); !near(adv[GRPO][i], want, 1e-9) {
				t.Fatalf("trial %d %v: grpo[%d] = %v, want %v", trial, rs, i, adv[GRPO][i], want)
			}
		}
	}
}

func BenchmarkAdvantages(b *testing.B) {
	rs := []float64{-10, 3, 0.1, -1, 2, 1, -2, 3}
	for b.Loop() {
		if _, err := Advantages(GRPO, rs); err != nil {
			b.Fatal(err)
		}
	}
}
