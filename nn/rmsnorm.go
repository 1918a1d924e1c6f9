package nn

import "math"

// RMSNorm scales each row of x by the inverse of its root mean square and
// then by a learned gain g:
//
//	y_j = x_j · r · g_j,   r = 1 / sqrt(mean_j(x_j²) + eps)
//
// The forward pass saves r per row; the backward pass needs only x, g and r.

// trainRMSNormForward writes y (N, D) from x (N, D) and g (D), and saves r (N).
func trainRMSNormForward(y, r, x, g []float32, n, d int, eps float32) {
	trainParallel(n, 64, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xi, yi := x[i*d:(i+1)*d], y[i*d:(i+1)*d]
			var ss float32
			for _, v := range xi {
				ss += v * v
			}
			inv := 1 / float32(math.Sqrt(float64(ss/float32(d)+eps)))
			r[i] = inv
			for j, v := range xi {
				yi[j] = g[j] * (inv * v)
			}
		}
	})
}

// trainRMSNormBackward accumulates dx (N, D) += ∂L/∂x and dg (D) += ∂L/∂g from
// dy (N, D). With s = Σ_j dy_j·g_j·x_j over a row:
//
//	∂L/∂x_j = r·g_j·dy_j − r³·x_j·s / D,   ∂L/∂g_j = Σ_rows dy_j·x_j·r
//
// Rows are independent for dx and run in parallel; dg is summed over rows
// in order, so the result does not depend on the number of goroutines.
func trainRMSNormBackward(dx, dg, dy, x, g, r []float32, n, d int) {
	trainParallel(n, 64, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xi, dyi, dxi := x[i*d:(i+1)*d], dy[i*d:(i+1)*d], dx[i*d:(i+1)*d]
			ri := r[i]
			var s float32
			for j, v := range xi {
				s += dyi[j] * g[j] * v
			}
			c := ri * ri * ri * s / float32(d)
			for j, v := range xi {
				dxi[j] += ri*g[j]*dyi[j] - c*v
			}
		}
	})
	for i := 0; i < n; i++ {
		xi, dyi := x[i*d:(i+1)*d], dy[i*d:(i+1)*d]
		ri := r[i]
		for j, v := range xi {
			dg[j] += dyi[j] * v * ri
		}
	}
}
