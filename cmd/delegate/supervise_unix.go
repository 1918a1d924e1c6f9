//go:build unix

package main

import "syscall"

// killGroup sends sig to the process group of a child started with
// childAttr (its pid is the group's id).
func killGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }
