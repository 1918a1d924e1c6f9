package main

import "syscall"

// childAttr puts a child in its own process group. Stopping it then stops
// what it started, and a terminal's Ctrl-C reaches only the supervisor,
// which stops the children in order. The kernel kills the child when the
// supervisor dies, even by SIGKILL, so no orphan is left.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
