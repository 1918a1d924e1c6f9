package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A dataset record over --max-record is refused before any model is
// called. The error names the file, the line and the limit. A larger limit
// takes it.
func TestDatasetMaxRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "open.jsonl")
	doc := `{"id":"a","prompt":"short"}` + "\n" + `{"id":"b","prompt":"` + strings.Repeat("x", 300) + `"}` + "\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeBenchConfig(t, "http://127.0.0.1:1")
	_, err := execute(t, testEnv, "bench", "--config", cfg, "--dataset", "open", "--data", path, "--strategies", "single",
		"--max-record", "256", "--progress=false", "--out", t.TempDir())
	want := path + ":2: line is 322 bytes, over the limit of 256 bytes per record"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--max-record") {
		t.Errorf("err = %v; want it to contain %q and name --max-record", err, want)
	}
	d := datasetFlags{dataset: "open", data: path, maxRec: 1024}
	tasks, _, err := d.load(io.Discard)
	if err != nil || len(tasks) != 2 {
		t.Errorf("--max-record 1024: %d tasks, %v; want 2", len(tasks), err)
	}
}
