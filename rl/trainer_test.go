package rl

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/delegatelab/delegate/reward"
)

func readMetricsFile(t *testing.T, dir string) []Metrics {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := ReadMetrics(f)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func meanReward(ms []Metrics) float64 {
	var s float64
	for _, m := range ms {
		s += m.Reward
	}
	return s / float64(len(ms))
}

func TestToyRunRaisesReward(t *testing.T) {
	for _, est := range []reward.Estimator{reward.GRPO, reward.DrGRPO, reward.RLOO} {
		t.Run(string(est), func(t *testing.T) { checkToyRun(t, est) })
	}
}

func checkToyRun(t *testing.T, est reward.Estimator) {
	dir := t.TempDir()
	cfg := toyConfig(dir)
	cfg.Estimator = est
	progress := make(chan Progress, 1024)
	tr, _, _ := newToy(t, cfg, progress)
	if err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ms := readMetricsFile(t, dir)
	if got, want := len(ms), cfg.Steps; got != want {
		t.Fatalf("metrics lines = %d, want %d", got, want)
	}
	for i, m := range ms {
		if m.Step != i+1 {
			t.Errorf("line %d: step %d, want %d", i, m.Step, i+1)
		}
		for name, v := range map[string]float64{"loss": m.Loss, "pg_loss": m.PGLoss, "grad_norm": m.GradNorm} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("step %d: %s = %v, want finite", m.Step, name, v)
			}
		}
		if m.Rollouts != cfg.GroupSize*cfg.ItemsPerStep || m.Groups != cfg.ItemsPerStep {
			t.Errorf("step %d: %d rollouts in %d groups, want %d in %d", m.Step, m.Rollouts, m.Groups, cfg.GroupSize*cfg.ItemsPerStep, cfg.ItemsPerStep)
		}
		if m.Estimator != string(est) || m.Norm != string(cfg.norm()) {
			t.Errorf("step %d: estimator %q norm %q, want %q and %q", m.Step, m.Estimator, m.Norm, est, cfg.norm())
		}
		if m.ClipFrac != 0 {
			t.Errorf("step %d: clip fraction %v with one epoch, want 0 (the ratio is 1)", m.Step, m.ClipFrac)
		}
		if m.LogprobGap > 1e-3 {
			t.Errorf("step %d: sampler and trainer logprobs differ by %v", m.Step, m.LogprobGap)
		}
		if _, ok := m.Scalars["tokens"]; !ok {
			t.Errorf("step %d: scalars %v lack the rollout's \"tokens\"", m.Step, m.Scalars)
		}
	}
	var rs, us float64
	for _, m := range ms {
		rs += m.RolloutSeconds
		us += m.UpdateSeconds
	}
	var gn float64
	for _, m := range ms {
		gn += m.GradNorm
	}
	t.Logf("rollouts %.2fs, updates %.2fs, mean grad norm %.4f", rs, us, gn/float64(len(ms)))
	first, last := meanReward(ms[:4]), meanReward(ms[len(ms)-4:])
	t.Logf("mean reward: first 4 steps %.3f, last 4 steps %.3f", first, last)
	if !(last >= first+0.5 && last >= 0.7) {
		t.Errorf("mean reward went from %.3f (first 4 steps) to %.3f (last 4), want a rise of at least 0.5 to 0.7 or more", first, last)
	}
	if _, err := os.Stat(filepath.Join(CheckpointDir(dir), "state.json")); err != nil {
		t.Errorf("no final checkpoint: %v", err)
	}
	close(progress)
	var ends, rollouts int
	for ev := range progress {
		if ev.Metrics != nil {
			ends++
			if ev.Metrics.Step != ev.Step {
				t.Errorf("progress event of step %d carries the metrics of step %d", ev.Step, ev.Metrics.Step)
			}
		} else {
			rollouts++
		}
	}
	if drop := tr.DroppedProgress(); ends+int(drop) < cfg.Steps || ends > cfg.Steps {
		t.Errorf("%d end-of-step progress events and %d dropped, want %d steps", ends, drop, cfg.Steps)
	}
	if rollouts != 0 {
		t.Errorf("%d rollout progress events from the trainer: the source reports its rollouts", rollouts)
	}
}

func TestResumeAfterCancel(t *testing.T) {
	dir := t.TempDir()
	cfg := toyConfig(dir)
	cfg.Steps = 6
	cfg.Schedule.Total = 6
	cfg.CheckpointEvery = 2

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr, env, p := newToy(t, cfg, nil)
	perStep := int64(cfg.GroupSize * cfg.ItemsPerStep)
	env.before = func(_ context.Context, _ int) error {
		if env.calls.Load() > 3*perStep { // the first rollout of step 4
			cancel()
		}
		return nil
	}
	err := tr.Run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run err = %v, want context.Canceled", err)
	}
	if got := tr.StepsDone(); got != 3 {
		t.Fatalf("steps done = %d, want 3", got)
	}
	if got := len(readMetricsFile(t, dir)); got != 3 {
		t.Fatalf("metrics lines after cancel = %d, want 3", got)
	}
	saved := append([]float32(nil), p.Data...)

	// A crash could also leave lines past the checkpoint and a partial line.
	f, err := os.OpenFile(filepath.Join(dir, MetricsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"version":1,"step":4}` + "\n" + `{"version":1,"st`); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	// A fresh process: the same starting weights, resumed from the checkpoint.
	tr2, _, p2 := newToy(t, cfg, nil)
	if err := tr2.resume(); err != nil {
		t.Fatal(err)
	}
	if got := tr2.StepsDone(); got != 3 {
		t.Fatalf("resumed at step %d, want 3", got)
	}
	for i := range saved {
		if p2.Data[i] != saved[i] {
			t.Fatalf("resumed parameter %d = %v, want %v as checkpointed", i, p2.Data[i], saved[i])
		}
	}
	if got, want := tr2.l.opt.Steps, tr.l.opt.Steps; got != want {
		t.Errorf("resumed optimizer steps = %d, want %d", got, want)
	}

	tr3, _, _ := newToy(t, cfg, nil)
	if err := tr3.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ms := readMetricsFile(t, dir)
	if got, want := len(ms), cfg.Steps; got != want {
		t.Fatalf("metrics lines after resume = %d, want %d", got, want)
	}
	for i, m := range ms {
		if m.Step != i+1 {
			t.Errorf("line %d: step %d, want %d", i+1, m.Step, i+1)
		}
	}
	if got := tr3.StepsDone(); got != cfg.Steps {
		t.Errorf("steps done = %d, want %d", got, cfg.Steps)
	}
}

func TestFailedRolloutsAreCounted(t *testing.T) {
	dir := t.TempDir()
	cfg := toyConfig(dir)
	cfg.Steps = 1
	cfg.Schedule.Total = 1
	tr, env, _ := newToy(t, cfg, nil)
	var n atomic.Int64 // each rollout's own number: concurrent rollouts may read env.calls after another's increment
	env.before = func(_ context.Context, item int) error {
		if n.Add(1)%4 == 0 {
			return errors.New("sub-agent unreachable")
		}
		return nil
	}
	m, err := tr.Step(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.FailedRollouts, cfg.GroupSize*cfg.ItemsPerStep/4; got != want {
		t.Errorf("failed rollouts = %d, want %d", got, want)
	}
	if !strings.Contains(m.FirstFailure, "sub-agent unreachable") {
		t.Errorf("first failure %q does not say why", m.FirstFailure)
	}

	env.before = func(context.Context, int) error { return errors.New("down") }
	if _, err := tr.Step(context.Background()); err == nil || !strings.Contains(err.Error(), "down") {
		t.Errorf("all rollouts failing: err = %v, want one naming the failure", err)
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	cfg := toyConfig(t.TempDir())
	p := tinyParams(t, 64, 1)
	src := &fixedSource{}
	tests := []struct {
		name string
		cfg  func(*Config)
		src  Source
		want string
	}{
		{"no role", func(c *Config) { c.PolicyRole = "" }, src, "policy_role"},
		{"bad estimator", func(c *Config) { c.Estimator = "ppo" }, src, "estimator"},
		{"bad norm", func(c *Config) { c.Norm = "mean" }, src, "norm"},
		{"clip eps", func(c *Config) { c.ClipEps = 0 }, src, "clip_eps"},
		{"greedy", func(c *Config) { c.Temperature = 0 }, src, "temperature"},
		{"rloo of one", func(c *Config) { c.Estimator = "rloo"; c.GroupSize = 1 }, src, "group_size"},
		{"no source", nil, nil, "source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			if tt.cfg != nil {
				tt.cfg(&c)
			}
			_, err := New(c, p, tt.src, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one naming %q", err, tt.want)
			}
		})
	}
}

// TestItemsReplay checks that a step's items depend on the step alone.
// The steps are drawn in order, again, or first after a resume.
func TestItemsReplay(t *testing.T) {
	inOrder := NewItems(5, 20, 4)
	var want [][]int
	for step := 1; step <= 6; step++ {
		items := inOrder.Step(step)
		if len(items) != 4 || !slices.IsSorted(items) || slices.Compact(slices.Clone(items))[3] != items[3] {
			t.Fatalf("step %d: items %v, want 4 distinct in increasing order", step, items)
		}
		want = append(want, items)
	}
	for _, order := range [][]int{{4, 5, 6}, {3, 3, 4}, {6, 1, 2}} {
		s := NewItems(5, 20, 4)
		for _, step := range order {
			if got := s.Step(step); !slices.Equal(got, want[step-1]) {
				t.Errorf("order %v: step %d drew %v, want %v", order, step, got, want[step-1])
			}
		}
	}
}

// TestResumeReproducesTheRun compares a run interrupted and resumed with one that was not.
// Rollouts are seeded per step and slot, and the item sampler replays the earlier steps,
// so the steps after the resume are the same.
func TestResumeReproducesTheRun(t *testing.T) {
	run := func(dir string, cancelAt int64) []Metrics {
		cfg := toyConfig(dir)
		cfg.Steps, cfg.Schedule.Total, cfg.CheckpointEvery = 6, 6, 4
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		tr, env, _ := newToy(t, cfg, nil)
		if cancelAt > 0 {
			env.before = func(context.Context, int) error {
				if env.calls.Load() > cancelAt {
					cancel()
				}
				return nil
			}
			if err := tr.Run(ctx); !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			tr, _, _ = newToy(t, cfg, nil)
		}
		if err := tr.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return readMetricsFile(t, dir)
	}
	want := run(t.TempDir(), 0)
	got := run(t.TempDir(), 2*16+5) // in step 3, between checkpoints
	if len(got) != len(want) {
		t.Fatalf("%d metric lines, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Step != w.Step || g.Reward != w.Reward || g.Loss != w.Loss || g.GradNorm != w.GradNorm || g.PolicyTokens != w.PolicyTokens {
			t.Errorf("step %d: resumed run %+v\nwant %+v", w.Step, g, w)
		}
	}
}
