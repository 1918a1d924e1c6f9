package nn

import "math"

// RMSNorm scales a row x by the inverse of its root mean square and then
// by a learned gain g:
//
//	y_j = x_j · r · g_j,   r = 1 / sqrt(mean_j(x_j²) + eps)
//
// Both engines normalise one row at a time with these functions. A row is
// a token's residual stream, or one head of its queries or keys. The
// forward pass returns r; the backward pass needs only x, g and r.

// RMSNorm writes y = x·r·g for the row x (D) and gain g (D), and returns r.
// y may be x.
func RMSNorm(y, x, g []float32, eps float32) (r float32) {
	y, g = y[:len(x)], g[:len(x)]
	var ss float32
	for _, v := range x {
		ss += v * v
	}
	r = 1 / float32(math.Sqrt(float64(ss/float32(len(x))+eps)))
	for j, v := range x {
		y[j] = g[j] * (r * v)
	}
	return r
}

// RMSNormBackward adds ∂L/∂x to dx from dy, the row x, its gain g and r.
// r is what RMSNorm returned for x; dx and dy are (D). With
// s = Σ_j dy_j·g_j·x_j:
//
//	∂L/∂x_j = r·g_j·dy_j − r³·x_j·s / D,   ∂L/∂g_j = dy_j·x_j·r
//
// The gain's gradient sums over rows; RMSNormGainGrad adds one row's.
func RMSNormBackward(dx, dy, x, g []float32, r float32) {
	dx, dy, g = dx[:len(x)], dy[:len(x)], g[:len(x)]
	var s float32
	for j, v := range x {
		s += dy[j] * g[j] * v
	}
	c := r * r * r * s / float32(len(x))
	for j, v := range x {
		dx[j] += r*g[j]*dy[j] - c*v
	}
}

// RMSNormGainGrad adds one row's ∂L/∂g_j = dy_j·x_j·r to dg (D).
func RMSNormGainGrad(dg, dy, x []float32, r float32) {
	dg, dy = dg[:len(x)], dy[:len(x)]
	for j, v := range x {
		dg[j] += dy[j] * v * r
	}
}
