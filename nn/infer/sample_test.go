package infer

import (
	"math"
	"math/rand/v2"
	"testing"
)

// sampleSoftmax64 is the reference softmax of logits/temp in float64.
func sampleSoftmax64(logits []float32, temp float64) []float64 {
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	p := make([]float64, len(logits))
	var sum float64
	for i, l := range logits {
		p[i] = math.Exp((float64(l) - mx) / temp)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

func TestSamplePickGreedy(t *testing.T) {
	tests := []struct {
		name   string
		logits []float32
		sp     sampleParams
		want   int
	}{
		{"argmax", []float32{0.1, 2.5, -1, 2.4}, sampleParams{}, 1},
		{"tie takes lowest id", []float32{3, 1, 3, 0}, sampleParams{}, 0},
		{"negative logits", []float32{-5, -4, -6}, sampleParams{}, 1},
		{"top-k 1 is greedy at any temperature", []float32{0, 1, 9, 2}, sampleParams{temperature: 5, topK: 1}, 2},
		{"tiny temperature", []float32{0.1, 2.5, -1, 2.4}, sampleParams{temperature: 1e-300}, 1},
		{"tiny temperature with top-p", []float32{0.1, 2.5, -1, 2.4}, sampleParams{temperature: 1e-300, topP: 0.5}, 1},
	}
	s := newSampler(8)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, lp, _ := s.pick(tc.logits, tc.sp, rand.New(rand.NewPCG(1, 2)))
			if got != tc.want {
				t.Errorf("token = %d, want %d", got, tc.want)
			}
			want := math.Log(sampleSoftmax64(tc.logits, 1)[tc.want])
			if math.Abs(float64(lp)-want) > 1e-6 {
				t.Errorf("logprob = %v, want %v", lp, want)
			}
		})
	}
}

// TestSampleDistribution draws many tokens with a fixed seed and checks their spread.
// The support must be exactly what the filters keep, and frequencies must
// match the renormalized probabilities.
func TestSampleDistribution(t *testing.T) {
	// probabilities at T=1: 0.4, 0.25, 0.15, 0.1, 0.06, 0.04
	probs := []float64{0.4, 0.25, 0.15, 0.1, 0.06, 0.04}
	logits := make([]float32, len(probs))
	for i, p := range probs {
		logits[i] = float32(math.Log(p))
	}
	renorm := func(keep []int, temp float64) []float64 {
		p := sampleSoftmax64(logits, temp)
		out := make([]float64, len(p))
		var s float64
		for _, i := range keep {
			s += p[i]
		}
		for _, i := range keep {
			out[i] = p[i] / s
		}
		return out
	}
	tests := []struct {
		name string
		sp   sampleParams
		want []float64
	}{
		{"temperature 1", sampleParams{temperature: 1}, probs},
		{"temperature 0.5", sampleParams{temperature: 0.5}, renorm([]int{0, 1, 2, 3, 4, 5}, 0.5)},
		{"temperature 2", sampleParams{temperature: 2}, renorm([]int{0, 1, 2, 3, 4, 5}, 2)},
		{"top-k 3", sampleParams{temperature: 1, topK: 3}, renorm([]int{0, 1, 2}, 1)},
		{"top-p 0.6 keeps two", sampleParams{temperature: 1, topP: 0.6}, renorm([]int{0, 1}, 1)},                // 0.4 < 0.6 <= 0.65
		{"top-p 0.85 keeps four", sampleParams{temperature: 1, topP: 0.85}, renorm([]int{0, 1, 2, 3}, 1)},       // 0.8 < 0.85 <= 0.9
		{"top-p 0.3 keeps one", sampleParams{temperature: 1, topP: 0.3}, renorm([]int{0}, 1)},                   // 0.4 >= 0.3
		{"top-k 4 then top-p 0.8", sampleParams{temperature: 1, topK: 4, topP: 0.8}, renorm([]int{0, 1, 2}, 1)}, // of 0.9: .4/.9=.44, .65/.9=.72, .8/.9=.89
		{"top-p 1 is off", sampleParams{temperature: 1, topP: 1}, probs},
	}
	const n = 40000
	s := newSampler(len(logits))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(42, 1))
			counts := make([]int, len(logits))
			for range n {
				tok, _, _ := s.pick(logits, tc.sp, rng)
				counts[tok]++
			}
			for i, w := range tc.want {
				got := float64(counts[i]) / n
				if w == 0 && counts[i] != 0 {
					t.Errorf("token %d drawn %d times, want never (filtered out)", i, counts[i])
				}
				// 5 standard deviations of a binomial frequency.
				if tol := 5 * math.Sqrt(w*(1-w)/n); math.Abs(got-w) > tol+1e-9 {
					t.Errorf("token %d frequency = %.4f, want %.4f ± %.4f", i, got, w, tol)
				}
			}
		})
	}
}

// The logprob of a sampled token is the model's own (T=1, unfiltered)
// log-probability, whatever the sampling settings.
func TestSampleLogprobIgnoresFilters(t *testing.T) {
	logits := []float32{1.5, 0.2, -0.7, 2.2, 0.9}
	ref := sampleSoftmax64(logits, 1)
	s := newSampler(len(logits))
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sp := range []sampleParams{{temperature: 0.3, topK: 2}, {temperature: 1.7, topP: 0.5}, {temperature: 1}} {
		for range 50 {
			tok, lp, lse := s.pick(logits, sp, rng)
			if want := math.Log(ref[tok]); math.Abs(float64(lp)-want) > 1e-6 {
				t.Fatalf("%+v: logprob of %d = %v, want %v", sp, tok, lp, want)
			}
			if want := float64(logits[tok]) - math.Log(ref[tok]); math.Abs(float64(lse)-want) > 1e-6 {
				t.Fatalf("%+v: log-sum-exp = %v, want %v", sp, lse, want)
			}
		}
	}
}

func TestSampleTop(t *testing.T) {
	logits := []float32{0.5, 3, -1, 3, 2, 0.5}
	ref := sampleSoftmax64(logits, 1)
	var lse float32
	{
		var s float64
		for _, l := range logits {
			s += math.Exp(float64(l))
		}
		lse = float32(math.Log(s))
	}
	got := sampleTop(nil, logits, lse, 4)
	wantIDs := []int{1, 3, 4, 0} // ties keep the lower id first
	if len(got) != len(wantIDs) {
		t.Fatalf("got %d alternatives, want %d", len(got), len(wantIDs))
	}
	for i, w := range wantIDs {
		if got[i].Token != w {
			t.Errorf("alternative %d = token %d, want %d (all: %v)", i, got[i].Token, w, got)
		}
		if lp := math.Log(ref[w]); math.Abs(float64(got[i].Logprob)-lp) > 1e-6 {
			t.Errorf("alternative %d logprob = %v, want %v", i, got[i].Logprob, lp)
		}
	}
}

// One draw per sampled token, none for greedy: this is what keeps a
// request's stream independent of everything else.
func TestSampleDrawsOncePerToken(t *testing.T) {
	logits := []float32{1, 2, 3, 0.5, 0.1}
	s := newSampler(len(logits))
	for _, sp := range []sampleParams{{temperature: 1}, {temperature: 0.7, topK: 3}, {temperature: 1.2, topP: 0.9}, {temperature: 1, topK: 2, topP: 0.5}} {
		a, b := rand.New(rand.NewPCG(9, 9)), rand.New(rand.NewPCG(9, 9))
		for range 20 {
			s.pick(logits, sp, a)
			b.Float64()
		}
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Errorf("%+v: generator state after 20 picks differs from 20 draws", sp)
		}
	}
}

func TestSamplePickAllocatesNothing(t *testing.T) {
	logits := make([]float32, 512)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)))
	}
	s := newSampler(len(logits))
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sp := range []sampleParams{{}, {temperature: 1}, {temperature: 0.8, topK: 40}, {temperature: 0.9, topP: 0.9}} {
		if n := testing.AllocsPerRun(100, func() { s.pick(logits, sp, rng) }); n != 0 {
			t.Errorf("%+v: %v allocations per pick, want 0", sp, n)
		}
	}
}

// A nucleus smaller than any one token keeps the likeliest token.
// That holds even when all are equally likely, where the candidate cutoff
// bound does not.
func TestSampleTinyTopP(t *testing.T) {
	for _, v := range []int{1, 2, 512} {
		logits := make([]float32, v)
		s := newSampler(v)
		rng := rand.New(rand.NewPCG(1, 1))
		for _, topP := range []float64{1e-9, 0.001, 0.5} {
			tok, _, _ := s.pick(logits, sampleParams{temperature: 1, topP: topP}, rng)
			if want := 0; topP*float64(v) <= 1 && tok != want {
				t.Errorf("vocab %d top-p %v: token %d, want %d (the first of equal likeliest)", v, topP, tok, want)
			}
		}
	}
}

// NaN logits, which diverged weights produce, must not crash the sampler.
func TestSampleNaNLogits(t *testing.T) {
	nan := float32(math.NaN())
	logits := []float32{nan, nan, nan, nan}
	s := newSampler(len(logits))
	rng := rand.New(rand.NewPCG(1, 1))
	for _, sp := range []sampleParams{{}, {temperature: 1}, {temperature: 1, topP: 0.5}, {temperature: 0.7, topK: 2}} {
		if tok, _, _ := s.pick(logits, sp, rng); tok < 0 || tok >= len(logits) {
			t.Errorf("%+v: token %d out of range", sp, tok)
		}
	}
}
