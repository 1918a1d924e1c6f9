//go:build !amd64 || purego

package kernel

// archExpTail: without the assembly ExpSum's last values go through Exp.
var archExpTail expTailFunc
