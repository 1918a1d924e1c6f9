package rollout

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/strategy"
)

var update = flag.Bool("update", false, "rewrite the record fixtures in testdata from a fresh run")

// TestRecordFixtures decodes a record of every released version, kept in testdata.
// A format change that breaks old files is then noticed.
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

// A run's records carry each rollout as an episode.
// An episode holds the trained role's samples only and every call's spend;
// group_overrides holds the roles.
func TestRecordsCarryEpisodes(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	cfg := config(dir, 2, 3)
	if _, err := Run(context.Background(), cfg, tasks(2), f.baseline, Same(f.policy), f.scorer, nil); err != nil {
		t.Fatal(err)
	}
	groups := readGroups(t, dir)
	if len(groups) == 0 {
		t.Fatal("no groups written")
	}
	for _, g := range groups {
		if got, want := len(g.Episodes), len(g.Rollouts); got != want {
			t.Fatalf("group %s: got %d episodes, want one per member (%d)", g.ID, got, want)
		}
		for i, e := range g.Episodes {
			if e.TaskID != g.TaskID || e.Outcome.Reward != g.Rollouts[i].Reward {
				t.Errorf("group %s episode %d: task %q reward %v, want %q %v", g.ID, i, e.TaskID, e.Outcome.Reward, g.TaskID, g.Rollouts[i].Reward)
			}
			if len(e.Samples) == 0 || len(e.Calls) <= len(e.Samples) {
				t.Errorf("group %s episode %d: %d samples of %d calls, want the delegator's samples and the sub-agents' calls", g.ID, i, len(e.Samples), len(e.Calls))
			}
			for _, s := range e.Samples {
				if s.Role != strategy.RoleDelegator {
					t.Errorf("group %s episode %d: a sample of frozen role %q", g.ID, i, s.Role)
				}
			}
			// The trained sequences are the episode's samples: none of
			// the frozen sub-agents' calls is one.
			seqs := 0
			for _, r := range g.SequenceRollout {
				if r == g.Rollouts[i].Index {
					seqs++
				}
			}
			if seqs != len(e.Samples) {
				t.Errorf("group %s episode %d: %d trained sequences, want its %d samples", g.ID, i, seqs, len(e.Samples))
			}
		}
		var roles []string
		for _, r := range g.GroupOverrides.Roles {
			roles = append(roles, fmt.Sprintf("%s:%s:%v", r.Role, r.Model, r.Trained))
		}
		if got, want := strings.Join(roles, " "), "delegator:delegator-model:true subagent:subagent-model:false"; got != want {
			t.Errorf("group %s: roles %q, want %q", g.ID, got, want)
		}
	}
	for i, line := range readLines(t, filepath.Join(dir, ArtifactsFile)) {
		a, err := DecodeArtifact(line)
		if err != nil {
			t.Fatal(err)
		}
		if a.Status == StatusScored && a.Episode == nil {
			t.Errorf("artifact %d: scored, no episode", i+1)
		}
	}
}

func TestDecodeEpisodeOfOtherVersion(t *testing.T) {
	for _, tc := range []struct {
		name   string
		decode func([]byte) error
		line   string
	}{
		{"artifact", func(b []byte) error { _, err := DecodeArtifact(b); return err }, `{"version":1,"id":"t0#0.0","episode":{"version":2}}`},
		{"group", func(b []byte) error { _, err := DecodeGroup(b); return err }, `{"version":1,"id":"t0#0","episodes":[{"version":1},{"version":2}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.decode([]byte(tc.line))
			if err == nil || !strings.Contains(err.Error(), "episode version 2") || !strings.Contains(err.Error(), "version 1") {
				t.Errorf("got %v, want an error naming episode version 2 and version 1", err)
			}
		})
	}
}
