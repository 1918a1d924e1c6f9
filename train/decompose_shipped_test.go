package train

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/delegatelab/delegate/world"
)

// TestDecomposeOnThePlanner runs decompose mode for a step on the shipped
// planner and solver, on two-part problems. Rollouts must be scored
// against the single-agent baseline, each step's mean reward on the graded
// comparison's scale. The pretrained planner must write plans and
// aggregations in the protocol's format. The fixed plans, whose products
// the shipped solver answers, must be right. It runs under the race
// detector. Its name leaves out "Shipped" so that the README's
// `-run Shipped` pass, the headline's checks, does not run it again.
func TestDecomposeOnThePlanner(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = ModeDecompose
	cfg.World = world.Levels()[3]
	cfg.OutDir = filepath.Join(t.TempDir(), "run")
	cfg.EvalSplit = world.Validation.String()
	cfg.TrainTime = 2 * time.Minute
	cfg.RL.GroupSize, cfg.RL.ItemsPerStep, cfg.RL.Steps = 4, 1, 1
	cfg.RL.Schedule.Warmup, cfg.RL.Schedule.Total = 0, 1
	cfg.RL.LogprobCheckEvery = 1
	cfg.TrainProblems = 16
	cfg.EvalItems = 3
	cfg.RuleItems = 1
	cfg.EvalConcurrency = 3
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 1 {
		t.Errorf("%d steps, want 1", res.Steps)
	}
	for _, m := range readMetrics(t, cfg.OutDir) {
		// The graded comparison lies in [−1 − cost, 1].
		if math.IsNaN(m.Loss) || !(m.Reward >= -1.6 && m.Reward <= 1) || m.Rollouts != 4 {
			t.Errorf("step %d: loss %v, reward %v, %d rollouts", m.Step, m.Loss, m.Reward, m.Rollouts)
		}
	}
	tab := res.Table
	for _, tt := range []struct {
		arm       string
		minRight  int
		maxFailed int
	}{
		{ArmPretrainedPlan, 0, 1},
		{ArmPlanRule + ": hand over every ready step", 2, 0},
		{ArmPlanOracle, 2, 0},
	} {
		r := tab.Row(tt.arm)
		if r == nil {
			t.Fatalf("no row %s", tt.arm)
		}
		if r.Correct < tt.minRight || r.Failed > tt.maxFailed {
			t.Errorf("%s: %d/%d right, %d failed; want at least %d right, at most %d failed", tt.arm, r.Correct, r.N, r.Failed, tt.minRight, tt.maxFailed)
		}
	}
	if r := tab.Row(ArmPretrainedPlan); r != nil && (r.SubagentCalls < 1 || r.SubagentCalls > 2) {
		t.Errorf("pretrained planner: %v subtasks per item, want 1 to 2 (the products)", r.SubagentCalls)
	}
}
