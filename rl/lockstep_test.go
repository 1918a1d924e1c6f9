package rl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loggedSource notes each step a trainer asks its source for.
type loggedSource struct {
	name string
	src  Source
	log  *[]string
}

func (s loggedSource) Next(ctx context.Context, step int) ([]Group, error) {
	*s.log = append(*s.log, fmt.Sprintf("%s%d", s.name, step))
	return s.src.Next(ctx, step)
}

// TestLockstep checks two trainers in lockstep.
// They take each step one after the other, each with its own metrics and checkpoint,
// and train exactly as each would alone.
// Resumed at different steps, as after a crash between their checkpoints,
// the one behind catches up before the other goes on.
func TestLockstep(t *testing.T) {
	root := t.TempDir()
	cfgOf := func(name string, steps int) Config {
		cfg := toyConfig(filepath.Join(root, name))
		cfg.Steps, cfg.Schedule.Total, cfg.CheckpointEvery = steps, steps, 1
		if name == "b" {
			cfg.Seed = 5
		}
		return cfg
	}
	newTrainer := func(cfg Config, name string, log *[]string) *Trainer {
		p := tinyParams(t, 64, 7)
		src := &toySource{cfg: cfg, model: newLocal(t, p, "toy-"+name), items: NewItems(cfg.Seed, 4, cfg.ItemsPerStep)}
		tr, err := New(cfg, p, loggedSource{name, src, log}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	run := func(steps int) []string {
		var log []string
		if err := Lockstep(context.Background(), newTrainer(cfgOf("a", steps), "a", &log), newTrainer(cfgOf("b", steps), "b", &log)); err != nil {
			t.Fatal(err)
		}
		return log
	}
	if got, want := strings.Join(run(3), " "), "a1 b1 a2 b2 a3 b3"; got != want {
		t.Errorf("steps taken %q, want %q", got, want)
	}
	// Each trainer alone, from the same start on the same source, takes
	// the same steps: neither touched the other's parameters.
	for _, name := range []string{"a", "b"} {
		cfg := cfgOf(name, 3)
		cfg.OutDir = filepath.Join(root, name+"-alone")
		var log []string
		if err := newTrainer(cfg, name, &log).Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		got, want := readMetricsFile(t, filepath.Join(root, name)), readMetricsFile(t, cfg.OutDir)
		if len(got) != len(want) {
			t.Fatalf("%s: %d metrics lines in lockstep, %d alone", name, len(got), len(want))
		}
		for i := range want {
			if g, w := got[i], want[i]; g.Reward != w.Reward || g.Loss != w.Loss || g.GradNorm != w.GradNorm || g.PolicyTokens != w.PolicyTokens {
				t.Errorf("%s step %d: lockstep %+v\nalone %+v", name, w.Step, g, w)
			}
		}
	}

	// b lost its checkpoints: it redoes steps 1 to 3 alone, then both go on.
	if err := os.RemoveAll(CheckpointDir(filepath.Join(root, "b"))); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(run(5), " "), "b1 b2 b3 a4 b4 a5 b5"; got != want {
		t.Errorf("resumed at steps 3 and 0: steps taken %q, want %q", got, want)
	}
	for _, name := range []string{"a", "b"} {
		ms := readMetricsFile(t, filepath.Join(root, name))
		for i, m := range ms {
			if m.Step != i+1 {
				t.Fatalf("%s: metrics line %d is step %d", name, i+1, m.Step)
			}
		}
		if len(ms) != 5 {
			t.Errorf("%s: %d metrics lines, want 5", name, len(ms))
		}
	}
	if err := Lockstep(context.Background()); err == nil {
		t.Error("Lockstep of no trainers: no error")
	}
}
