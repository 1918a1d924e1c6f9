//go:build !amd64 || purego

package kernel

// archSoftmaxGrad: without the assembly SoftmaxGrad runs in Go.
var archSoftmaxGrad func(d, p []float32, dot, scale float32)
