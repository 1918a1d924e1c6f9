//go:build !amd64 || purego

package kernel

// archRotate: without the assembly Rotate runs in Go.
var archRotate func(x, c, s []float32, n, w int)
