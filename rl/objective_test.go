package rl

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/train"
)

func TestPPOTermClipping(t *testing.T) {
	const eps = 0.2
	lr := math.Log
	tests := []struct {
		name        string
		adv, r      float64
		wantW       float64
		wantClipped bool
		wantLoss    float64
	}{
		{"ratio 1", 2, 1, 2, false, -2},
		{"positive advantage inside", 1, 1.1, 1.1, false, -1.1},
		{"positive advantage above the range", 1, 1.5, 0, true, -1.2},
		{"positive advantage below the range", 1, 0.5, 0.5, false, -0.5},
		{"negative advantage below the range", -1, 0.5, 0, true, 0.8},
		{"negative advantage above the range", -1, 1.5, -1.5, false, 1.5},
		{"negative advantage inside", -3, 0.9, -2.7, false, 2.7},
		{"zero advantage", 0, 1.5, 0, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loss, w, clipped := ppoTerm(tt.adv, lr(tt.r), 0, eps)
			if clipped != tt.wantClipped {
				t.Errorf("clipped = %v, want %v", clipped, tt.wantClipped)
			}
			if math.Abs(w-tt.wantW) > 1e-12 {
				t.Errorf("weight = %v, want %v", w, tt.wantW)
			}
			if math.Abs(loss-tt.wantLoss) > 1e-12 {
				t.Errorf("loss = %v, want %v", loss, tt.wantLoss)
			}
			// The weight is minus the derivative of the loss in log p.
			const h = 1e-6
			lp, _, _ := ppoTerm(tt.adv, lr(tt.r)+h, 0, eps)
			lm, _, _ := ppoTerm(tt.adv, lr(tt.r)-h, 0, eps)
			if fd := -(lp - lm) / (2 * h); math.Abs(fd-w) > 1e-6 {
				t.Errorf("weight %v, finite difference of the loss %v", w, fd)
			}
		})
	}
}

func TestKLWeightIsTheDerivativeOfK3(t *testing.T) {
	for _, tt := range []struct{ lp, ref, beta float64 }{
		{-1, -1, 0.1}, {-2, -0.5, 0.04}, {-0.3, -4, 1}, {-7, -6.5, 0.5},
	} {
		const h = 1e-6
		fd := tt.beta * (k3(tt.lp+h, tt.ref) - k3(tt.lp-h, tt.ref)) / (2 * h)
		if w := klWeight(tt.lp, tt.ref, tt.beta); math.Abs(-w-fd) > 1e-6*max(1, math.Abs(fd)) {
			t.Errorf("lp %v ref %v beta %v: weight %v, want −(finite difference) %v", tt.lp, tt.ref, tt.beta, w, -fd)
		}
		if k := k3(tt.lp, tt.ref); k < 0 || (tt.lp == tt.ref && k != 0) {
			t.Errorf("k3(%v, %v) = %v, want ≥ 0 and 0 at equality", tt.lp, tt.ref, k)
		}
	}
}

// randomEpisodes returns n episodes of random tokens.
func randomEpisodes(rng *rand.Rand, n, vocab int) []Episode {
	eps := make([]Episode, n)
	for i := range eps {
		e := &eps[i]
		e.Node = "node"
		e.Prompt = make([]int, 3+rng.IntN(6))
		e.Completion = make([]int, 1+rng.IntN(6))
		e.Behaviour = make([]float32, len(e.Completion))
		for j := range e.Prompt {
			e.Prompt[j] = rng.IntN(vocab)
		}
		for j := range e.Completion {
			e.Completion[j] = rng.IntN(vocab)
		}
	}
	return eps
}

// TestObjectiveGradientMatchesFiniteDifferences checks the objective folded into cross-entropy weights.
// The objective is the clipped ratio and the k3 KL.
// The gradient nn computes with the weights must be the derivative of Σ c·(pg + β·k3) along a direction.
func TestObjectiveGradientMatchesFiniteDifferences(t *testing.T) {
	tests := []struct {
		name      string
		advScale  float64
		beta      float64
		wantClips bool
	}{
		{"clipped ratio and kl", 1, 0.3, true},
		{"clipped ratio alone", 1, 0, true},
		{"kl alone", 0, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkObjectiveGradient(t, tt.advScale, tt.beta, tt.wantClips)
		})
	}
}

func checkObjectiveGradient(t *testing.T, advScale, beta float64, wantClips bool) {
	t.Helper()
	ctx := context.Background()
	p := tinyParams(t, 32, 11)
	rng := rand.New(rand.NewPCG(5, 6))
	eps := randomEpisodes(rng, 5, p.Config.Vocab)
	mbs := pack(eps, 4096)
	if len(mbs) != 1 {
		t.Fatalf("%d micro-batches, want 1", len(mbs))
	}
	m := mbs[0]
	ws, err := train.NewWorkspace(p.Config)
	if err != nil {
		t.Fatal(err)
	}
	lp0, err := ws.TokenLogprobs(ctx, p, m.batch)
	if err != nil {
		t.Fatal(err)
	}
	// Old and reference logprobs near the current ones, so that some
	// ratios sit inside the clip range and some outside, on both sides.
	n := m.batch.B * m.batch.T
	old, ref := make([]float64, n), make([]float64, n)
	adv, coef := make([]float64, len(eps)), make([]float64, len(eps))
	for i := range n {
		old[i] = float64(lp0[i]) + (rng.Float64()-0.5)*0.5
		ref[i] = float64(lp0[i]) + (rng.Float64()-0.5)*2
	}
	for i := range eps {
		adv[i] = advScale * rng.NormFloat64()
		coef[i] = 1 / float64(len(eps[i].Completion)*len(eps))
	}
	obj := objective{eps: 0.1, beta: beta}
	loss := func(lp []float32) (float64, int) {
		var l float64
		var clipped int
		for _, s := range m.seqs {
			for j := range s.ep.Completion {
				k := m.at(s, j)
				pg, kl, _, c := obj.at(adv[s.idx], float64(lp[k]), old[k], ref[k])
				l += coef[s.idx] * (pg + obj.beta*kl)
				if c {
					clipped++
				}
			}
		}
		return l, clipped
	}
	for _, s := range m.seqs {
		for j := range s.ep.Completion {
			k := m.at(s, j)
			_, _, w, _ := obj.at(adv[s.idx], float64(lp0[k]), old[k], ref[k])
			m.batch.Weights[k] = float32(coef[s.idx] * w)
		}
	}
	if _, clipped := loss(lp0); wantClips && clipped == 0 {
		t.Fatal("no token is clipped; the test would not cover the clip")
	}
	g, err := nn.Alloc(p.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.ForwardBackward(ctx, p, g, m.batch, 1); err != nil {
		t.Fatal(err)
	}
	var gn float64
	for _, x := range g.Data {
		gn += float64(x) * float64(x)
	}
	gn = math.Sqrt(gn)
	// Along d = g/|g| the directional derivative is |g|.
	const h = 1e-2
	at := func(sign float64) float64 {
		q, err := nn.Alloc(p.Config)
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range p.Data {
			q.Data[i] = x + float32(sign*h*float64(g.Data[i])/gn)
		}
		lp, err := ws.TokenLogprobs(ctx, q, m.batch)
		if err != nil {
			t.Fatal(err)
		}
		l, _ := loss(lp)
		return l
	}
	fd := (at(1) - at(-1)) / (2 * h)
	if math.Abs(fd-gn) > 0.01*gn {
		t.Errorf("directional derivative: finite difference %v, gradient norm %v", fd, gn)
	}
	t.Logf("finite difference %.6f, gradient %.6f", fd, gn)
}
