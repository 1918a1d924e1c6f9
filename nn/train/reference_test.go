package train

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/delegatelab/delegate/nn/nntest"
)

// TestForwardMatchesReference compares the batched float32 forward with
// the float64 reference (nntest): every log-prob within 1e-4.
func TestForwardMatchesReference(t *testing.T) {
	for _, tied := range []bool{false, true} {
		c := tinyConfig(tied)
		c.Context = attnBlock + 4 // two row blocks
		p := largeInit(t, c, 91)
		ws, _ := NewWorkspace(c)
		b := randomBatch(rand.New(rand.NewPCG(92, 93)), c, 2, c.Context, false)
		got, err := ws.TokenLogprobs(context.Background(), p, b)
		if err != nil {
			t.Fatal(err)
		}
		for s := 0; s < b.B; s++ {
			want := nntest.LogProbs(p, b.Inputs[s*b.T:(s+1)*b.T], b.Targets[s*b.T:(s+1)*b.T])
			for i, w := range want {
				if g := float64(got[s*b.T+i]); math.Abs(g-w) > 1e-4 {
					t.Fatalf("tied=%v: sequence %d position %d: log p = %v, reference %v", tied, s, i, g, w)
				}
			}
		}
	}
}
