package pretrain

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// GradeSolverRun is the strategy name of the trace of each of
// GradeSolverCoverage's calls.
const GradeSolverRun = "grade-solver"

// SizeScore is a solver's exact-match score on one size class.
type SizeScore struct {
	Size    world.SolverSize
	Covered bool
	Right   int
	N       int
	Failed  int // calls that returned an error (counted wrong)
}

// GradeSolver returns the exact-match score of model on each solver size class.
// It asks perSize questions of every class of world.SolverSizes, covered
// and not, under the solver's prompts at temperature 0. Scores come in the
// order of world.SolverSizes(true), then world.SolverSizes(false).
// Questions are deterministic from seed. At most concurrency calls run at
// once. A failed call counts as wrong and is counted in Failed; only ctx
// ending stops the grading, with ctx's error. It grades the default
// world's solver: GradeSolverCoverage with the zero world.Coverage and
// no traces.
func GradeSolver(ctx context.Context, model delegate.Model, perSize, concurrency int, seed uint64) ([]SizeScore, error) {
	return GradeSolverCoverage(ctx, model, world.Coverage{}, perSize, concurrency, seed, nil)
}

// GradeSolverCoverage is GradeSolver for a solver of coverage cov.
// A covered class that cov narrows is graded on questions inside cov, then
// again, after the classes outside, on questions outside it. Under the zero
// Coverage it asks GradeSolver's questions. Each call is recorded as the
// trace of a one-call run, strategy GradeSolverRun; traces, when set,
// receives it as the call returns, from many goroutines at once, and must
// not block.
func GradeSolverCoverage(ctx context.Context, model delegate.Model, cov world.Coverage, perSize, concurrency int, seed uint64, traces func(*delegate.Trace)) ([]SizeScore, error) {
	if perSize < 1 || concurrency < 1 {
		return nil, fmt.Errorf("grade solver %s: per size %d and concurrency %d must be positive", model.Name(), perSize, concurrency)
	}
	rng := rand.New(rand.NewPCG(seed, 0x67ade))
	type job struct {
		class int
		t     transcript.Transcript
		want  int64
	}
	var scores []SizeScore
	var jobs []job
	add := func(sz world.SolverSize, in bool) {
		for range perSize {
			x, y := cov.Question(sz, rng, in)
			jobs = append(jobs, job{class: len(scores), t: transcript.SolverTranscript(sz.Op, x, y), want: sz.Op.Apply(x, y)})
		}
		scores = append(scores, SizeScore{Size: sz, Covered: in, N: perSize})
	}
	for _, covered := range []bool{true, false} {
		for _, sz := range world.SolverSizes(covered) {
			add(sz, covered)
		}
	}
	for _, sz := range world.SolverSizes(true) {
		if cov.Narrows(sz) {
			add(sz, false)
		}
	}
	right := make([]bool, len(jobs))
	failed := make([]bool, len(jobs))
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(concurrency)
	zero := 0.0
	for i, j := range jobs {
		if gctx.Err() != nil {
			break
		}
		eg.Go(func() error {
			req := &delegate.Request{Messages: j.t.Messages[:2], Temperature: &zero, MaxTokens: 128}
			rec := delegate.NewRecorder(GradeSolverRun, req.Messages[len(req.Messages)-1].Content, nil)
			resp, err := rec.Call(gctx, nil, "question", delegate.Agent{Role: "solver", Model: model}, req)
			var failure delegate.Failure
			if err != nil {
				failed[i] = true // a model failure is a wrong answer, not the grading's end
				failure = delegate.Failed(delegate.FailureCall, "%v", err)
			} else {
				right[i] = world.Correct(resp.Text(), j.want)
			}
			if t := rec.Finish(resp.Text(), failure); traces != nil {
				traces(t)
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, fmt.Errorf("grade solver %s: %w", model.Name(), err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("grade solver %s: %w", model.Name(), err)
	}
	for i, j := range jobs {
		if right[i] {
			scores[j.class].Right++
		}
		if failed[i] {
			scores[j.class].Failed++
		}
	}
	return scores, nil
}

// DelegatorScore sums a delegator's greedy runs over problems.
type DelegatorScore struct {
	N      int // problems
	Right  int // runs whose answer world.Verify accepts
	Failed int // runs that ended with a strategy failure (still graded) or an error (counted wrong)
	Steps  int // steps of the problems
	// SubagentCalls counts the solver's calls; SubagentCalls/Steps is the
	// delegation rate.
	SubagentCalls int
	// DelegatorTokens sums the delegator's generated tokens.
	DelegatorTokens int
}

// Accuracy is Right/N.
func (s DelegatorScore) Accuracy() float64 { return float64(s.Right) / float64(max(s.N, 1)) }

// DelegationRate is SubagentCalls/Steps.
func (s DelegatorScore) DelegationRate() float64 {
	return float64(s.SubagentCalls) / float64(max(s.Steps, 1))
}

// GradeDelegator runs the delegator on problems under a protocol and grades it.
// The protocol is strategy.NameSingle, alone, where solver is unused and
// may be nil; or strategy.NameRoute, with the solver behind the delegate
// tool declared as transcript.Tool. Runs use transcript.StrategyConfig at
// temperature 0, at most concurrency at once. It is a one-arm benchmark,
// bench.Run with no results file, graded by world.Verify as delegate
// train's table is. A run that fails is recorded and counted as bench
// counts it; only ctx ending stops the grading early. traces, when set,
// receives the trace of every run as it returns, from many goroutines at
// once, and must not block.
func GradeDelegator(ctx context.Context, protocol string, delegator, solver delegate.Model, problems []*world.Problem, concurrency int, traces func(*delegate.Trace)) (DelegatorScore, error) {
	if concurrency < 1 {
		return DelegatorScore{}, fmt.Errorf("grade delegator %s: concurrency %d must be positive", delegator.Name(), concurrency)
	}
	cfg := transcript.StrategyConfig()
	cfg.Single.Temperature, cfg.Strong.Temperature, cfg.Weak.Temperature = 0, 0, 0
	var roles strategy.Roles
	switch protocol {
	case strategy.NameSingle:
		roles.Single = delegate.Agent{Role: "single", Model: delegator}
	case strategy.NameRoute:
		if solver == nil {
			return DelegatorScore{}, fmt.Errorf("grade delegator %s: route needs a solver", delegator.Name())
		}
		roles.Strong = delegate.Agent{Role: "strong", Model: delegator}
		roles.Weak = delegate.Agent{Role: solverRole, Model: solver}
	default:
		return DelegatorScore{}, fmt.Errorf("grade delegator %s: protocol %q, want %s or %s", delegator.Name(), protocol, strategy.NameSingle, strategy.NameRoute)
	}
	s, err := strategy.New(protocol, roles, cfg)
	if err != nil {
		return DelegatorScore{}, fmt.Errorf("grade delegator %s: %w", delegator.Name(), err)
	}
	if traces != nil {
		s = observed{Strategy: s, traces: traces}
	}
	sc := DelegatorScore{N: len(problems)}
	tasks := make([]delegate.Task, len(problems))
	for i, p := range problems {
		tasks[i] = p.Task()
		sc.Steps += len(p.Steps)
	}
	ecfg := bench.DefaultConfig()
	ecfg.Concurrency = concurrency
	rep, err := bench.Run(ctx, ecfg, tasks, []bench.Arm{{Name: protocol, Strategy: s}}, world.Verify, nil)
	if err != nil {
		return DelegatorScore{}, fmt.Errorf("grade delegator %s: %w", delegator.Name(), err)
	}
	row := rep.Rows[0]
	if row.N != sc.N {
		return DelegatorScore{}, fmt.Errorf("grade delegator %s: %d of %d problems graded", delegator.Name(), row.N, sc.N)
	}
	sc.Right, sc.Failed = row.Correct, row.Failures+row.Errors
	// The report holds means per problem. Times N, they give back the sums
	// they were computed from, whole numbers exact after rounding.
	sum := func(mean float64) int { return int(math.Round(mean * float64(row.N))) }
	for _, r := range row.Roles {
		if r.Role == solverRole {
			sc.SubagentCalls = sum(r.Calls)
		} else {
			sc.DelegatorTokens += sum(r.Out)
		}
	}
	return sc, nil
}

// solverRole is the solver's role under route: the sub-agent whose calls
// are the delegations.
const solverRole = "weak"

// observed hands each run's trace to traces.
type observed struct {
	delegate.Strategy
	traces func(*delegate.Trace)
}

func (s observed) Run(ctx context.Context, request string, events chan<- delegate.Event) (*delegate.Trace, error) {
	t, err := s.Strategy.Run(ctx, request, events)
	if t != nil {
		s.traces(t)
	}
	return t, err
}
