package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/sft"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/world"
)

// pretrainFlags are the flags of delegate pretrain.
type pretrainFlags struct {
	model    string
	steps    int
	budget   time.Duration
	out      string
	seed     uint64
	batch    int
	lr       float64
	evalN    int
	evalIn   int
	solverAt string
	init     string
	levels   []int
	peers    bool
}

// The shipped models' shapes. The solver is small and fast; the
// delegator has about three times its parameters (and DefaultPrices makes
// its tokens five times dearer).
var (
	solverShape    = nn.Config{Vocab: tokenizer.VocabSize, Dim: 64, Layers: 3, Heads: 4, Hidden: 192, Context: 80}.WithDefaults()
	delegatorShape = nn.Config{Vocab: tokenizer.VocabSize, Dim: 64, Layers: 4, Heads: 4, Hidden: 192, Context: 768}.WithDefaults()
)

// pretrainDefaults are the steps, batch and learning rate of each model
// when the flags leave them at 0.
var pretrainDefaults = map[string]struct {
	steps, batch int
	lr           float64
}{
	"solver":    {steps: 5000, batch: 32, lr: 3e-3},
	"delegator": {steps: 2400, batch: 8, lr: 3e-3},
}

func newPretrainCmd(getenv env, log *slog.Logger) *cobra.Command {
	var f pretrainFlags
	cmd := &cobra.Command{
		Use:   "pretrain [flags]",
		Short: "Train the world's solver and delegator from scratch on generated transcripts",
		Long: `Pretrain trains the two local models of package world from scratch with
supervised learning (package sft) on transcripts generated from training
problems (the loss is on the assistant's tokens only), and writes each as a
checkpoint under --out: solver/ and delegator/. Everything is seeded by
--seed; with --steps the run is deterministic, with --time the number of
steps is fitted to the machine's speed. It prints progress and the held-out
accuracy at intervals; after training it grades the solver per operation and
size, and the delegator alone, under route with the solver (its natural
delegation rate) and against always-delegate. An interrupted run resumes
from the state under --out/<model>.state, removed when the model is done.
The delegator's route grading uses the solver found under --solver (default:
--out/solver). --init starts from a checkpoint's weights (with a fresh
optimizer and schedule), for a second phase of training.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return pretrain(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "all", "which model: solver, delegator or all")
	fl.IntVar(&f.steps, "steps", 0, "optimizer steps (0: the model's default, 5000 solver, 2400 delegator)")
	fl.DurationVar(&f.budget, "time", 0, "train each model for about this long instead of a number of steps")
	fl.StringVar(&f.out, "out", "models", "directory the checkpoints are written under")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the data, the initial weights and the batch order")
	fl.IntVar(&f.batch, "batch", 0, "sequences per step (0: the model's default)")
	fl.Float64Var(&f.lr, "lr", 0, "peak learning rate (0: the model's default)")
	fl.IntVar(&f.evalN, "eval", 40, "held-out items per evaluation: questions per size (solver), problems (delegator)")
	fl.IntVar(&f.evalIn, "eval-every", 500, "evaluate every so many steps (0: only at the end)")
	fl.StringVar(&f.solverAt, "solver", "", "solver checkpoint for the delegator's route grading (default OUT/solver)")
	fl.StringVar(&f.init, "init", "", "start from this checkpoint's weights instead of random ones (a second phase; one --model only)")
	fl.IntSliceVar(&f.levels, "levels", nil, "delegator: train on 40000 problems of these world levels, split evenly, and grade on each (world.Levels, 1 easiest; default: levels 1 to 3 weighted to 3, graded on the default world)")
	fl.BoolVar(&f.peers, "with-peers", false, "delegator: also train on lead's terse peer answers, so that it can be its own frozen peers under MLPO")
	_ = getenv // pretrain reads no environment
	_ = log
	return cmd
}

func pretrain(ctx context.Context, out io.Writer, f pretrainFlags) error {
	var names []string
	switch f.model {
	case "all":
		names = []string{"solver", "delegator"}
	case "solver", "delegator":
		names = []string{f.model}
	default:
		return fmt.Errorf("pretrain: --model %q, want solver, delegator or all", f.model)
	}
	if f.steps < 0 || f.budget < 0 || f.batch < 0 || f.lr < 0 || f.evalN < 1 || f.evalIn < 0 {
		return errors.New("pretrain: --steps, --time, --batch, --lr and --eval-every must not be negative, --eval must be positive")
	}
	seen := map[int]bool{}
	for _, l := range f.levels {
		if _, ok := world.Levels()[l]; !ok {
			return fmt.Errorf("pretrain: --levels: %d is not a world level (1 to %d)", l, len(world.Levels()))
		}
		if seen[l] {
			return fmt.Errorf("pretrain: --levels: level %d given twice", l)
		}
		seen[l] = true
	}
	if f.init != "" && len(names) != 1 {
		return errors.New("pretrain: --init needs one --model, solver or delegator")
	}
	if f.solverAt == "" {
		f.solverAt = filepath.Join(f.out, "solver")
	}
	for _, name := range names {
		if err := pretrainOne(ctx, out, name, f); err != nil {
			return err
		}
	}
	return nil
}

func pretrainOne(ctx context.Context, out io.Writer, name string, f pretrainFlags) error {
	d := pretrainDefaults[name]
	cfg := sft.Config{Steps: d.steps, Batch: d.batch, MaxLR: d.lr, Seed: f.seed, EvalEvery: f.evalIn, SaveEvery: 100,
		StateDir: filepath.Join(f.out, name+".state")}
	if f.steps > 0 {
		cfg.Steps = f.steps
	}
	if f.budget > 0 {
		cfg.Steps, cfg.Duration = 0, f.budget
		if f.steps > 0 {
			return errors.New("pretrain: give --steps or --time, not both")
		}
	}
	if f.batch > 0 {
		cfg.Batch = f.batch
	}
	if f.lr > 0 {
		cfg.MaxLR = f.lr
	}
	shape := solverShape
	var examples []sft.Example
	var eval sft.Eval
	var final func(context.Context, *nn.Params) error
	switch name {
	case "solver":
		problems, err := world.Generate(world.DefaultConfig(), f.seed, world.Train, 4000)
		if err != nil {
			return fmt.Errorf("pretrain solver: %w", err)
		}
		for _, t := range world.SolverCorpus(problems, f.seed, 60_000) {
			examples = append(examples, sft.FromMessages(t.Messages, t.Tools))
		}
		eval = func(ctx context.Context, p *nn.Params) (float64, string, error) {
			return evalSolver(ctx, nil, p, max(f.evalN/4, 4), f.seed)
		}
		final = func(ctx context.Context, p *nn.Params) error {
			_, _, err := evalSolver(ctx, out, p, f.evalN, f.seed+1)
			return err
		}
	case "delegator":
		shape = delegatorShape
		var err error
		if examples, err = delegatorCorpus(f.seed, f.levels, f.peers); err != nil {
			return fmt.Errorf("pretrain delegator: %w", err)
		}
		tests := map[int][]*world.Problem{}
		var small []*world.Problem
		levels := f.levels
		if len(levels) == 0 {
			levels = []int{3} // the default world
		}
		for _, l := range levels {
			ps, err := world.Generate(world.Levels()[l], f.seed+1000, world.Test, f.evalN)
			if err != nil {
				return fmt.Errorf("pretrain delegator: %w", err)
			}
			tests[l] = ps
			small = append(small, ps[:max(len(ps)/4, 4)]...)
		}
		eval = func(ctx context.Context, p *nn.Params) (float64, string, error) {
			return evalDelegator(ctx, nil, p, nil, small)
		}
		final = func(ctx context.Context, p *nn.Params) error {
			sp, _, err := nn.Load(f.solverAt)
			if err != nil {
				fmt.Fprintf(out, "delegator: no solver at %s (%v); route not graded\n", f.solverAt, err)
				sp = nil
			}
			for _, l := range levels {
				fmt.Fprintf(out, "delegator graded on level %d:\n", l)
				if _, _, err := evalDelegator(ctx, out, p, sp, tests[l]); err != nil {
					return err
				}
			}
			return nil
		}
	}
	var p *nn.Params
	if f.init != "" {
		start, _, err := nn.Load(f.init)
		if err != nil {
			return fmt.Errorf("pretrain %s: --init: %w", name, err)
		}
		if start.Config != shape {
			return fmt.Errorf("pretrain %s: --init %s holds a model of another shape (%+v, want %+v)", name, f.init, start.Config, shape)
		}
		p = start
		fmt.Fprintf(out, "%s: starting from the weights of %s\n", name, f.init)
	} else {
		var err error
		if p, err = nn.Alloc(shape); err != nil {
			return fmt.Errorf("pretrain %s: %w", name, err)
		}
		p.Init(f.seed)
	}
	var tokens, weighted int
	for _, e := range examples {
		tokens += len(e.Tokens)
		for _, w := range e.Weights {
			if w != 0 {
				weighted++
			}
		}
	}
	fmt.Fprintf(out, "%s: %d parameters (dim %d, %d layers, context %d), %d transcripts, %d tokens, %d trained\n",
		name, len(p.Data), shape.Dim, shape.Layers, shape.Context, len(examples), tokens, weighted)
	progress := func(pr sft.Progress) {
		if pr.Evaluated || pr.Step%50 == 0 || pr.Step == pr.Steps {
			fmt.Fprintf(out, "%s step %d/%d loss %.4f lr %.2e %s", name, pr.Step, pr.Steps, pr.Loss, pr.LR, pr.Elapsed.Round(time.Second))
			if pr.Evaluated {
				fmt.Fprintf(out, " held-out %.3f (%s)", pr.Score, pr.Detail)
			}
			fmt.Fprintln(out)
		}
	}
	res, err := sft.Train(ctx, p, examples, cfg, eval, progress)
	if err != nil {
		return fmt.Errorf("pretrain %s: %w", name, err)
	}
	if res.Resumed > 0 {
		fmt.Fprintf(out, "%s: resumed at step %d\n", name, res.Resumed)
	}
	meta := map[string]string{
		"model": name, "seed": strconv.FormatUint(f.seed, 10), "steps": strconv.Itoa(res.Steps), "init": f.init,
		"batch": strconv.Itoa(cfg.Batch), "loss": strconv.FormatFloat(res.Loss, 'f', 4, 64),
	}
	dir := filepath.Join(f.out, name)
	if err := nn.Save(dir, p, meta); err != nil {
		return fmt.Errorf("pretrain %s: %w", name, err)
	}
	fmt.Fprintf(out, "%s: saved %s after %d steps (%s this run), loss %.4f\n", name, dir, res.Steps, res.Trained.Round(time.Second), res.Loss)
	if err := os.RemoveAll(cfg.StateDir); err != nil {
		return fmt.Errorf("pretrain %s: remove state: %w", name, err)
	}
	return final(ctx, p)
}

// delegatorCorpus is the delegator's pretraining data: the transcripts of
// BuildCorpus over training problems of levels 1 to 3 (one product, two
// steps, the default world), so that the short ones teach the digit
// formats and the long ones the protocols; with levels set, over 40000
// problems of those levels, split evenly (a later phase that specialises
// the delegator in the world delegate train runs). With peers, a quarter
// of the problems also get a peer's terse right answer under lead's peer
// prompt. Transcripts longer than the delegator's context (a few leader
// transcripts with three long peer answers) are left out.
func delegatorCorpus(seed uint64, levels []int, peers bool) ([]sft.Example, error) {
	lv := world.Levels()
	var problems []*world.Problem
	sets := []struct{ level, n int }{{1, 2000}, {2, 2000}, {3, 6000}}
	if len(levels) > 0 {
		sets = nil
		for _, l := range levels {
			sets = append(sets, struct{ level, n int }{l, 40000 / len(levels)})
		}
	}
	for _, c := range sets {
		ps, err := world.Generate(lv[c.level], seed+uint64(c.level), world.Train, c.n)
		if err != nil {
			return nil, err
		}
		problems = append(problems, ps...)
	}
	// Route first: it is the protocol delegate train runs; the others get
	// a smaller share than DefaultMix gives them.
	mix := world.Mix{Never: 0.3, Always: 0.3, Random: 0.4, DelegateProb: 0.5, Single: 0.2, Decompose: 0.1, Lead: 0.1, Peers: 3}
	corpus, err := world.BuildCorpus(problems, mix, seed)
	if err != nil {
		return nil, err
	}
	transcripts := corpus.Delegator
	if peers {
		// Right answers only (corpus.Peers holds the lead transcripts'
		// deliberately wrong ones too): the model's own slips in the terse
		// format, products written without a scratchpad, are the errors.
		for i, p := range problems {
			if i%4 == 0 {
				transcripts = append(transcripts, world.PeerTranscript(p))
			}
		}
	}
	var ex []sft.Example
	for _, t := range transcripts {
		if e := sft.FromMessages(t.Messages, t.Tools); len(e.Tokens) <= delegatorShape.Context+1 {
			ex = append(ex, e)
		}
	}
	return ex, nil
}

// evalSolver grades a solver's parameters greedily, perSize questions per
// operation and size; with out set it prints the table.
func evalSolver(ctx context.Context, out io.Writer, p *nn.Params, perSize int, seed uint64) (float64, string, error) {
	m, err := local.New(p, local.Config{Name: "solver", MaxBatch: 32})
	if err != nil {
		return 0, "", err
	}
	defer m.Close()
	scores, err := world.GradeSolver(ctx, m, perSize, 32, seed)
	if err != nil {
		return 0, "", err
	}
	var right, n int
	var parts []string
	for _, s := range scores {
		if s.Covered {
			right += s.Right
			n += s.N
		}
		parts = append(parts, fmt.Sprintf("%s %d/%d", s.Size, s.Right, s.N))
		if out != nil {
			fmt.Fprintf(out, "solver held-out %-6s covered=%-5v %3d/%d\n", s.Size, s.Covered, s.Right, s.N)
		}
	}
	acc := float64(right) / float64(n)
	if out != nil {
		fmt.Fprintf(out, "solver held-out accuracy inside its coverage: %.3f (%d/%d)\n", acc, right, n)
	}
	return acc, strings.Join(parts, ", "), nil
}

// evalDelegator grades a delegator's parameters greedily on problems:
// alone (single); with a solver's parameters also under route and against
// always-delegate. With out set it prints the figures.
func evalDelegator(ctx context.Context, out io.Writer, p, solver *nn.Params, problems []*world.Problem) (float64, string, error) {
	d, err := local.New(p, local.Config{Name: "delegator", MaxBatch: 32})
	if err != nil {
		return 0, "", err
	}
	defer d.Close()
	alone, err := world.GradeDelegator(ctx, strategy.NameSingle, d, nil, problems, 32)
	if err != nil {
		return 0, "", err
	}
	detail := fmt.Sprintf("alone %d/%d, %.0f tokens", alone.Right, alone.N, float64(alone.DelegatorTokens)/float64(alone.N))
	if out != nil {
		fmt.Fprintf(out, "delegator held-out alone (single): %d/%d = %.3f, %.0f generated tokens per problem\n",
			alone.Right, alone.N, alone.Accuracy(), float64(alone.DelegatorTokens)/float64(alone.N))
	}
	if solver == nil {
		return alone.Accuracy(), detail, nil
	}
	s, err := local.New(solver, local.Config{Name: "solver", MaxBatch: 32})
	if err != nil {
		return 0, "", err
	}
	defer s.Close()
	for _, g := range []struct {
		name string
		run  func() (world.DelegatorScore, error)
	}{
		{"route (natural)", func() (world.DelegatorScore, error) {
			return world.GradeDelegator(ctx, strategy.NameRoute, d, s, problems, 32)
		}},
		{"always-delegate", func() (world.DelegatorScore, error) { return world.GradeAlways(ctx, s, problems, 32) }},
	} {
		sc, err := g.run()
		if err != nil {
			return 0, "", err
		}
		if out != nil {
			fmt.Fprintf(out, "delegator held-out %s: %d/%d = %.3f, delegation rate %.2f, %.0f delegator tokens per problem\n",
				g.name, sc.Right, sc.N, sc.Accuracy(), sc.DelegationRate(), float64(sc.DelegatorTokens)/float64(sc.N))
		}
	}
	return alone.Accuracy(), detail, nil
}
