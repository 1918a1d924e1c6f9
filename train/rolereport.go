package train

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// RolesFile holds the trained roles' paired tests on held-out items, as
// JSON (RoleReport). A run that trains the solver writes it.
const RolesFile = "roles.json"

// rolesVersion is the format version of RolesFile.
const rolesVersion = 1

// DefaultSolverSamples is Config.SolverSamples' default.
const DefaultSolverSamples = 16

// solverReportSalt separates the report's sampling seeds from training's.
const solverReportSalt = 0x726570

// RoleReport is each trained role's own reward on held-out items, before
// and after training, each compared pair by pair. The delegator's reward
// is the task's, read from the table. The solver's is whether its answer
// is right, on every operation of the held-out problems.
type RoleReport struct {
	Version int `json:"version"`
	// Delegator is set when the delegator was trained.
	Delegator *DelegatorTest `json:"delegator,omitempty"`
	// Solver holds one test per kind of operation, then one over all
	// calls; set when the solver was trained.
	Solver []SolverTest `json:"solver,omitempty"`
	// Samples and Temperature are the solver's sampled answers per call
	// and their temperature, the trainer's. Seed seeds them.
	Samples     int     `json:"samples"`
	Temperature float64 `json:"temperature"`
	Seed        uint64  `json:"seed"`
	// Calls are the solver's held-out calls, in problem and step order.
	Calls []SolverCall `json:"calls,omitempty"`
	// Handed holds the tests over the calls HandedArm's delegator handed
	// the solver on the held-out items, one per kind, then all;
	// HandedCalls are those calls. Set with Config.HandedCalls.
	Handed      []SolverTest `json:"handed,omitempty"`
	HandedArm   string       `json:"handed_arm,omitempty"`
	HandedCalls []SolverCall `json:"handed_calls,omitempty"`
}

// DelegatorTest compares the trained delegator with the pretrained one,
// both with the pretrained solver, on the table's items.
type DelegatorTest struct {
	Before string `json:"before"` // the arms
	After  string `json:"after"`
	N      int    `json:"n"`
	// RightBefore and RightAfter count the items right. Lost were right
	// before only, Gained after only; P is McNemar's.
	RightBefore int     `json:"right_before"`
	RightAfter  int     `json:"right_after"`
	Lost        int     `json:"lost"`
	Gained      int     `json:"gained"`
	P           float64 `json:"mcnemar_p"`
	// RewardDiff is the mean paired reward difference, with its paired
	// bootstrap 95% interval.
	RewardBefore float64        `json:"reward_before"`
	RewardAfter  float64        `json:"reward_after"`
	RewardDiff   float64        `json:"reward_diff"`
	RewardCI     bench.Interval `json:"reward_ci"`
}

// SolverAnswers is how a solver answered one call: greedy, and with
// Config.SolverSamples samples at the training temperature.
type SolverAnswers struct {
	Greedy  bool `json:"greedy"`  // the greedy answer is right
	Sampled int  `json:"sampled"` // right samples
}

// SolverCall is one held-out operation asked of the pretrained solver and
// of the trained one.
type SolverCall struct {
	Question string        `json:"question"` // as route hands it over: "47*28"
	Before   SolverAnswers `json:"before"`
	After    SolverAnswers `json:"after"`
}

// SolverTest compares the solver before and after training on a set of
// its held-out calls.
type SolverTest struct {
	Calls string `json:"calls"` // "products", "sums", "differences" or "all"
	N     int    `json:"n"`
	// Greedy answers: right before and after; Lost right before only,
	// Gained after only; P is McNemar's two-sided p.
	GreedyBefore int     `json:"greedy_before"`
	GreedyAfter  int     `json:"greedy_after"`
	Lost         int     `json:"lost"`
	Gained       int     `json:"gained"`
	P            float64 `json:"mcnemar_p"`
	// Sampled answers: the share right, before and after, and the mean
	// paired difference over the calls with its bootstrap 95% interval.
	SampledBefore float64        `json:"sampled_before"`
	SampledAfter  float64        `json:"sampled_after"`
	SampledDiff   float64        `json:"sampled_diff"`
	SampledCI     bench.Interval `json:"sampled_ci"`
}

// callKinds name the solver's calls by operation, in the report's order.
var callKinds = []struct {
	op   world.Op
	name string
}{{world.Mul, "products"}, {world.Add, "sums"}, {world.Sub, "differences"}}

// SolverTests compares calls before and after, k samples each. It gives
// one test per kind of operation present, then one over all calls.
func SolverTests(calls []SolverCall, k int) []SolverTest {
	var out []SolverTest
	for _, kind := range callKinds {
		var of []SolverCall
		for _, c := range calls {
			if op, _, _, err := world.ParseExpr(c.Question); err == nil && op == kind.op {
				of = append(of, c)
			}
		}
		if len(of) > 0 {
			out = append(out, solverTest(kind.name, of, k))
		}
	}
	return append(out, solverTest("all", calls, k))
}

// solverTest is the test of calls, named name.
func solverTest(name string, calls []SolverCall, k int) SolverTest {
	t := SolverTest{Calls: name, N: len(calls)}
	diffs := make([]float64, len(calls))
	for i, c := range calls {
		switch {
		case c.Before.Greedy && !c.After.Greedy:
			t.Lost++
		case c.After.Greedy && !c.Before.Greedy:
			t.Gained++
		}
		if c.Before.Greedy {
			t.GreedyBefore++
		}
		if c.After.Greedy {
			t.GreedyAfter++
		}
		if k > 0 {
			b, a := float64(c.Before.Sampled)/float64(k), float64(c.After.Sampled)/float64(k)
			t.SampledBefore += b
			t.SampledAfter += a
			diffs[i] = a - b
		}
	}
	t.P = bench.McNemarTest(t.Lost, t.Gained).P
	if k == 0 || len(calls) == 0 {
		return t
	}
	n := float64(len(calls))
	t.SampledBefore /= n
	t.SampledAfter /= n
	mean := func(idx []int) float64 {
		var s float64
		for _, i := range idx {
			s += diffs[i]
		}
		return s / float64(len(idx))
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	t.SampledDiff = mean(all)
	t.SampledCI, _ = bench.PairedBootstrap(len(calls), bootstrapResamples, bootstrapSeed, mean)
	return t
}

// NewDelegatorTest compares the delegator's arms before and after on t's
// shared items. It returns nil when a row is missing or the rows differ
// in items.
func NewDelegatorTest(t *Table, before, after string) *DelegatorTest {
	rs, _, ok := t.pairedRows("delegator", after, before)
	if !ok {
		return nil
	}
	x, y := rs[0], rs[1]
	m := mcnemar(x, y)
	d := &DelegatorTest{Before: y.Arm, After: x.Arm, N: len(x.Items), RightBefore: y.Correct, RightAfter: x.Correct,
		Lost: m.B, Gained: m.C, P: m.P, RewardBefore: y.Reward, RewardAfter: x.Reward}
	d.RewardDiff, d.RewardCI = rewardDiff(x, y)
	return d
}

// checks are the report's acceptance check of the solver's own reward:
// its sampled answers on all held-out calls, after against before. There
// is none when the solver was not trained or not sampled.
func (rep *RoleReport) checks() []Check {
	all := rep.allCalls()
	if all == nil || rep.Samples == 0 {
		return nil
	}
	return []Check{{
		Name: fmt.Sprintf("RL-trained solver's own reward on held-out calls beats the pretrained solver's (%d samples a call at temperature %g; paired bootstrap 95%% interval of the difference above 0)", rep.Samples, rep.Temperature),
		Pass: all.SampledCI.Lo > 0,
		Detail: fmt.Sprintf("right %.3f against %.3f of the samples: difference %+.3f, 95%% [%+.3f, %+.3f] over %d calls",
			all.SampledAfter, all.SampledBefore, all.SampledDiff, all.SampledCI.Lo, all.SampledCI.Hi, all.N),
	}}
}

// allCalls is the solver's test over all its held-out calls, the last of
// Solver; nil when the solver was not trained.
func (rep *RoleReport) allCalls() *SolverTest {
	if rep == nil || len(rep.Solver) == 0 {
		return nil
	}
	return &rep.Solver[len(rep.Solver)-1]
}

// writeMarkdown writes the report under the table's rows.
func (rep *RoleReport) writeMarkdown(b *strings.Builder) {
	b.WriteString("\nEach trained role's own reward on held-out items, before → after training, paired:\n\n")
	if d := rep.Delegator; d != nil {
		fmt.Fprintf(b, "- delegator (the task's reward; %s against %s, each with the pretrained solver): reward %.3f → %.3f, difference %+.3f, 95%% [%+.3f, %+.3f] over %d items; right %d → %d (lost %d / gained %d, McNemar p %.2g).\n",
			d.After, d.Before, d.RewardBefore, d.RewardAfter, d.RewardDiff, d.RewardCI.Lo, d.RewardCI.Hi, d.N, d.RightBefore, d.RightAfter, d.Lost, d.Gained, d.P)
	}
	if len(rep.Solver) == 0 {
		return
	}
	fmt.Fprintf(b, "- solver (its own answer right, on every operation of the held-out problems, asked of the pretrained and the RL-trained solver: greedy, and %d samples a call at temperature %g, seeded alike before and after):\n\n", rep.Samples, rep.Temperature)
	rep.writeSolverTests(b, "solver's calls", rep.Solver)
	rep.writeHanded(b)
}

// writeSolverTests writes tests as a table whose first column is named
// head.
func (rep *RoleReport) writeSolverTests(b *strings.Builder, head string, tests []SolverTest) {
	fmt.Fprintf(b, "| %s | n | greedy right: before → after (lost / gained, McNemar p) | sampled right: before → after | paired difference [95%% CI] |\n|---|---:|---|---|---|\n", head)
	for _, t := range tests {
		sampled, diff := "–", "–"
		if rep.Samples > 0 {
			sampled = fmt.Sprintf("%.3f → %.3f", t.SampledBefore, t.SampledAfter)
			diff = fmt.Sprintf("%+.3f [%+.3f, %+.3f]", t.SampledDiff, t.SampledCI.Lo, t.SampledCI.Hi)
		}
		fmt.Fprintf(b, "| %s | %d | %d → %d (%d / %d, p %.2g) | %s | %s |\n", t.Calls, t.N, t.GreedyBefore, t.GreedyAfter, t.Lost, t.Gained, t.P, sampled, diff)
	}
}

// roleReport asks every operation of the held-out problems of the
// pretrained and the trained solver, and reads the delegator's test off
// tab. It writes the report to OutDir/RolesFile.
func (r *runner) roleReport(ctx context.Context, tab *Table, steps int) (*RoleReport, error) {
	cfg := r.cfg
	rep := &RoleReport{Version: rolesVersion, Samples: cfg.SolverSamples, Temperature: cfg.RL.Temperature, Seed: cfg.Seed}
	if cfg.trainsDelegator() {
		rep.Delegator = NewDelegatorTest(tab, ArmPretrained, trainedName(ArmTrained, steps))
	}
	if cfg.trainsSolver() {
		var qs []string
		for _, p := range r.testSet {
			for _, s := range p.Steps {
				qs = append(qs, s.Expr())
			}
		}
		calls, err := r.solverCalls(ctx, qs)
		if err != nil {
			return nil, err
		}
		rep.Calls = calls
		rep.Solver = SolverTests(rep.Calls, rep.Samples)
		if cfg.HandedCalls {
			if err := r.handedReport(ctx, rep, steps); err != nil {
				return nil, err
			}
		}
	}
	b, err := json.MarshalIndent(rep, "", " ")
	if err == nil {
		err = os.WriteFile(filepath.Join(cfg.OutDir, RolesFile), append(b, '\n'), 0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("train: write role report: %w", err)
	}
	return rep, nil
}

// solverCalls asks the pretrained and the trained solver each question,
// paired.
func (r *runner) solverCalls(ctx context.Context, qs []string) ([]SolverCall, error) {
	before, err := r.askSolver(ctx, r.solver, qs)
	if err != nil {
		return nil, err
	}
	after, err := r.askSolver(ctx, r.trainedSolver, qs)
	if err != nil {
		return nil, err
	}
	calls := make([]SolverCall, len(qs))
	for i, q := range qs {
		calls[i] = SolverCall{Question: q, Before: before[i], After: after[i]}
	}
	return calls, nil
}

// askSolver asks m each question as route's solver is asked: greedy, and
// Config.SolverSamples times at the training temperature in one request,
// seeded by the question's place. At most EvalConcurrency calls run at once.
func (r *runner) askSolver(ctx context.Context, m delegate.Model, questions []string) ([]SolverAnswers, error) {
	cfg := r.cfg
	out := make([]SolverAnswers, len(questions))
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(cfg.EvalConcurrency)
	for i, q := range questions {
		eg.Go(func() error {
			op, x, y, err := world.ParseExpr(q)
			if err != nil {
				return fmt.Errorf("train: solver report: question %q: %w", q, err)
			}
			want := op.Apply(x, y)
			zero := 0.0
			req := &delegate.Request{Messages: transcript.SolverMessages(q), Temperature: &zero, MaxTokens: r.scfg.Weak.MaxTokens}
			resp, err := m.Chat(gctx, req)
			if err != nil {
				return fmt.Errorf("train: solver report: %s greedy on %q: %w", m.Name(), q, err)
			}
			out[i].Greedy = world.Correct(resp.Text(), want)
			if cfg.SolverSamples == 0 {
				return nil
			}
			temp := cfg.RL.Temperature
			seed := int64(rl.RolloutSeed(cfg.Seed^solverReportSalt, 0, i) & (1<<62 - 1))
			sreq := &delegate.Request{Messages: req.Messages, Temperature: &temp, MaxTokens: req.MaxTokens, Seed: &seed, N: cfg.SolverSamples}
			if resp, err = m.Chat(gctx, sreq); err != nil {
				return fmt.Errorf("train: solver report: %s sampled on %q: %w", m.Name(), q, err)
			}
			for _, c := range resp.Choices {
				if world.Correct(c.Message.Content, want) {
					out[i].Sampled++
				}
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}
