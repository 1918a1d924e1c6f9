package train

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/scripted"
)

func readMetrics(t *testing.T, dir string) []rl.Metrics {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, rl.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := rl.ReadMetrics(f)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestRunRoute(t *testing.T) {
	cfg := tinyConfig(t)
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != cfg.RL.Steps || res.StoppedBy != "steps" {
		t.Errorf("steps %d stopped by %q, want %d by steps", res.Steps, res.StoppedBy, cfg.RL.Steps)
	}
	ms := readMetrics(t, cfg.OutDir)
	if len(ms) != cfg.RL.Steps {
		t.Fatalf("metrics lines = %d, want %d", len(ms), cfg.RL.Steps)
	}
	for _, m := range ms {
		if math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0) || math.IsNaN(m.Reward) {
			t.Errorf("step %d: loss %v reward %v", m.Step, m.Loss, m.Reward)
		}
		if m.Rollouts != cfg.RL.GroupSize*cfg.RL.ItemsPerStep {
			t.Errorf("step %d: %d rollouts, want %d", m.Step, m.Rollouts, cfg.RL.GroupSize*cfg.RL.ItemsPerStep)
		}
	}
	var names []string
	for _, r := range res.Table.Rows {
		names = append(names, r.Arm)
		if r.N != cfg.EvalItems {
			t.Errorf("%s: n = %d, want %d", r.Arm, r.N, cfg.EvalItems)
		}
	}
	want := routeArms(cfg, cfg.RL.Steps, res.Table.BestKeyword)
	if len(names) != len(want)+2 || strings.Join(names[:len(want)], "|") != strings.Join(want, "|") ||
		!strings.HasPrefix(names[len(want)], ArmRandom+" (") || names[len(want)+1] != ArmSFT+" (3 steps × 8 sequences)" {
		t.Errorf("arms %q, want %q then %s and %s", names, want, ArmRandom, ArmSFT)
	}
	// The SFT arm's checkpoint is kept, so that a run again does not
	// train it again.
	if _, _, err := nn.Load(filepath.Join(cfg.OutDir, SFTDir, "policy")); err != nil {
		t.Errorf("SFT checkpoint: %v", err)
	}
	if !strings.HasPrefix(res.Table.BestRule, ArmRule+": ") {
		t.Errorf("best fixed rule %q, want one of the rules", res.Table.BestRule)
	}
	if !strings.HasPrefix(res.Table.BestKeyword, ArmKeyword+": ") {
		t.Errorf("best keyword rule %q, want one of the keyword rules", res.Table.BestKeyword)
	}
	// Each keyword rule that decides apart from the others ran once on
	// each training item.
	keywords, _, err := bench.ReadResults(filepath.Join(cfg.OutDir, KeywordsFile))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := world.Generate(cfg.World, cfg.Seed, world.Train, cfg.RuleItems)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(scripted.Distinct(scripted.KeywordRules(), ps)); len(keywords) != n*cfg.RuleItems {
		t.Errorf("%d records of the keyword rules on training items, want %d", len(keywords), n*cfg.RuleItems)
	}
	rules, _, err := bench.ReadResults(filepath.Join(cfg.OutDir, RulesFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := 1 << cfg.World.MaxSteps; len(rules) != n*cfg.RuleItems {
		t.Errorf("%d records of the rules on training items, want %d", len(rules), n*cfg.RuleItems)
	}
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, TableFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b)
	records, _, err := bench.ReadResults(filepath.Join(cfg.OutDir, EvalFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != (len(want)+2)*cfg.EvalItems {
		t.Errorf("%d records, want %d", len(records), (len(want)+2)*cfg.EvalItems)
	}
}

// routeArms are the names of a route table's rows before the random arm,
// keyword the best keyword rule's.
func routeArms(cfg Config, steps int, keyword string) []string {
	want := []string{ArmAlone}
	for mask := range uint(1) << cfg.World.MaxSteps {
		want = append(want, ruleName(mask, cfg.World.MaxSteps))
	}
	return append(want, keyword, ArmOracle, ArmPretrained, trainedName(ArmTrained, steps))
}

func TestRunResumesAnInterruptedRun(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.RL.Steps, cfg.RL.Schedule.Total = 4, 4
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress := make(chan rl.Progress, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for pr := range progress {
			if pr.Metrics != nil && pr.Metrics.Step == 2 {
				cancel()
			}
		}
	}()
	_, err := Run(ctx, cfg, Options{TrainProgress: progress})
	close(progress)
	<-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err = %v, want context.Canceled", err)
	}
	before := readMetrics(t, cfg.OutDir)
	if len(before) < 2 || len(before) >= cfg.RL.Steps {
		t.Fatalf("interrupted after %d steps, want 2 or 3 of %d", len(before), cfg.RL.Steps)
	}

	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != cfg.RL.Steps {
		t.Errorf("resumed run: %d steps, want %d", res.Steps, cfg.RL.Steps)
	}
	ms := readMetrics(t, cfg.OutDir)
	for i, m := range ms {
		if m.Step != i+1 {
			t.Fatalf("metrics line %d is step %d: the log is not contiguous", i+1, m.Step)
		}
	}
	if len(ms) != cfg.RL.Steps {
		t.Errorf("%d metrics lines, want %d", len(ms), cfg.RL.Steps)
	}
	// The baselines ran once; only the trained arm ran again.
	records, _, err := bench.ReadResults(filepath.Join(cfg.OutDir, EvalFile))
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range records {
		count[r.Arm]++
	}
	for _, arm := range routeArms(cfg, cfg.RL.Steps, res.Table.BestKeyword) {
		if count[arm] != cfg.EvalItems {
			t.Errorf("%s: %d records, want %d", arm, count[arm], cfg.EvalItems)
		}
	}
}

func TestRunStopsAtTheTimeBudget(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.TrainTime = 1 // a nanosecond: the first step cannot finish
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.StoppedBy != "time" || res.Steps != 0 {
		t.Errorf("stopped by %q after %d steps, want time after 0", res.StoppedBy, res.Steps)
	}
	if res.Table.Row(trainedName(ArmTrained, 0)) == nil {
		t.Error("no row of the (untrained) policy")
	}
}

func TestRunMLPO(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Mode = ModeMLPO
	cfg.RL.Steps, cfg.RL.Schedule.Total = 2, 2
	cfg.PeerCount, cfg.PeerSamples = 2, 2
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range res.Table.Rows {
		names = append(names, r.Arm)
	}
	// One row alone per peer model: the default team's two.
	want := []string{ArmMajority, ArmPeerAlone + " (shipped:peer, greedy)", ArmPeerAlone + " (shipped:delegator, greedy)", ArmUntrained, ArmPretrTeam, trainedName(ArmTeam, 2), trainedName(ArmLeaderAlone, 2)}
	if len(names) != len(want)+2 || strings.Join(names[:len(want)], "|") != strings.Join(want, "|") ||
		!strings.HasPrefix(names[len(want)], ArmPeersCost+" (") || !strings.HasPrefix(names[len(want)+1], ArmOwnMajority+" (") {
		t.Errorf("arms %q, want %q then the majorities at the team's cost", names, want)
	}
	// The majorities at the team's cost take as many answers as fit in
	// what the team costs.
	team, votes, alone := res.Table.Row(ArmTeam), res.Table.Row(ArmMajority), res.Table.Row(ArmLeaderAlone)
	if got, want := res.Table.Row(ArmPeersCost).SubagentCalls, float64(budgetCount(team.Cost, votes.Cost/float64(cfg.PeerCount+1))); got != want {
		t.Errorf("peers' majority at the team's cost: %v calls per item, want %v", got, want)
	}
	if got, want := res.Table.Row(ArmOwnMajority).SubagentCalls, float64(budgetCount(team.Cost, alone.Cost)); got != want {
		t.Errorf("leader's own majority at the team's cost: %v calls per item, want %v", got, want)
	}
	// Equal generation budget: the vote samples K+1 answers, the team K
	// peers and one leader call.
	if got := res.Table.Row(ArmMajority).SubagentCalls; got != float64(cfg.PeerCount+1) {
		t.Errorf("majority: %v peer calls per item, want %d", got, cfg.PeerCount+1)
	}
	if got := res.Table.Row(ArmPretrTeam).SubagentCalls; got != float64(cfg.PeerCount) {
		t.Errorf("team: %v peer calls per item, want %d", got, cfg.PeerCount)
	}
	if _, err := os.Stat(filepath.Join(cfg.OutDir, FilterFile)); err != nil {
		t.Errorf("filter file: %v", err)
	}
	if ms := readMetrics(t, cfg.OutDir); len(ms) != 2 {
		t.Errorf("%d metrics lines, want 2", len(ms))
	}
}

func TestRunLeavesTheFinalEvaluationItsTime(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Deadline = time.Now() // already due: baselines and table, no training
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.StoppedBy != "time" || res.Steps != 0 {
		t.Errorf("stopped by %q after %d steps, want time after 0", res.StoppedBy, res.Steps)
	}
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, TimingFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "start_eval_seconds") {
		t.Errorf("timing file %s", b)
	}
	// A resumed invocation with time to spare trains, reading the timing
	// of the evaluation it does not redo.
	cfg.Deadline = time.Now().Add(time.Hour)
	res, err = Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != cfg.RL.Steps {
		t.Errorf("resumed: %d steps, want %d", res.Steps, cfg.RL.Steps)
	}
}

func TestRunRefusesAnotherRunsDirectory(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.RL.Steps, cfg.RL.Schedule.Total = 1, 1
	if _, err := Run(context.Background(), cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.Seed = 9
	_, err := Run(context.Background(), other, Options{})
	if err == nil || !strings.Contains(err.Error(), "seed") || !strings.Contains(err.Error(), cfg.OutDir) {
		t.Errorf("another seed in the same directory: err = %v, want one naming seed and the directory", err)
	}
	// Budgets and evaluation settings may change between invocations.
	same := cfg
	same.EvalItems++
	same.TrainTime = time.Hour
	if _, err := Run(context.Background(), same, Options{}); err != nil {
		t.Errorf("the same run with another budget: %v", err)
	}
}

// TestEvaluateMatchesRun evaluates a Run's checkpoints in another
// directory, as policies trained elsewhere: the delegator's, and with
// both trained the solver's too. Every row of the table, the trained
// policies' included, must be the one Run printed.
func TestEvaluateMatchesRun(t *testing.T) {
	for _, which := range []string{TrainDelegator, TrainBoth} {
		t.Run(which, func(t *testing.T) {
			cfg := tinyConfig(t)
			cfg.Train = which
			res, err := Run(context.Background(), cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			ecfg := cfg
			ecfg.OutDir = filepath.Join(t.TempDir(), "evaluate")
			trained := Result{Steps: res.Steps, StoppedBy: "steps", TrainSeconds: res.TrainSeconds, Checkpoint: filepath.Join(res.Checkpoint, "policy")}
			if which == TrainBoth {
				trained.SolverCheckpoint = filepath.Join(res.SolverCheckpoint, "policy")
			}
			got, err := Evaluate(context.Background(), ecfg, trained, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Table.Rows) != len(res.Table.Rows) {
				t.Fatalf("%d rows, want Run's %d", len(got.Table.Rows), len(res.Table.Rows))
			}
			for i, r := range got.Table.Rows {
				w := res.Table.Rows[i]
				if r.Arm != w.Arm || r.N != w.N || r.Reward != w.Reward || r.Accuracy != w.Accuracy {
					t.Errorf("row %d: %s n %d reward %v accuracy %v; Run's: %s n %d reward %v accuracy %v",
						i, r.Arm, r.N, r.Reward, r.Accuracy, w.Arm, w.N, w.Reward, w.Accuracy)
				}
			}
			if got.Table.BestRule != res.Table.BestRule {
				t.Errorf("best rule %q, Run's %q", got.Table.BestRule, res.Table.BestRule)
			}
		})
	}
}

// TestEvaluateRefusesAnotherShape evaluates a checkpoint whose shape is
// not the delegator's: the error names it.
func TestEvaluateRefusesAnotherShape(t *testing.T) {
	ecfg := tinyConfig(t)
	bad := Result{Steps: 1, StoppedBy: "steps", Checkpoint: tinyCheckpoint(t, t.TempDir(), "other", 3)}
	p, _, err := nn.Load(bad.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Config
	c.Dim, c.Hidden = 32, 64
	q, err := nn.Alloc(c.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	bad.Checkpoint = filepath.Join(t.TempDir(), "wide")
	if err := nn.Save(bad.Checkpoint, q, nil); err != nil {
		t.Fatal(err)
	}
	ecfg.OutDir = filepath.Join(t.TempDir(), "wide-eval")
	if _, err := Evaluate(context.Background(), ecfg, bad, Options{}); err == nil || !strings.Contains(err.Error(), bad.Checkpoint) {
		t.Errorf("a checkpoint of another shape: err %v, want one naming it", err)
	}
}
