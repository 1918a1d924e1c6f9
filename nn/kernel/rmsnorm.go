package kernel

// The elementwise halves of RMSNorm and its gradient, once a row's sums are known.
// Every operation is rounded to float32 in the order written, with no fused
// multiply-add, so the AVX code and the portable loops give the same bits:
// those of package nn's RMSNorm, RMSNormBackward and RMSNormGainGrad.

type (
	rmsApplyFunc func(y, x, g []float32, r float32, n int)
	rmsInputFunc func(dx, dy, x, g []float32, r, c float32, n int)
	rmsGainFunc  func(dg, dy, x []float32, r float32, n int)
)

// The AVX loops where the CPU has AVX2, else nil. They run over the first
// n values, n a positive multiple of 8.
var (
	activeRMSApply = archRMSApply
	activeRMSInput = archRMSInput
	activeRMSGain  = archRMSGain
)

// RMSNormApply writes y[j] = g[j]·(r·x[j]) for every index of x.
// y and g must be at least as long as x.
func RMSNormApply(y, x, g []float32, r float32) {
	n := len(x)
	y, g = y[:n], g[:n]
	i := 0
	if activeRMSApply != nil && n >= 8 {
		i = n &^ 7
		activeRMSApply(y, x, g, r, i)
	}
	for ; i < n; i++ {
		y[i] = g[i] * (r * x[i])
	}
}

// RMSNormInput adds r·g[j]·dy[j] − c·x[j] to dx[j] for every index of x.
// With c = r³·Σ_j dy_j·g_j·x_j / D that is the row's input gradient.
func RMSNormInput(dx, dy, x, g []float32, r, c float32) {
	n := len(x)
	dx, dy, g = dx[:n], dy[:n], g[:n]
	i := 0
	if activeRMSInput != nil && n >= 8 {
		i = n &^ 7
		activeRMSInput(dx, dy, x, g, r, c, i)
	}
	for ; i < n; i++ {
		dx[i] += r*g[i]*dy[i] - c*x[i]
	}
}

// RMSNormGain adds dy[j]·x[j]·r to dg[j] for every index of x: one row's
// part of the gain's gradient.
func RMSNormGain(dg, dy, x []float32, r float32) {
	n := len(x)
	dg, dy = dg[:n], dy[:n]
	i := 0
	if activeRMSGain != nil && n >= 8 {
		i = n &^ 7
		activeRMSGain(dg, dy, x, r, i)
	}
	for ; i < n; i++ {
		dg[i] += dy[i] * x[i] * r
	}
}
