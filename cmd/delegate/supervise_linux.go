package main

import "syscall"

// childAttr puts a child in its own process group (so that stopping it
// stops what it started, and a terminal's Ctrl-C reaches only the
// supervisor, which stops the children in order), and has the kernel
// kill it when the supervisor dies, even by SIGKILL: no orphan is left.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
