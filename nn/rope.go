package nn

import "math"

// Rope is the rotary position embedding of a config, in llama2.c's
// convention.
//
// Within every head of width HeadDim, each pair of adjacent values
// (2i, 2i+1), i in [0, HeadDim/2), turns as a point in the plane by the
// angle a = pos·f_i. pos is the token's position in its sequence, 0 for the
// first token. f_i = θ^(−2i/HeadDim), where θ is Config.RopeTheta, changed
// by Config.RopeScaling when it is set:
//
//	x'_{2i}   = x_{2i}·cos a − x_{2i+1}·sin a
//	x'_{2i+1} = x_{2i}·sin a + x_{2i+1}·cos a
//
// Queries and keys are rotated, values are not. The pairs are interleaved
// as (2i, 2i+1), not split in halves as (i, i+HeadDim/2) in the Hugging
// Face layout. llama2.c export relies on this, and the Hugging Face loader
// permutes the query and key rows to this pairing. The cosine and sine
// table is computed in float64 with math.Pow and math.Sincos, then rounded
// to float32. Both engines rotate with one Rope, so a training forward and
// a decode step turn a position by the same bits.
type Rope struct {
	half     int       // HeadDim/2
	cos, sin []float32 // (Context, HeadDim/2)
}

// NewRope computes the table of every position of c's context.
func NewRope(c Config) Rope {
	half := c.HeadDim() / 2
	freqs := c.ropeFreqs()
	r := Rope{half: half, cos: make([]float32, c.Context*half), sin: make([]float32, c.Context*half)}
	for pos := 0; pos < c.Context; pos++ {
		for i, f := range freqs {
			s, co := math.Sincos(float64(pos) * f)
			r.cos[pos*half+i] = float32(co)
			r.sin[pos*half+i] = float32(s)
		}
	}
	return r
}

// Forward rotates in place every head of x, a whole number of heads
// (n·HeadDim) of the token at position pos.
func (r Rope) Forward(x []float32, pos int) {
	cos := r.cos[pos*r.half : (pos+1)*r.half]
	sin := r.sin[pos*r.half : (pos+1)*r.half]
	hd := 2 * r.half
	for h := 0; h+hd <= len(x); h += hd {
		v := x[h : h+hd]
		for i := range r.half {
			a, b := v[2*i], v[2*i+1]
			v[2*i] = a*cos[i] - b*sin[i]
			v[2*i+1] = a*sin[i] + b*cos[i]
		}
	}
}

// Backward maps, in place, the rotated values' gradient to the gradient before rotation.
// A rotation's Jacobian is the rotation itself, so this applies its
// transpose: the turn by −a.
func (r Rope) Backward(dx []float32, pos int) {
	cos := r.cos[pos*r.half : (pos+1)*r.half]
	sin := r.sin[pos*r.half : (pos+1)*r.half]
	hd := 2 * r.half
	for h := 0; h+hd <= len(dx); h += hd {
		v := dx[h : h+hd]
		for i := range r.half {
			a, b := v[2*i], v[2*i+1]
			v[2*i] = a*cos[i] + b*sin[i]
			v[2*i+1] = -a*sin[i] + b*cos[i]
		}
	}
}
