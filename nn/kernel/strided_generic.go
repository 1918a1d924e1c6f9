//go:build !amd64 || purego

package kernel

// archStrided: without the assembly MatMulStrided reports false.
var archStrided stridedFunc
