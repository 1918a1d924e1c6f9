package main

import (
	"errors"
	"syscall"
)

// Process groups and signals to them are a Unix matter: on Windows the
// supervisor starts nothing.
func childAttr() *syscall.SysProcAttr { return nil }

func killGroup(int, syscall.Signal) error {
	return errors.New("stopping a process group needs a Unix system")
}
