package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestRunTiny runs the whole program on a toy shape.
// It writes, loads and decodes the three copies and prints the machine, the table and a verdict.
func TestRunTiny(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-shape", "tiny", "-n", "8", "-reps", "1"}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		`(?m)^q8: machine .+, \d+ cores, kernel \w+`,
		`(?m)^\s*q8_0\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+`,
		`(?m)^q8_0/bf16 tok/s ratio [0-9.]+ at 1 thread\(s\) \(per CPU second [0-9.]+; bytes 0\.[3-6]\d of bf16's\), target >= 1\.60: (PASS|MISS)`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}
	var o bytes.Buffer
	if err := run([]string{"-shape", "huge"}, &o); err == nil || !strings.Contains(err.Error(), "unknown shape") {
		t.Errorf("unknown shape: err = %v", err)
	}
}
