package pretrain

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/scripted"
	"github.com/delegatelab/delegate/world/transcript"
)

// coveredOnly is a fake solver that answers right only inside the coverage.
// It answers wrong outside it and fails on one question shape.
func coveredOnly(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
	q := modeltest.LastUser(req)
	op, x, y, err := world.ParseExpr(q)
	if err != nil {
		return nil, err
	}
	if op == world.Add && x == 0 && y == 0 {
		return nil, errors.New("scripted failure")
	}
	if !world.SolverCovers(op, x, y) {
		return modeltest.Text(`\boxed{-1}`), nil
	}
	text, _, err := world.SolverAnswer(op, x, y)
	if err != nil {
		return nil, err
	}
	return modeltest.Text(text), nil
}

func TestGradeSolver(t *testing.T) {
	m := modeltest.New("solver", coveredOnly)
	scores, err := GradeSolver(context.Background(), m, 5, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(scores), len(world.SolverSizes(true))+len(world.SolverSizes(false)); got != want {
		t.Fatalf("%d scores, want %d", got, want)
	}
	for _, s := range scores {
		if s.Covered && s.Right+s.Failed != s.N || !s.Covered && s.Right != 0 {
			t.Errorf("%v covered=%v: %d right, %d failed of %d", s.Size, s.Covered, s.Right, s.Failed, s.N)
		}
	}
	if got := m.Calls(); got != 5*len(scores) {
		t.Errorf("%d calls, want %d", got, 5*len(scores))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := GradeSolver(ctx, m, 5, 4, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("GradeSolver on a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := GradeSolver(context.Background(), m, 0, 4, 1); err == nil {
		t.Error("GradeSolver with 0 questions per size: nil error")
	}
}

// calculator is a fake solver that answers every question right.
func calculator(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
	op, x, y, err := world.ParseExpr(modeltest.LastUser(req))
	if err != nil {
		return nil, err
	}
	return modeltest.Text(world.Boxed(op.Apply(x, y))), nil
}

// TestGradeDelegator grades a scripted always-delegate policy and a fake delegator.
// The policy runs under route: every step delegated, every answer right,
// billed as its transcripts. The fake runs alone: it solves half the
// problems, fails on one and answers the rest wrong.
func TestGradeDelegator(t *testing.T) {
	ps, err := world.Generate(world.DefaultConfig(), 5, world.Validation, 12)
	if err != nil {
		t.Fatal(err)
	}
	steps, tokens := 0, 0
	for _, p := range ps {
		steps += len(p.Steps)
		tokens += transcript.Route(p, world.Always).Bill(false).Delegator.CompletionTokens
	}
	solver := modeltest.New("solver", calculator)
	always := scripted.New("always", ps, scripted.FromPolicy(world.Always))
	sc, err := GradeDelegator(context.Background(), strategy.NameRoute, always, solver, ps, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := DelegatorScore{N: len(ps), Right: len(ps), Steps: steps, SubagentCalls: steps, DelegatorTokens: tokens}
	if sc != want || sc.DelegationRate() != 1 || sc.Accuracy() != 1 {
		t.Errorf("always-delegate under route: %+v, want %+v", sc, want)
	}

	index := map[string]int{}
	for i, p := range ps {
		index[p.Text] = i
	}
	alone := modeltest.New("delegator", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		i, ok := index[modeltest.LastUser(req)]
		switch {
		case !ok:
			return nil, errors.New("unknown problem")
		case i == 1:
			return nil, errors.New("scripted failure")
		case i%2 == 0:
			ep := transcript.Single(ps[i])
			return modeltest.Text(ep.Delegator[0].Messages[2].Content), nil
		}
		return modeltest.Text(world.Boxed(ps[i].Answer + 1)), nil
	})
	sc, err = GradeDelegator(context.Background(), strategy.NameSingle, alone, nil, ps, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sc.N != len(ps) || sc.Right != len(ps)/2 || sc.Failed != 1 || sc.SubagentCalls != 0 || sc.Steps != steps || sc.DelegatorTokens == 0 {
		t.Errorf("half right alone: %+v, want %d right of %d, 1 failed, no sub-agent call", sc, len(ps)/2, len(ps))
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := GradeDelegator(ctx, strategy.NameSingle, alone, nil, ps, 3, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("GradeDelegator on a cancelled context: %v, want context.Canceled", err)
	}
	for name, call := range map[string]func() (DelegatorScore, error){
		"no concurrency": func() (DelegatorScore, error) {
			return GradeDelegator(context.Background(), strategy.NameSingle, alone, nil, ps, 0, nil)
		},
		"route without solver": func() (DelegatorScore, error) {
			return GradeDelegator(context.Background(), strategy.NameRoute, alone, nil, ps, 1, nil)
		},
		"unknown protocol": func() (DelegatorScore, error) {
			return GradeDelegator(context.Background(), strategy.NameLead, alone, solver, ps, 1, nil)
		},
		"no problems": func() (DelegatorScore, error) {
			return GradeDelegator(context.Background(), strategy.NameSingle, alone, nil, nil, 1, nil)
		},
	} {
		if _, err := call(); err == nil {
			t.Errorf("%s: nil error", name)
		}
	}
}

// TestGradeSolverCoverage grades a fake solver of the digits world.
// It is right inside its coverage and wrong outside. Each product class is
// graded twice, inside and outside.
func TestGradeSolverCoverage(t *testing.T) {
	cov := world.DigitsCoverage()
	m := modeltest.New("solver", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		op, x, y, err := world.ParseExpr(modeltest.LastUser(req))
		if err != nil {
			return nil, err
		}
		if !cov.Covers(op, x, y) {
			return modeltest.Text(`\boxed{-1}`), nil
		}
		text, _, err := world.SolverAnswer(op, x, y)
		if err != nil {
			return nil, err
		}
		return modeltest.Text(text), nil
	})
	scores, err := GradeSolverCoverage(context.Background(), m, cov, 5, 4, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	narrowed := 0
	for _, s := range world.SolverSizes(true) {
		if cov.Narrows(s) {
			narrowed++
		}
	}
	if narrowed == 0 {
		t.Fatal("the digits coverage narrows no class")
	}
	if got, want := len(scores), len(world.SolverSizes(true))+len(world.SolverSizes(false))+narrowed; got != want {
		t.Fatalf("%d scores, want %d", got, want)
	}
	for _, s := range scores {
		if s.Covered && s.Right != s.N || !s.Covered && s.Right != 0 {
			t.Errorf("%v covered=%v: %d right of %d", s.Size, s.Covered, s.Right, s.N)
		}
	}
	plain, err := GradeSolver(context.Background(), m, 5, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	zero, err := GradeSolverCoverage(context.Background(), m, world.Coverage{}, 5, 4, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) != len(zero) {
		t.Fatalf("GradeSolver %d classes, the zero coverage's %d", len(plain), len(zero))
	}
	for i := range plain {
		if plain[i] != zero[i] {
			t.Errorf("class %d: GradeSolver %+v, the zero coverage's %+v", i, plain[i], zero[i])
		}
	}
}

// traceLog keeps the traces a grading hands over, from many goroutines.
type traceLog struct {
	mu     sync.Mutex
	traces []*delegate.Trace
}

func (l *traceLog) add(t *delegate.Trace) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.traces = append(l.traces, t)
}

// TestGradeTraces checks the traces grading hands over: one one-call run
// per solver question, failed calls marked, and one strategy run per
// problem of the delegator.
func TestGradeTraces(t *testing.T) {
	oddFails := modeltest.New("solver", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		_, x, _, err := world.ParseExpr(modeltest.LastUser(req))
		if err == nil && x%2 == 1 {
			return nil, errors.New("scripted failure")
		}
		return calculator(ctx, req)
	})
	var solver traceLog
	scores, err := GradeSolverCoverage(context.Background(), oddFails, world.Coverage{}, 5, 4, 1, solver.add)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, s := range scores {
		failed += s.Failed
	}
	if failed == 0 {
		t.Fatal("no question failed; the test needs some")
	}
	if got, want := len(solver.traces), oddFails.Calls(); got != want {
		t.Errorf("%d solver traces, want one per call (%d)", got, want)
	}
	traced := 0
	for _, tr := range solver.traces {
		calls := tr.Calls()
		if tr.Strategy != GradeSolverRun || len(calls) != 1 || calls[0].Model != "solver" || calls[0].Role != "solver" {
			t.Fatalf("solver trace %q with %d calls, want %q with one call of the solver", tr.Strategy, len(calls), GradeSolverRun)
		}
		if (tr.FailureKind == delegate.FailureCall) != (calls[0].Error != "") {
			t.Errorf("trace failure %q, call error %q: want both or neither", tr.Failure, calls[0].Error)
		}
		if tr.FailureKind == delegate.FailureCall {
			traced++
		}
	}
	if traced != failed {
		t.Errorf("%d traces of failed calls, want %d (the scores' Failed)", traced, failed)
	}

	ps, err := world.Generate(world.DefaultConfig(), 5, world.Validation, 6)
	if err != nil {
		t.Fatal(err)
	}
	var runs traceLog
	always := scripted.New("always", ps, scripted.FromPolicy(world.Always))
	if _, err := GradeDelegator(context.Background(), strategy.NameRoute, always, modeltest.New("solver", calculator), ps, 3, runs.add); err != nil {
		t.Fatal(err)
	}
	if len(runs.traces) != len(ps) {
		t.Fatalf("%d delegator traces, want one per problem (%d)", len(runs.traces), len(ps))
	}
	for _, tr := range runs.traces {
		if tr.Strategy != strategy.NameRoute || tr.Roles[solverRole].Calls == 0 {
			t.Errorf("delegator trace %q, roles %v: want a route run with solver calls", tr.Strategy, tr.Roles)
		}
	}
}
