package pretrain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/scripted"
	"github.com/delegatelab/delegate/world/transcript"
)

// Options are the settings of one pretraining run, the recipe of the
// shipped models. A zero Steps, Batch or LR takes the model's default.
type Options struct {
	Model     string        // solver, delegator or all
	Steps     int           // optimizer steps (0: the model's default)
	Time      time.Duration // train about this long instead of Steps
	Out       string        // directory the checkpoints are written under
	Seed      uint64        // seed of the data, the initial weights and the batch order
	Batch     int           // sequences per step (0: the model's default)
	LR        float64       // peak learning rate (0: the model's default)
	Eval      int           // held-out items per evaluation
	EvalEvery int           // evaluate every so many steps (0: only at the end)
	Solver    string        // solver checkpoint for the delegator's route grading (default Out/solver)
	Init      string        // start from this checkpoint's weights (one model only)
	Levels    []int         // delegator: train on these world levels
	WithPeers bool          // delegator: also train on lead's terse peer answers
	RouteMix  []float64     // delegator: weights of the route policies never, always, random (nil: DelegatorCorpus's)
	Force     bool          // replace a finished checkpoint already under Out
	// Coverage is the solver's: it trains and is graded inside it (zero:
	// the default world's; world.DigitsCoverage for the digits world).
	Coverage world.Coverage
	// GradeSplit is the split the delegator is graded on, during training and after.
	// It is "validation", also when empty, or "test" for a published table
	// only.
	GradeSplit string
	// Progress, when set, receives every step's report of the model being trained.
	// It runs on the training goroutine and must return quickly; Run then
	// prints no step lines of its own. When nil, Run prints a line every 50
	// steps on out.
	Progress func(model string, pr Progress)
	// Traces, when set, receives the trace of every grading run. Those are
	// the delegator's strategy runs and the solver's questions, the latter
	// as one-call runs named GradeSolverRun. Evaluations during training
	// are included.
	// It is called from many goroutines at once and must not block.
	Traces func(*delegate.Trace)
}

// The shipped models' shapes. The solver is small and fast; the
// delegator has about three times its parameters (and DefaultPrices makes
// its tokens five times dearer).
var (
	SolverShape    = nn.Config{Vocab: tokenizer.VocabSize, Dim: 64, Layers: 3, Heads: 4, Hidden: 192, Context: 80}.WithDefaults()
	DelegatorShape = nn.Config{Vocab: tokenizer.VocabSize, Dim: 64, Layers: 4, Heads: 4, Hidden: 192, Context: 768}.WithDefaults()
)

// shapes are the models' shapes by name.
var shapes = map[string]nn.Config{"solver": SolverShape, "delegator": DelegatorShape}

// defaults are the steps, batch and learning rate of each model
// when the flags leave them at 0.
var defaults = map[string]struct {
	steps, batch int
	lr           float64
}{
	"solver":    {steps: 5000, batch: 32, lr: 3e-3},
	"delegator": {steps: 2400, batch: 8, lr: 3e-3},
}

// Run pretrains the models opts names, one after the other, writing each
// under opts.Out and grading it as Options says. It checks every option,
// and loads Init, before it builds a corpus.
func Run(ctx context.Context, out io.Writer, f Options) error {
	names, err := f.check()
	if err != nil {
		return err
	}
	if f.Solver == "" {
		f.Solver = filepath.Join(f.Out, "solver")
	}
	jobs := make([]job, len(names))
	for i, name := range names {
		if jobs[i], err = planOne(name, f); err != nil {
			return err
		}
	}
	for _, j := range jobs {
		if err := runOne(ctx, out, j, f); err != nil {
			return err
		}
	}
	return nil
}

// check checks f's options, and that --solver loads when given for the
// delegator alone. It returns the models f names, in the order they train.
func (f Options) check() ([]string, error) {
	var names []string
	switch f.Model {
	case "all":
		names = []string{"solver", "delegator"}
	case "solver", "delegator":
		names = []string{f.Model}
	default:
		return nil, fmt.Errorf("pretrain: --model %q, want solver, delegator or all", f.Model)
	}
	if f.Steps < 0 || f.Time < 0 || f.Batch < 0 || f.LR < 0 || f.Eval < 1 || f.EvalEvery < 0 {
		return nil, errors.New("pretrain: --steps, --time, --batch, --lr and --eval-every must not be negative, --eval must be positive")
	}
	if f.Model == "solver" {
		// The solver's corpus is its own; these shape the delegator's.
		switch {
		case f.RouteMix != nil:
			return nil, errors.New("pretrain: --route-mix sets the delegator's corpus; --model solver has none")
		case len(f.Levels) > 0:
			return nil, errors.New("pretrain: --levels sets the delegator's corpus; --model solver has none")
		case f.WithPeers:
			return nil, errors.New("pretrain: --with-peers sets the delegator's corpus; --model solver has none")
		}
	}
	if f.RouteMix != nil {
		if len(f.RouteMix) != 3 {
			return nil, fmt.Errorf("pretrain: --route-mix has %d weights, want 3 (never, always, random)", len(f.RouteMix))
		}
		if err := delegatorMix(f.RouteMix).Validate(); err != nil {
			return nil, fmt.Errorf("pretrain: --route-mix: %w", err)
		}
	}
	if err := f.Coverage.Validate(); err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	if f.Coverage != (world.Coverage{}) && f.Model != "solver" {
		return nil, errors.New("pretrain: --world sets the solver's coverage; give --model solver")
	}
	seen := map[int]bool{}
	for _, l := range f.Levels {
		if _, ok := world.Levels()[l]; !ok {
			return nil, fmt.Errorf("pretrain: --levels: %d is not a world level (1 to %d)", l, len(world.Levels()))
		}
		if seen[l] {
			return nil, fmt.Errorf("pretrain: --levels: level %d given twice", l)
		}
		seen[l] = true
	}
	if _, err := f.gradeSplit(); err != nil {
		return nil, err
	}
	if f.Init != "" && len(names) != 1 {
		return nil, errors.New("pretrain: --init needs one --model, solver or delegator")
	}
	if f.Steps > 0 && f.Time > 0 {
		return nil, errors.New("pretrain: give --steps or --time, not both")
	}
	if f.Solver != "" && f.Model == "delegator" {
		// The default, Out/solver, may not exist yet, nor one that
		// --model all trains; a path given for the delegator alone must.
		if _, _, err := nn.Load(f.Solver); err != nil {
			return nil, fmt.Errorf("pretrain: --solver %s: %w", f.Solver, err)
		}
	}
	return names, nil
}

// job is one model's pretraining as Run plans it: its training config,
// the directory its checkpoint goes to, and Init's weights when given.
type job struct {
	name string
	cfg  Config
	dir  string
	init *nn.Params
}

// planOne checks model name's settings and loads its starting weights
// from f.Init, if given. It builds no corpus.
func planOne(name string, f Options) (job, error) {
	cfg, dir, err := oneConfig(name, f)
	if err != nil {
		return job{}, err
	}
	j := job{name: name, cfg: cfg, dir: dir}
	if f.Init == "" {
		return j, nil
	}
	if j.init, _, err = nn.Load(f.Init); err != nil {
		return job{}, fmt.Errorf("pretrain %s: --init %s: %w", name, f.Init, err)
	}
	if shape := shapes[name]; j.init.Config != shape {
		return job{}, fmt.Errorf("pretrain %s: --init %s holds a model of another shape (%+v, want %+v)", name, f.Init, j.init.Config, shape)
	}
	return j, nil
}

func runOne(ctx context.Context, out io.Writer, j job, f Options) error {
	name, cfg, dir := j.name, j.cfg, j.dir
	task, err := taskOf(out, name, f)
	if err != nil {
		return err
	}
	p, err := startParams(out, name, f, j.init)
	if err != nil {
		return err
	}
	describe(out, name, p, task.examples)
	res, err := Train(ctx, p, task.examples, cfg, task.eval, progressOf(out, name, f))
	if err != nil {
		return fmt.Errorf("pretrain %s: %w", name, err)
	}
	if res.Resumed > 0 {
		fmt.Fprintf(out, "%s: resumed at step %d\n", name, res.Resumed)
	}
	meta := map[string]string{
		"model": name, "seed": strconv.FormatUint(f.Seed, 10), "steps": strconv.Itoa(res.Steps), "init": f.Init,
		"batch": strconv.Itoa(cfg.Batch), "loss": strconv.FormatFloat(res.Loss, 'f', 4, 64),
	}
	if err := nn.Save(dir, p, meta); err != nil {
		return fmt.Errorf("pretrain %s: %w", name, err)
	}
	fmt.Fprintf(out, "%s: saved %s after %d steps (%s this run), loss %.4f\n", name, dir, res.Steps, res.Trained.Round(time.Second), res.Loss)
	if err := os.RemoveAll(cfg.StateDir); err != nil {
		return fmt.Errorf("pretrain %s: remove state: %w", name, err)
	}
	return task.final(ctx, p)
}

// oneConfig is the training config of model name under f's overrides,
// and the directory its checkpoint goes to.
func oneConfig(name string, f Options) (Config, string, error) {
	d := defaults[name]
	cfg := DefaultConfig()
	cfg.Steps, cfg.Batch, cfg.MaxLR, cfg.Seed, cfg.EvalEvery = d.steps, d.batch, d.lr, f.Seed, f.EvalEvery
	cfg.StateDir = filepath.Join(f.Out, name+".state")
	// A finished checkpoint is never replaced by accident: the shipped
	// models are one --out away. An interrupted run, whose state directory
	// is present, resumes as always.
	dir := filepath.Join(f.Out, name)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil && !f.Force {
		if _, err := os.Stat(cfg.StateDir); err != nil {
			return cfg, dir, fmt.Errorf("pretrain %s: %s already holds a trained checkpoint; give another --out, or --force to replace it", name, dir)
		}
	}
	if f.Steps > 0 {
		cfg.Steps = f.Steps
	}
	if f.Time > 0 {
		cfg.Steps, cfg.Duration = 0, f.Time
	}
	if f.Batch > 0 {
		cfg.Batch = f.Batch
	}
	if f.LR > 0 {
		cfg.MaxLR = f.LR
	}
	cfg.MinLR = cfg.MaxLR / 10 // the schedule ends at a tenth of its peak
	return cfg, dir, nil
}

// task is what one model is pretrained on and graded by.
// It holds the corpus, the held-out score during training and the final
// grading.
type task struct {
	examples []Example
	eval     Eval
	final    func(context.Context, *nn.Params) error
}

// taskOf is the task of model name ("solver" or "delegator").
func taskOf(out io.Writer, name string, f Options) (task, error) {
	if name == "delegator" {
		return delegatorTask(out, f)
	}
	return solverTask(out, f)
}

// solverTask trains the solver on its corpus of level-3 problems.
func solverTask(out io.Writer, f Options) (task, error) {
	var t task
	problems, err := world.Generate(world.Levels()[3], f.Seed, world.Train, 4000)
	if err != nil {
		return t, fmt.Errorf("pretrain solver: %w", err)
	}
	for _, tr := range transcript.SolverCorpus(problems, f.Coverage, f.Seed, 60_000) {
		t.examples = append(t.examples, FromMessages(tr.Messages, tr.Tools))
	}
	t.eval = func(ctx context.Context, p *nn.Params) (float64, string, error) {
		return evalSolver(ctx, nil, p, f.Coverage, max(f.Eval/4, 4), f.Seed, f.Traces)
	}
	t.final = func(ctx context.Context, p *nn.Params) error {
		_, _, err := evalSolver(ctx, out, p, f.Coverage, f.Eval, f.Seed+1, f.Traces)
		return err
	}
	return t, nil
}

// delegatorTask trains the delegator on DelegatorCorpus and grades it on
// f's levels.
func delegatorTask(out io.Writer, f Options) (task, error) {
	var t task
	var err error
	if t.examples, err = DelegatorCorpus(f.Seed, f.Levels, f.WithPeers, f.RouteMix); err != nil {
		return t, fmt.Errorf("pretrain delegator: %w", err)
	}
	levels := f.Levels
	if len(levels) == 0 {
		levels = []int{3} // two parts, the hardest level of the curriculum
	}
	graded, small, err := gradeSets(f, levels)
	if err != nil {
		return t, fmt.Errorf("pretrain delegator: %w", err)
	}
	t.eval = func(ctx context.Context, p *nn.Params) (float64, string, error) {
		return evalDelegator(ctx, nil, p, nil, small, f.Traces)
	}
	t.final = func(ctx context.Context, p *nn.Params) error {
		sp, _, err := nn.Load(f.Solver)
		if err != nil {
			fmt.Fprintf(out, "delegator: no solver at %s (%v); route not graded\n", f.Solver, err)
			sp = nil
		}
		for _, l := range levels {
			fmt.Fprintf(out, "delegator graded on level %d (%s split):\n", l, graded[l][0].Split)
			if _, _, err := evalDelegator(ctx, out, p, sp, graded[l], f.Traces); err != nil {
				return err
			}
		}
		return nil
	}
	return t, nil
}

// startParams are the weights training starts from: init, Init's as
// planOne loaded them, or fresh ones of the model's shape seeded by f.Seed.
func startParams(out io.Writer, name string, f Options, init *nn.Params) (*nn.Params, error) {
	if init != nil {
		fmt.Fprintf(out, "%s: starting from the weights of %s\n", name, f.Init)
		return init, nil
	}
	p, err := nn.Alloc(shapes[name])
	if err != nil {
		return nil, fmt.Errorf("pretrain %s: %w", name, err)
	}
	p.Init(f.Seed)
	return p, nil
}

// describe writes the model's size and its corpus's.
func describe(out io.Writer, name string, p *nn.Params, examples []Example) {
	var tokens, weighted int
	for _, e := range examples {
		tokens += len(e.Tokens)
		for _, w := range e.Weights {
			if w != 0 {
				weighted++
			}
		}
	}
	shape := p.Config
	fmt.Fprintf(out, "%s: %d parameters (dim %d, %d layers, context %d), %d transcripts, %d tokens, %d trained\n",
		name, len(p.Data), shape.Dim, shape.Layers, shape.Context, len(examples), tokens, weighted)
}

// progressOf reports training progress to f.Progress, or every 50 steps
// and every evaluation to out.
func progressOf(out io.Writer, name string, f Options) func(Progress) {
	return func(pr Progress) {
		if f.Progress != nil {
			f.Progress(name, pr)
			return
		}
		if pr.Evaluated || pr.Step%50 == 0 || pr.Step == pr.Steps {
			fmt.Fprintf(out, "%s step %d/%d loss %.4f lr %.2e %s", name, pr.Step, pr.Steps, pr.Loss, pr.LR, pr.Elapsed.Round(time.Second))
			if pr.Evaluated {
				fmt.Fprintf(out, " held-out %.3f (%s)", pr.Score, pr.Detail)
			}
			fmt.Fprintln(out)
		}
	}
}

// gradeSplit returns the split f.GradeSplit names, Validation when it is empty.
// It returns Test only when asked, since Test is read once, for a
// published table.
func (f Options) gradeSplit() (world.Split, error) {
	switch f.GradeSplit {
	case "", "validation":
		return world.Validation, nil
	case "test":
		return world.Test, nil
	}
	return 0, fmt.Errorf("pretrain: --grade-split %q, want validation or test (test for a published table only)", f.GradeSplit)
}

// gradeSets returns the delegator's grading problems: f.Eval of each level.
// They come from f's grade split. The first quarter of each, at least 4,
// serves the evaluations during training.
func gradeSets(f Options, levels []int) (map[int][]*world.Problem, []*world.Problem, error) {
	split, err := f.gradeSplit()
	if err != nil {
		return nil, nil, err
	}
	sets := map[int][]*world.Problem{}
	var small []*world.Problem
	for _, l := range levels {
		ps, err := world.Generate(world.Levels()[l], f.Seed+1000, split, f.Eval)
		if err != nil {
			return nil, nil, fmt.Errorf("grading problems of level %d: %w", l, err)
		}
		sets[l] = ps
		small = append(small, ps[:min(max(len(ps)/4, 4), len(ps))]...)
	}
	return sets, small, nil
}

// DelegatorCorpus is the delegator's pretraining data, from BuildCorpus's transcripts.
// By default the problems are training problems of levels 1 to 3: one
// product, two steps, and the default world. The short ones teach the digit
// formats and the long ones the protocols. With levels set, they are 40000
// problems of those levels, split evenly: a later phase that specialises
// the delegator in the world delegate train runs. With peers, a quarter of
// the problems also get a peer's terse right answer under lead's peer
// prompt. routeMix, when set, holds the weights of the route policies
// never, always and random instead of 0.3, 0.3 and 0.4; random delegates
// each step with probability 1/2. Transcripts longer than the delegator's
// context are left out, such as a few leader transcripts with three long
// peer answers.
func DelegatorCorpus(seed uint64, levels []int, peers bool, routeMix []float64) ([]Example, error) {
	if routeMix != nil && len(routeMix) != 3 {
		return nil, fmt.Errorf("route mix has %d weights, want 3 (never, always, random)", len(routeMix))
	}
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
	corpus, err := transcript.BuildCorpus(problems, delegatorMix(routeMix), seed)
	if err != nil {
		return nil, err
	}
	transcripts := corpus.Delegator
	if peers {
		// Right answers only; corpus.Peers holds the lead transcripts'
		// deliberately wrong ones too. The errors are the model's own slips in
		// the terse format, products written without a scratchpad.
		for i, p := range problems {
			if i%4 == 0 {
				transcripts = append(transcripts, transcript.PeerTranscript(p))
			}
		}
	}
	var ex []Example
	for _, t := range transcripts {
		if e := FromMessages(t.Messages, t.Tools); len(e.Tokens) <= DelegatorShape.Context+1 {
			ex = append(ex, e)
		}
	}
	return ex, nil
}

// delegatorMix is DelegatorCorpus's mix. Route comes first: it is the
// protocol delegate train runs; the others get a smaller share than
// DefaultMix gives them. routeMix, when set, holds the route policies'
// three weights.
func delegatorMix(routeMix []float64) transcript.Mix {
	mix := transcript.Mix{Never: 0.3, Always: 0.3, Random: 0.4, DelegateProb: 0.5, Single: 0.2, Decompose: 0.1, Lead: 0.1, Peers: 3}
	if routeMix != nil {
		mix.Never, mix.Always, mix.Random = routeMix[0], routeMix[1], routeMix[2]
	}
	return mix
}

// evalSolver grades a solver's parameters greedily, perSize questions per
// operation and size; with out set it prints the table. traces is
// GradeSolverCoverage's.
func evalSolver(ctx context.Context, out io.Writer, p *nn.Params, cov world.Coverage, perSize int, seed uint64, traces func(*delegate.Trace)) (float64, string, error) {
	m, err := local.New(p, local.Config{Name: "solver", MaxBatch: 32})
	if err != nil {
		return 0, "", err
	}
	defer m.Close()
	scores, err := GradeSolverCoverage(ctx, m, cov, perSize, 32, seed, traces)
	if err != nil {
		return 0, "", err
	}
	var right, n, outRight, outN int
	var parts []string
	for _, s := range scores {
		if s.Covered {
			right += s.Right
			n += s.N
		} else {
			outRight += s.Right
			outN += s.N
		}
		name := s.Size.String()
		if !s.Covered && s.Size.Covered() {
			name += " outside" // a class the coverage narrows
		}
		parts = append(parts, fmt.Sprintf("%s %d/%d", name, s.Right, s.N))
		if out != nil {
			fmt.Fprintf(out, "solver held-out %-6s covered=%-5v %3d/%d\n", name, s.Covered, s.Right, s.N)
		}
	}
	acc := float64(right) / float64(n)
	if out != nil {
		fmt.Fprintf(out, "solver held-out accuracy inside its coverage: %.3f (%d/%d)\n", acc, right, n)
		fmt.Fprintf(out, "solver held-out accuracy outside it: %.3f (%d/%d)\n", float64(outRight)/float64(max(outN, 1)), outRight, outN)
	}
	return acc, strings.Join(parts, ", "), nil
}

// evalDelegator grades a delegator's parameters greedily on problems:
// alone (single); with a solver's parameters also under route and against
// always-delegate. With out set it prints the figures. traces is
// GradeDelegator's.
func evalDelegator(ctx context.Context, out io.Writer, p, solver *nn.Params, problems []*world.Problem, traces func(*delegate.Trace)) (float64, string, error) {
	d, err := local.New(p, local.Config{Name: "delegator", MaxBatch: 32})
	if err != nil {
		return 0, "", err
	}
	defer d.Close()
	alone, err := GradeDelegator(ctx, strategy.NameSingle, d, nil, problems, 32, traces)
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
		run  func() (DelegatorScore, error)
	}{
		{"route (natural)", func() (DelegatorScore, error) {
			return GradeDelegator(ctx, strategy.NameRoute, d, s, problems, 32, traces)
		}},
		{"always-delegate", func() (DelegatorScore, error) {
			return GradeDelegator(ctx, strategy.NameRoute, scripted.New("always-delegate", problems, scripted.FromPolicy(world.Always)), s, problems, 32, traces)
		}},
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
