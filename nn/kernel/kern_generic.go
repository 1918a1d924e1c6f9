//go:build !amd64 || purego

package kernel

// archImpl: without the assembly (another architecture, or the purego
// build tag) the pure-Go kernel is the only one.
func archImpl() (microKernel, pairKernel, packFunc, string) {
	return goKernel, nil, goPackT16, "go"
}

var archGemv1, archGemv4, archGemv8 = gemv1Func(goGemv1), gemv4Func(nil), gemv4Func(nil)

var (
	archDots8 func(sc, q, keys []float32, stride int, scale float32)
	archMix   func(out, w, vals []float32, stride int)
)

// archPackA6: the portable loop of packA is the only A packer.
var archPackA6 packA6Func
