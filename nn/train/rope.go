package train

import (
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/kernel"
)

// ropeTable is nn.Rope laid out for kernel.Rotate: for each position, one
// head's factors per value. It turns by the same bits as nn.Rope.
type ropeTable struct {
	hd          int
	c, s, sBack []float32 // (Context, HeadDim)
}

// newRopeTable reads nn.Rope's angles out of the rope itself.
// nn.Rope keeps its table private. Turning the pair (1, 0) gives
// (1·cos − 0·sin, 1·sin + 0·cos), which is (cos, sin) exactly.
func newRopeTable(c nn.Config) ropeTable {
	rope := nn.NewRope(c)
	hd := c.HeadDim()
	r := ropeTable{hd: hd, c: make([]float32, c.Context*hd), s: make([]float32, c.Context*hd), sBack: make([]float32, c.Context*hd)}
	probe := make([]float32, hd)
	for pos := range c.Context {
		for i := 0; i+1 < hd; i += 2 {
			probe[i], probe[i+1] = 1, 0
		}
		rope.Forward(probe, pos)
		row := pos * hd
		for i := 0; i+1 < hd; i += 2 {
			cos, sin := probe[i], probe[i+1]
			r.c[row+i], r.c[row+i+1] = cos, cos
			r.s[row+i], r.s[row+i+1] = -sin, sin
			r.sBack[row+i], r.sBack[row+i+1] = sin, -sin
		}
	}
	return r
}

// forward rotates the first w values of each of the n rows of x (row
// stride s) at its position i mod t, as nn.Rope.Forward does.
func (r ropeTable) forward(x []float32, n, t, s, w int) { r.turn(x, n, t, s, w, r.s) }

// backward is forward's transpose, the turn back, as nn.Rope.Backward.
func (r ropeTable) backward(x []float32, n, t, s, w int) { r.turn(x, n, t, s, w, r.sBack) }

func (r ropeTable) turn(x []float32, n, t, s, w int, sin []float32) {
	hd := r.hd
	parallel(n, rowChunk(w, 16), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			pos := i % t
			kernel.Rotate(x[i*s:i*s+w], r.c[pos*hd:(pos+1)*hd], sin[pos*hd:(pos+1)*hd])
		}
	})
}
