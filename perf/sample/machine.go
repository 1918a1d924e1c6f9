package main

import (
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/delegatelab/delegate/internal/host"
)

// machine describes the computer a figure came from.
type machine struct {
	CPU   string  // /proc/cpuinfo model name, or GOARCH when unknown
	Cores int     // logical CPUs
	Load1 float64 // one-minute load average at start; -1 when unknown
}

// readMachine reads the CPU model and load average from /proc.
// On systems without it the fields say unknown rather than fail.
func readMachine() machine {
	m := machine{CPU: host.CPUModel(), Cores: runtime.NumCPU(), Load1: -1}
	if m.CPU == "" {
		m.CPU = runtime.GOARCH + " (model unknown)"
	}
	if avg, ok := host.LoadAverage(); ok {
		m.Load1 = avg[0]
	}
	return m
}

// busy reports whether other work is likely to distort timings: a load
// average above half the cores.
func (m machine) busy() bool { return m.Load1 > float64(m.Cores)/2 }

// print writes the machine header, with a warning when it is busy.
func (m machine) print(w io.Writer) {
	fmt.Fprintf(w, "machine: %s, %d cores, %s, %s\n", m.CPU, m.Cores, runtime.Version(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	if m.Load1 < 0 {
		fmt.Fprintln(w, "load average: unknown")
		return
	}
	fmt.Fprintf(w, "load average at start: %.2f\n", m.Load1)
	if m.busy() {
		fmt.Fprintf(w, "WARNING: load average %.2f on %d cores: other processes share the CPU, figures are unreliable (interleaved repetitions reduce, not remove, the effect)\n", m.Load1, m.Cores)
	}
}
