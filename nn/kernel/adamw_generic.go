//go:build !amd64 || purego

package kernel

// archAdamW: without the assembly the portable update is the only one.
var archAdamW adamwFunc
