package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
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

// TestCPUProfile checks that -cpuprofile writes a gzipped profile.
func TestCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q8.prof")
	var out bytes.Buffer
	if err := run([]string{"-shape", "tiny", "-n", "4", "-reps", "1", "-threads", "1", "-cpuprofile", path}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("profile is not gzipped: %v", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("read profile: %v", err)
	}
	if len(b) == 0 {
		t.Errorf("profile is empty")
	}
	if err := run([]string{"-shape", "tiny", "-cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir")}, io.Discard); err == nil {
		t.Errorf("profile in a missing directory: err = nil, want an error")
	}
}
