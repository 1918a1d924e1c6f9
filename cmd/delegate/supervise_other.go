//go:build unix && !linux

package main

import "syscall"

// childAttr puts a child in its own process group. Without Linux's
// Pdeathsig a child outlives a supervisor killed by SIGKILL; a supervisor
// stopped by a signal it can catch stops its children first.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
