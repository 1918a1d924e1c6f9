//go:build !purego

package kernel

import "unsafe"

//go:noescape
func expSumAVX512(dst, src *float32, n int, scale, shift float32) float32

// archExp512 is the AVX-512 exponential where the CPU has AVX-512F, else nil.
// Its lanes and sum have expSumAVX2's bits.
var archExp512 = func() expFunc {
	if !haveAVX512() {
		return nil
	}
	return func(dst, src []float32, n int, scale, shift float32) float32 {
		_ = dst[n-1]
		_ = src[n-1]
		return expSumAVX512(unsafe.SliceData(dst), unsafe.SliceData(src), n, scale, shift)
	}
}()

//go:noescape
func expRowsAVX512(p *float32, ld, n0, rows int, scale float32, shift, sums *float32, redo *uint16)

// haveExpRows says whether expRows runs: where the CPU has AVX-512.
var haveExpRows = archExp512 != nil

// expRows is expRowsAVX512 with its bounds checked.
func expRows(p []float32, ld, n0, rows int, scale float32, shift, sums []float32, redo []uint16) {
	_ = p[(rows-1)*ld+n0+rows-2]
	_ = shift[rows-1]
	_ = sums[rows-1]
	_ = redo[rows-1]
	expRowsAVX512(unsafe.SliceData(p), ld, n0, rows, scale, unsafe.SliceData(shift), unsafe.SliceData(sums), unsafe.SliceData(redo))
}
