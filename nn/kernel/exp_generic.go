//go:build !amd64 || purego

package kernel

// archExp: without the assembly the portable exponential is the only one.
var archExp expFunc
