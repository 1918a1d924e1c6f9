//go:build !amd64 || purego

package kernel

// archExp: without the assembly the portable exponential is the only one.
var archExp expFunc

// archMax8: the portable loop of Max is the only one.
var archMax8 func(x []float32) float32

// archExpRows: without the assembly ExpSumRows calls ExpSum per row.
var archExpRows expRowsFunc
