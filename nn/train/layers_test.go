package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/kernel"
)

// Layer gradient checks run in float32 with a float64 test loss L = Σ r·y.
// Unless a test says otherwise, the step is h = 1e-2 and the tolerance
// |fd − analytic| ≤ 2e-4 + 2e-3·|g|.
const (
	gradH    = 1e-2
	gradAtol = 2e-4
	gradRtol = 2e-3
)

func TestRMSNormGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, d = 3, 8
	x := randn(rng, n*d, 1)
	g := randn(rng, d, 0.5)
	for i := range g {
		g[i] += 1
	}
	r := randn(rng, n*d, 1)
	y, rinv := make([]float32, n*d), make([]float32, n)
	loss := func() float64 {
		rmsNormForward(y, rinv, x, g, n, d, 1e-5)
		return dot64(r, y)
	}
	loss()
	dx, dg := make([]float32, n*d), make([]float32, d)
	rmsNormBackward(dx, dg, r, x, g, rinv, n, d)
	checkGrad(t, "dx", x, dx, nil, loss, gradH, gradAtol, gradRtol)
	checkGrad(t, "dg", g, dg, nil, loss, gradH, gradAtol, gradRtol)

	// backward accumulates
	dx2, dg2 := append([]float32(nil), dx...), append([]float32(nil), dg...)
	rmsNormBackward(dx2, dg2, r, x, g, rinv, n, d)
	for i := range dx {
		if got, want := dx2[i], 2*dx[i]; math.Abs(float64(got-want)) > 1e-6 {
			t.Fatalf("second backward dx[%d] = %v, want %v (accumulated)", i, got, want)
		}
	}
}

func TestRopeGradient(t *testing.T) {
	c := nn.Config{Vocab: 4, Dim: 12, Layers: 1, Heads: 2, KVHeads: 1, Hidden: 4, Context: 32, RopeTheta: 10000, NormEps: 1e-5}
	rp := nn.NewRope(c)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, pos := range []int{0, 1, 13, 31} {
		t.Run(fmt.Sprint("pos", pos), func(t *testing.T) {
			x := randn(rng, 12, 1)
			r := randn(rng, 12, 1)
			y := make([]float32, 12)
			loss := func() float64 {
				copy(y, x)
				rp.Forward(y, pos)
				return dot64(r, y)
			}
			dx := append([]float32(nil), r...)
			rp.Backward(dx, pos)
			checkGrad(t, "dx", x, dx, nil, loss, gradH, gradAtol, gradRtol)
		})
	}
}

func TestSwiGLUGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 40
	a, b, r := randn(rng, n, 2), randn(rng, n, 1), randn(rng, n, 1)
	h := make([]float32, n)
	loss := func() float64 {
		swiGLUForward(h, a, b)
		return dot64(r, h)
	}
	da, db := make([]float32, n), make([]float32, n)
	swiGLUBackward(da, db, r, a, b)
	checkGrad(t, "da", a, da, nil, loss, gradH, gradAtol, gradRtol)
	checkGrad(t, "db", b, db, nil, loss, gradH, gradAtol, gradRtol)
}

func TestAttentionGradient(t *testing.T) {
	tests := []struct {
		name        string
		b, t, h, kv int
		headDim     int
	}{
		{"multi-head", 2, 5, 2, 2, 4},
		{"grouped", 2, 5, 4, 2, 4},
		{"multi-query", 1, 6, 3, 1, 2},
		{"single position", 3, 1, 2, 1, 4},
		{"several row blocks", 1, attnBlock + 6, 2, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(tt.h*10+tt.kv)))
			a := attention{B: tt.b, T: tt.t, Heads: tt.h, KVHeads: tt.kv, HeadDim: tt.headDim}
			n, d := tt.b*tt.t, tt.h*tt.headDim
			qkv := randn(rng, n*a.stride(), 1)
			r := randn(rng, n*d, 1)
			out, lse := make([]float32, n*d), make([]float32, tt.b*tt.h*tt.t)
			loss := func() float64 {
				a.forward(out, lse, qkv)
				return dot64(r, out)
			}
			loss()
			dqkv := make([]float32, len(qkv))
			for i := range dqkv {
				dqkv[i] = float32(math.NaN()) // backward must overwrite every entry
			}
			a.backward(dqkv, r, lse, qkv)
			checkGrad(t, "dqkv", qkv, dqkv, nil, loss, gradH, gradAtol, gradRtol)
		})
	}
}

func TestAttentionCausalMask(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	a := attention{B: 2, T: attnBlock + 9, Heads: 4, KVHeads: 2, HeadDim: 4}
	n, d, s := a.B*a.T, a.Heads*a.HeadDim, a.stride()
	qkv := randn(rng, n*s, 1)
	out, lse := make([]float32, n*d), make([]float32, a.B*a.Heads*a.T)
	a.forward(out, lse, qkv)
	// the saved log-sum-exp covers exactly the positions up to the row's own
	group, hd := a.Heads/a.KVHeads, a.HeadDim
	for b := 0; b < a.B; b++ {
		for h := 0; h < a.Heads; h++ {
			for i := 0; i < a.T; i++ {
				var sum float64
				for j := 0; j <= i; j++ {
					var dot float64
					for c := 0; c < hd; c++ {
						dot += float64(qkv[(b*a.T+i)*s+h*hd+c]) * float64(qkv[(b*a.T+j)*s+d+(h/group)*hd+c])
					}
					sum += math.Exp(dot / math.Sqrt(float64(hd)))
				}
				if got, want := float64(lse[(b*a.Heads+h)*a.T+i]), math.Log(sum); math.Abs(got-want) > 1e-5 {
					t.Errorf("lse[seq %d head %d pos %d] = %v, want %v", b, h, i, got, want)
				}
			}
		}
	}
	// a gradient arriving only at position t0 reaches no later position
	for _, t0 := range []int{2, attnBlock + 1} {
		dout := make([]float32, n*d)
		for b := 0; b < a.B; b++ {
			copy(dout[(b*a.T+t0)*d:(b*a.T+t0+1)*d], randn(rng, d, 1))
		}
		dqkv := make([]float32, n*s)
		a.backward(dqkv, dout, lse, qkv)
		for b := 0; b < a.B; b++ {
			for i := t0 + 1; i < a.T; i++ {
				for c, g := range dqkv[(b*a.T+i)*s : (b*a.T+i+1)*s] {
					if g != 0 {
						t.Fatalf("dqkv[seq %d][pos %d][%d] = %v, want exactly 0 (after the only gradient at %d)", b, i, c, g, t0)
					}
				}
			}
		}
		// changing later keys and values leaves earlier outputs bitwise equal
		out2 := make([]float32, n*d)
		qkv2 := append([]float32(nil), qkv...)
		for i := range qkv2 {
			if (i/s)%a.T > t0 && i%s >= d {
				qkv2[i] += 1
			}
		}
		a.forward(out2, make([]float32, len(lse)), qkv2)
		for i := range out {
			if (i/d)%a.T <= t0 && out[i] != out2[i] {
				t.Fatalf("out[%d] at position %d changed from %v to %v when only keys after %d changed", i, (i/d)%a.T, out[i], out2[i], t0)
			}
		}
	}
}

func TestCrossEntropyGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n, v = 5, 7
	logits := randn(rng, n*v, 2)
	targets := []int{0, 3, 6, 2, 2}
	weights := []float32{1, -0.7, 0, 2.5, -1.5}
	const norm = 3.0
	logp := make([]float32, n)
	loss := func() float64 {
		scratch := append([]float32(nil), logits...) // the rows are overwritten
		logSoftmax(logp, scratch, targets, weights, n, v, false, 0)
		var s float64
		for i, lp := range logp {
			s -= float64(weights[i]) * float64(lp)
		}
		return s / norm
	}
	grad := append([]float32(nil), logits...)
	logSoftmax(logp, grad, targets, weights, n, v, true, 1/norm)
	checkGrad(t, "dlogits", logits, grad, nil, loss, gradH, gradAtol, gradRtol)
	for j := 0; j < v; j++ {
		if g := grad[2*v+j]; g != 0 {
			t.Errorf("dlogits of zero-weight row [%d] = %v, want exactly 0", j, g)
		}
	}
	// logp against a direct computation
	loss()
	for i := 0; i < n; i++ {
		var sum float64
		for _, z := range logits[i*v : (i+1)*v] {
			sum += math.Exp(float64(z))
		}
		want := float64(logits[i*v+targets[i]]) - math.Log(sum)
		if math.Abs(float64(logp[i])-want) > 1e-5 {
			t.Errorf("logp[%d] = %v, want %v", i, logp[i], want)
		}
	}
	// a zero-weight row with overflowing logits stays exactly zero, no NaN
	big := []float32{float32(math.Inf(1)), 0, 1}
	lp := make([]float32, 1)
	logSoftmax(lp, big, []int{1}, []float32{0}, 1, 3, true, 1)
	for j, g := range big {
		if g != 0 {
			t.Errorf("masked row with infinite logit: dlogits[%d] = %v, want 0", j, g)
		}
	}
}

// TestAttentionPathsSameBits checks the in-place attention against the
// gathering one, bit for bit, forward and backward: heads of 16 and 32,
// grouped heads, lengths around the row block and the panel of 16, and
// past the blocked kernel's k block of 256.
func TestAttentionPathsSameBits(t *testing.T) {
	if !kernel.HaveStrided() {
		t.Skip("no in-place path on this machine")
	}
	tests := []struct {
		b, t, h, kv, headDim int
	}{
		{4, 64, 4, 4, 16},
		{2, 77, 4, 2, 16},
		{1, 5, 2, 1, 32},
		{2, 33, 8, 4, 32},
		{1, 300, 2, 2, 16},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("b=%d/t=%d/h=%d/kv=%d/hd=%d", tt.b, tt.t, tt.h, tt.kv, tt.headDim), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tt.t), uint64(tt.headDim)))
			a := attention{B: tt.b, T: tt.t, Heads: tt.h, KVHeads: tt.kv, HeadDim: tt.headDim}
			n, d := tt.b*tt.t, tt.h*tt.headDim
			qkv := randn(rng, n*a.stride(), 1)
			dout := randn(rng, n*d, 1)
			if !a.inPlace() {
				t.Fatal("shape does not take the in-place path")
			}
			out, lse := make([]float32, n*d), make([]float32, tt.b*tt.h*tt.t)
			a.forwardInPlace(out, lse, qkv)
			dqkv := make([]float32, len(qkv))
			for i := range dqkv {
				dqkv[i] = float32(math.NaN()) // backward must overwrite every entry
			}
			a.backwardInPlace(dqkv, dout, lse, qkv)

			wantOut, wantLse := make([]float32, n*d), make([]float32, len(lse))
			a.forwardGather(wantOut, wantLse, qkv)
			wantD := make([]float32, len(qkv))
			a.backwardGather(wantD, dout, wantLse, qkv)
			for _, c := range []struct {
				name      string
				got, want []float32
			}{{"out", out, wantOut}, {"lse", lse, wantLse}, {"dqkv", dqkv, wantD}} {
				for i := range c.want {
					if math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) {
						t.Fatalf("%s[%d] = %v, want %v bit for bit", c.name, i, c.got[i], c.want[i])
					}
				}
			}
		})
	}
}
