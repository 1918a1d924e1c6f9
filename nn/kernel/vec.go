package kernel

// Elementwise sums and products of float32 vectors.
// Each element is one rounded operation, so the AVX code and the portable
// loops give the same bits.

// addFunc and scaleFunc run over the first n values, n a positive multiple of 8.
type (
	addFunc   func(x, y []float32, n int)
	scaleFunc func(x []float32, s float32, n int)
)

// activeAdd and activeScale are the AVX loops where the CPU has AVX2, else nil.
var (
	activeAdd   = archAdd
	activeScale = archScale
)

// Add sets x[i] += y[i] for every index of x; y must be at least as long as x.
func Add(x, y []float32) {
	n := len(x)
	y = y[:n]
	i := 0
	if activeAdd != nil && n >= 8 {
		i = n &^ 7
		activeAdd(x, y, i)
	}
	for ; i < n; i++ {
		x[i] += y[i]
	}
}

// Scale sets x[i] *= s for every index of x.
func Scale(x []float32, s float32) {
	n := len(x)
	i := 0
	if activeScale != nil && n >= 8 {
		i = n &^ 7
		activeScale(x, s, i)
	}
	for ; i < n; i++ {
		x[i] *= s
	}
}
