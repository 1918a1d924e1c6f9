package train

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/rl"
)

// groupRecorder keeps the groups its source gives each step.
type groupRecorder struct {
	src    rl.Source
	groups map[int][]rl.Group
}

func (r *groupRecorder) Next(ctx context.Context, step int) ([]rl.Group, error) {
	g, err := r.src.Next(ctx, step)
	if err == nil {
		r.groups[step] = g
	}
	return g, err
}

// replay gives recorded groups again.
type replay map[int][]rl.Group

func (r replay) Next(_ context.Context, step int) ([]rl.Group, error) { return r[step], nil }

// bothConfig is a short run of the shipped models training both policies.
func bothConfig(t *testing.T, steps int) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.OutDir = t.TempDir()
	cfg.Train = TrainBoth
	cfg.RL.GroupSize, cfg.RL.ItemsPerStep, cfg.RL.Steps = 4, 2, steps
	cfg.RL.Schedule.Warmup, cfg.RL.Schedule.Total = 0, steps
	cfg.RL.Schedule.MaxLR, cfg.RL.Schedule.MinLR = 1e-3, 1e-3
	cfg.RL.CheckpointEvery = 1
	cfg.RL.Concurrency = 8
	return cfg
}

// checkpointParams loads a trainer's policy from its checkpoint.
func checkpointParams(t *testing.T, dir string) *nn.Params {
	t.Helper()
	p, _, err := nn.Load(filepath.Join(rl.CheckpointDir(dir), "policy"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTrainBothTrainsEachPolicyOnItsOwnSamples trains both policies. One
// step's rollouts give the delegator its turns and the solver its answers,
// each call a sample of its own. After two steps, each trainer's
// parameters must be bit for bit those of a trainer of that policy alone
// fed its own groups. So neither trainer touched the other's parameters or
// trained on the other's samples, and the frozen starting models stayed
// as they were. A run stopped after the first step and resumed ends with
// the same parameters for both.
func TestTrainBothTrainsEachPolicyOnItsOwnSamples(t *testing.T) {
	ctx := context.Background()
	const steps = 2
	cfg := bothConfig(t, steps)
	r, err := newRunner(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	cfgs := r.trainerConfigs()
	if len(cfgs) != 2 || cfgs[0].PolicyRole != RoleDelegator || cfgs[1].PolicyRole != RoleSubagent || cfgs[1].OutDir != filepath.Join(cfg.OutDir, SolverDir) {
		t.Fatalf("trainer configs %+v", cfgs)
	}
	src, err := r.source(ctx, cfgs[0])
	if err != nil {
		t.Fatal(err)
	}
	recs := []*groupRecorder{{src: src, groups: map[int][]rl.Group{}}, {src: src.(*rollouts).View(1), groups: map[int][]rl.Group{}}}
	params := []*nn.Params{r.policyP, r.solverP}
	var trainers []*rl.Trainer
	for i, c := range cfgs {
		tr, err := rl.New(c, params[i], recs[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		trainers = append(trainers, tr)
	}
	if err := rl.Lockstep(ctx, trainers...); err != nil {
		t.Fatal(err)
	}

	// The samples are the delegator's conversations and the solver's
	// answers, one per call. Both are in every group with the same rewards
	// and advantages.
	var solverSamples, signal int
	for step := 1; step <= steps; step++ {
		dg, sg := recs[0].groups[step], recs[1].groups[step]
		if len(dg) != cfg.RL.ItemsPerStep || len(sg) != len(dg) {
			t.Fatalf("step %d: %d delegator groups and %d solver groups, want %d each", step, len(dg), len(sg), cfg.RL.ItemsPerStep)
		}
		for i := range dg {
			if len(dg[i].Rollouts) != len(sg[i].Rollouts) {
				t.Fatalf("step %d group %d: %d and %d rollouts", step, i, len(dg[i].Rollouts), len(sg[i].Rollouts))
			}
			for j, d := range dg[i].Rollouts {
				s := sg[i].Rollouts[j]
				if d.Reward != s.Reward || d.Advantage != s.Advantage {
					t.Errorf("step %d group %d rollout %d: reward %v advantage %v for the delegator, %v and %v for the solver", step, i, j, d.Reward, d.Advantage, s.Reward, s.Advantage)
				}
				if len(d.Episodes) == 0 {
					t.Errorf("step %d group %d rollout %d: no delegator sample", step, i, j)
				}
				if calls := int(s.Scalars["subagent_calls"]); len(s.Episodes) != calls {
					t.Errorf("step %d group %d rollout %d: %d solver samples of %d calls", step, i, j, len(s.Episodes), calls)
				}
				for _, e := range s.Episodes {
					if e.Calls != 1 || e.Len() >= r.solverP.Config.Context {
						t.Errorf("solver sample %s: %d calls, %d tokens (context %d)", e.Node, e.Calls, e.Len()+1, r.solverP.Config.Context)
					}
					for _, de := range d.Episodes {
						if slices.Equal(de.Prompt, e.Prompt) {
							t.Errorf("solver sample %s has the prompt of delegator sample %s", e.Node, de.Node)
						}
					}
					if s.Advantage != 0 {
						signal++
					}
				}
				solverSamples += len(s.Episodes)
			}
		}
	}
	if solverSamples == 0 || signal == 0 {
		t.Fatalf("%d solver samples, %d with an advantage: the case tests too little", solverSamples, signal)
	}

	// Each policy trained alone on its own recorded groups.
	for i, c := range cfgs {
		what := map[string]string{RoleDelegator: cfg.StartModel(), RoleSubagent: "solver"}[c.PolicyRole]
		start, err := loadCheckpoint(what, "")
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(start.Data, params[i].Data) {
			t.Errorf("%s: the parameters did not change", what)
		}
		c.OutDir = filepath.Join(t.TempDir(), what)
		tr, err := rl.New(c, start, replay(recs[i].groups), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(start.Data, params[i].Data) {
			t.Errorf("%s: trained in lockstep, the parameters differ from the %s trained alone on its own groups", what, what)
		}
	}
	frozen := map[string]*nn.Params{"solver": r.solver.Params(), cfg.StartModel(): r.pretrained.Params()}
	for what, p := range frozen {
		shipped, err := loadCheckpoint(what, "")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(shipped.Data, p.Data) {
			t.Errorf("the frozen %s changed", what)
		}
	}

	// Stopped after step 1 and resumed: the same parameters.
	resumed := bothConfig(t, 1)
	for _, n := range []int{1, steps} {
		resumed.RL.Steps = n
		r2, err := newRunner(resumed, Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := r2.train(ctx, 0)
		r2.close()
		if err != nil {
			t.Fatal(err)
		}
		if res.Steps != n || res.StoppedBy != "steps" || res.SolverCheckpoint != rl.CheckpointDir(filepath.Join(resumed.OutDir, SolverDir)) {
			t.Fatalf("run to step %d: %+v", n, res)
		}
	}
	for i, dir := range []string{resumed.OutDir, filepath.Join(resumed.OutDir, SolverDir)} {
		if got := checkpointParams(t, dir); !slices.Equal(got.Data, params[i].Data) {
			t.Errorf("%s: resumed after step 1, the parameters differ from the run's that was not stopped", dir)
		}
		if ms := readMetrics(t, dir); len(ms) != steps || ms[0].Step != 1 || ms[1].Step != 2 {
			t.Errorf("%s: metrics of steps %v, want 1 and 2", dir, ms)
		}
	}
}

func TestConfigTrain(t *testing.T) {
	for _, tc := range []struct {
		mode, train string
		err         string // "" when valid
	}{
		{ModeRoute, TrainDelegator, ""},
		{ModeRoute, TrainSolver, ""},
		{ModeRoute, TrainBoth, ""},
		{ModeMLPO, TrainDelegator, ""},
		{ModeRoute, "", `train: must be "delegator", "solver" or "both", got ""`},
		{ModeRoute, "leader", `train: must be "delegator", "solver" or "both", got "leader"`},
		{ModeMLPO, TrainBoth, `train: mode mlpo trains its leader only ("delegator"), got "both"`},
	} {
		t.Run(tc.mode+"/"+tc.train, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Mode, cfg.Train = tc.mode, tc.train
			err := cfg.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("err = %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// TestIdentityTrain checks that a run file records what a run trains. A
// run file written before the field existed is a delegator run's.
func TestIdentityTrain(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OutDir = t.TempDir()
	old := identityOf(cfg)
	b, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"train"`) {
		t.Fatalf("a delegator run's file %s names train: older builds' files would not match it", b)
	}
	if err := os.WriteFile(filepath.Join(cfg.OutDir, RunFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkIdentity(cfg); err != nil {
		t.Errorf("delegator run on a run file without train: %v", err)
	}
	both := cfg
	both.Train = TrainBoth
	if err := checkIdentity(both); err == nil || !strings.Contains(err.Error(), "train") {
		t.Errorf("train both on a delegator run's directory: err = %v, want one naming train", err)
	}
	both.OutDir = t.TempDir()
	if err := checkIdentity(both); err != nil {
		t.Fatal(err)
	}
	delegator := cfg
	delegator.OutDir = both.OutDir
	if err := checkIdentity(delegator); err == nil || !strings.Contains(err.Error(), "both") {
		t.Errorf("a delegator run on a train both run's directory: err = %v, want one naming both", err)
	}
}

// TestRunTrainSolver trains the solver alone. Its trainer must live in
// OutDir/SolverDir. Its table must hold the pretrained delegator with the
// trained solver, no arm of a trained delegator, and the solver's check.
func TestRunTrainSolver(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Train = TrainSolver
	cfg.RL.Steps, cfg.RL.Schedule.Total = 2, 2
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	solverDir := filepath.Join(cfg.OutDir, SolverDir)
	if res.Steps != 2 || res.Checkpoint != rl.CheckpointDir(solverDir) || res.SolverCheckpoint != res.Checkpoint {
		t.Errorf("result %+v, want 2 steps and the solver's checkpoint", res)
	}
	if ms := readMetrics(t, solverDir); len(ms) != 2 {
		t.Errorf("%d solver metrics lines, want 2", len(ms))
	}
	if _, err := os.Stat(filepath.Join(cfg.OutDir, rl.MetricsFile)); !os.IsNotExist(err) {
		t.Errorf("a delegator metrics log where no delegator was trained: %v", err)
	}
	arms := routeArms(cfg, 2, res.Table.BestKeyword)
	want := append(arms[:len(arms)-1], trainedName(ArmTrainedSolver, 2))
	var names []string
	for _, r := range res.Table.Rows {
		names = append(names, r.Arm)
	}
	if !slices.Equal(names, want) {
		t.Errorf("arms %q, want %q", names, want)
	}
	if len(res.Table.Checks) != 2 || !strings.HasPrefix(res.Table.Checks[0].Name, "RL-trained solver beats the pretrained solver") ||
		!strings.HasPrefix(res.Table.Checks[1].Name, "RL-trained solver's own reward on held-out calls") {
		t.Errorf("checks %+v, want the solver's two", res.Table.Checks)
	}
}
