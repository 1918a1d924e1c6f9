//go:build !amd64 || purego

package kernel

// archGemvHalf: no half-width assembly here.
func archGemvHalf() ([3]gemvHalf1Func, [3]gemvHalf4Func, [3]func([]float32, []uint16)) {
	return [3]gemvHalf1Func{}, [3]gemvHalf4Func{}, [3]func([]float32, []uint16){}
}

func archGemvHalf8() [3]gemvHalf4Func { return [3]gemvHalf4Func{} }

func archBF16Pairs() (g8, g4 gemvHalf4Func, g1 gemvHalf1Func, wd func(dst []float32, src []uint16, k int)) {
	return nil, nil, nil, nil
}
