package rl

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// finishedRun runs a two-step toy run in a temporary directory.
func finishedRun(t *testing.T) Config {
	t.Helper()
	cfg := toyConfig(t.TempDir())
	cfg.Steps, cfg.Schedule.Total = 2, 2
	tr, _, _ := newToy(t, cfg, nil)
	if err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestResumeRejectsBadCheckpoints(t *testing.T) {
	tests := []struct {
		name  string
		state func(map[string]any)
		want  string
	}{
		{"other version", func(s map[string]any) { s["version"] = 99 }, "state.json: state version 99, this build reads 0 to 2"},
		{"other model", func(s map[string]any) { s["model"].(map[string]any)["dim"] = 64 }, "differs from the run's"},
		{"other step", func(s map[string]any) { s["step"] = 5 }, `written at step "2", state.json says 5`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := finishedRun(t)
			path := filepath.Join(CheckpointDir(cfg.OutDir), "state.json")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var s map[string]any
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			tt.state(s)
			if b, err = json.Marshal(s); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			tr, _, _ := newToy(t, cfg, nil)
			err = tr.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestResumeFromOldCheckpoint(t *testing.T) {
	// A crash between save's two renames leaves only checkpoint.old.
	cfg := finishedRun(t)
	if err := os.Rename(CheckpointDir(cfg.OutDir), filepath.Join(cfg.OutDir, ckptDir+".old")); err != nil {
		t.Fatal(err)
	}
	tr, _, _ := newToy(t, cfg, nil)
	if err := tr.resume(); err != nil {
		t.Fatal(err)
	}
	if got := tr.StepsDone(); got != 2 {
		t.Errorf("resumed at step %d, want 2", got)
	}
}

func TestMetricsLogErrors(t *testing.T) {
	tests := []struct {
		name, log, want string
	}{
		{"garbage line", "{\"version\":1,\"step\":1}\nnot json\n", "line 2"},
		{"other version", "{\"version\":7,\"step\":1}\n", "version 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, MetricsFile), []byte(tt.log), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := openMetrics(dir, 5)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("open: err = %v, want one containing %q", err, tt.want)
			}
			_, err = ReadMetrics(strings.NewReader(tt.log))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("read: err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// FuzzMetricsKeep feeds arbitrary logs to the resume-time truncation: it
// must fail or keep a prefix of whole lines, never panic.
func FuzzMetricsKeep(f *testing.F) {
	f.Add([]byte("{\"version\":1,\"step\":1}\n{\"version\":1,\"step\":2}\n{\"version\":1,\"st"), 1)
	f.Add([]byte(""), 0)
	f.Add([]byte("\n\n"), 3)
	f.Add([]byte("{\"version\":1,\"step\":9}\n"), 3)
	f.Fuzz(func(t *testing.T, log []byte, step int) {
		dir := t.TempDir()
		path := filepath.Join(dir, MetricsFile)
		if err := os.WriteFile(path, log, 0o644); err != nil {
			t.Fatal(err)
		}
		w, err := openMetrics(dir, step)
		if err != nil {
			return
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		kept, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(log, kept) || (len(kept) > 0 && kept[len(kept)-1] != '\n') {
			t.Errorf("kept %q of %q: not a prefix of whole lines", kept, log)
		}
	})
}
