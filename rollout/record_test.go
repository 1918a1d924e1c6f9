package rollout

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the record fixtures in testdata from a fresh run")

// TestRecordFixtures decodes a record of every released version, kept in
// testdata, so that a format change that breaks old files is noticed.
func TestRecordFixtures(t *testing.T) {
	if *update {
		dir := t.TempDir()
		f := newFixture(t)
		cfg := config(dir, 1, 2)
		cfg.OmitTraces = true
		if _, err := Run(context.Background(), cfg, tasks(1), f.baseline, Same(f.policy), f.scorer, nil); err != nil {
			t.Fatal(err)
		}
		for name, fixture := range map[string]string{ArtifactsFile: "artifact_v1.json", GroupsFile: "group_v1.json"} {
			lines := readLines(t, filepath.Join(dir, name))
			if err := os.WriteFile(filepath.Join("testdata", fixture), append(lines[0], '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	art, err := os.ReadFile(filepath.Join("testdata", "artifact_v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := DecodeArtifact(bytes.TrimSpace(art))
	if err != nil {
		t.Fatalf("artifact v1: %v", err)
	}
	if a.ID != "t0#0.0" && a.ID != "t0#0.1" || a.Status != StatusScored || len(a.Subtasks) != 3 || a.Score == nil {
		t.Errorf("artifact v1 decoded as %+v", a)
	}
	grp, err := os.ReadFile(filepath.Join("testdata", "group_v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := DecodeGroup(bytes.TrimSpace(grp))
	if err != nil {
		t.Fatalf("group v1: %v", err)
	}
	if g.ID != "t0#0" || len(g.Rollouts) != 2 || len(g.Tokens) != 4 || len(g.Tokens[0]) != len(g.Masks[0]) {
		t.Errorf("group v1 decoded as id %q, %d rollouts, %d sequences", g.ID, len(g.Rollouts), len(g.Tokens))
	}
}

func TestDecodeOtherVersion(t *testing.T) {
	tests := []struct {
		name   string
		decode func([]byte) error
		line   string
		want   []string
	}{
		{"artifact", func(b []byte) error { _, err := DecodeArtifact(b); return err }, `{"version":2,"id":"x"}`, []string{"version 2", "version 1"}},
		{"group", func(b []byte) error { _, err := DecodeGroup(b); return err }, `{"version":9}`, []string{"version 9", "version 1"}},
		{"cut line", func(b []byte) error { _, err := DecodeGroup(b); return err }, `{"version":1,"id":"t0`, []string{"decode group"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode([]byte(tt.line))
			if err == nil {
				t.Fatal("got nil error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
