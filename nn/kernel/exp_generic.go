//go:build !amd64 || purego

package kernel

// archExp: without the assembly the portable exponential is the only one.
var archExp expFunc

// archMax8: the portable loop of Max is the only one.
var archMax8 func(x []float32) float32

// haveExpRows: without the assembly ExpSumRows calls ExpSum per row.
const haveExpRows = false

// expRows is never called without the assembly.
func expRows(p []float32, ld, n0, rows int, scale float32, shift, sums []float32, redo []uint16) {
	panic("kernel.expRows: no assembly") // a programming error
}
