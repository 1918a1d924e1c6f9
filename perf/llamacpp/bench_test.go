package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseBench reads recorded llama-bench JSONL output.
func TestParseBench(t *testing.T) {
	rec, err := os.ReadFile(filepath.Join("testdata", "llama-bench.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		out     string
		wantErr string
	}{
		{"recorded", string(rec), ""},
		{"two records", string(rec) + string(rec), "got 2 records"},
		{"none", "\n", "got 0 records"},
		{"not json", "| model | size |\n", "parse output line"},
		{"no rate", `{"n_threads": 1, "avg_ts": 0}`, "not a rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseBench([]byte(tc.out))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("parseBench: err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.AvgTS <= 0 || got.NGen != 32 || got.NPrompt != 0 || got.NThreads != 1 || got.BuildCommit == "" {
				t.Errorf("parseBench = %+v, want a tg32 record at 1 thread with a rate and a commit", got)
			}
		})
	}
}
