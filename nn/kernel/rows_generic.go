//go:build !amd64 || purego

package kernel

// archRows: without the assembly every product over a Packed packs A.
var archRows rowsFunc
