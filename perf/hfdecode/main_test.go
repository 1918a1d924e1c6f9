package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestRunTiny runs the whole program on a toy shape, in both stored types.
// It writes, loads and decodes both copies, which give the same greedy tokens,
// and prints the table and a verdict.
func TestRunTiny(t *testing.T) {
	for _, dtype := range []string{"BF16", "F16"} {
		t.Run(dtype, func(t *testing.T) {
			var out bytes.Buffer
			if err := run([]string{"-shape", "tiny", "-dtype", dtype, "-n", "8", "-reps", "1", "-work", t.TempDir()}, &out); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			want := regexp.MustCompile(`(?m)^(bf16|f16)/f32 tok/s ratio [0-9.]+ \(bytes per token 0\.5\d of f32's\), target >= 1\.30: (PASS|MISS)`)
			if !want.MatchString(out.String()) {
				t.Errorf("output lacks the verdict line:\n%s", out.String())
			}
			if !strings.Contains(out.String(), "MB read/token") {
				t.Errorf("output lacks the table:\n%s", out.String())
			}
		})
	}
	var out bytes.Buffer
	if err := run([]string{"-shape", "huge"}, &out); err == nil || !strings.Contains(err.Error(), "unknown shape") {
		t.Errorf("unknown shape: err = %v", err)
	}
}
