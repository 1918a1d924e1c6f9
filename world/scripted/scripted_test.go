package scripted

import (
	"context"
	"errors"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// solver is a fake solver answering in the solver's format. It is wrong,
// by one, on the question wrong.
func solver(wrong string) modeltest.Func {
	return func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		q := modeltest.LastUser(req)
		op, x, y, err := world.ParseExpr(q)
		if err != nil {
			return nil, err
		}
		if q == wrong {
			return modeltest.Text(world.Boxed(op.Apply(x, y) + 1)), nil
		}
		text, _, err := world.SolverAnswer(op, x, y)
		if err != nil {
			return nil, err
		}
		return modeltest.Text(text), nil
	}
}

func route(t *testing.T, d delegate.Model, s delegate.Model) delegate.Strategy {
	t.Helper()
	st, err := strategy.New(strategy.NameRoute, strategy.Roles{
		Strong: delegate.Agent{Role: "delegator", Model: d},
		Weak:   delegate.Agent{Role: "solver", Model: s},
	}, transcript.StrategyConfig())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestDelegatorSaysTheTranscript runs position rules in route's delegator
// seat. Each conversation must be the policy's transcript.Route, token for
// token as the transcript bills it. It needs one solver call per delegated
// step and the right answer.
func TestDelegatorSaysTheTranscript(t *testing.T) {
	ps, err := world.Generate(world.DefaultConfig(), 3, world.Test, 12)
	if err != nil {
		t.Fatal(err)
	}
	for mask := range uint(8) {
		pol := world.PositionRule(mask)
		d := New(world.PositionRuleName(mask, 3), ps, FromPolicy(pol))
		for _, p := range ps {
			s := modeltest.New("solver", solver(""))
			tr, err := route(t, d, s).Run(context.Background(), p.Text, nil)
			if err != nil {
				t.Fatal(err)
			}
			ep := transcript.Route(p, pol)
			delegated := 0
			for _, x := range ep.Delegated {
				if x {
					delegated++
				}
			}
			bill := ep.Bill(false).Delegator
			got := tr.Roles["delegator"].Usage
			if tr.Failure != "" || !world.Correct(tr.Answer, p.Answer) || s.Calls() != delegated ||
				got.PromptTokens != bill.PromptTokens || got.CompletionTokens != bill.CompletionTokens {
				t.Errorf("%s on %s: answer %q (failure %q), %d solver calls, usage %+v; want %d, %d calls, the transcript's %+v",
					d.Name(), p.ID, tr.Answer, tr.Failure, s.Calls(), got, p.Answer, delegated, bill)
			}
		}
	}
}

// TestOracle delegates the products worth it that the solver answers
// right, and computes the one it gets wrong.
func TestOracle(t *testing.T) {
	ps, err := world.Generate(world.DefaultConfig(), 3, world.Test, 40)
	if err != nil {
		t.Fatal(err)
	}
	var p *world.Problem
	for _, q := range ps {
		if world.WorthDelegating(q.Steps[0]) {
			p = q
			break
		}
	}
	if p == nil {
		t.Fatal("no problem starting with a product")
	}
	worth := 0 // the products worth delegating: each asked once, then delegated if right
	for _, s := range p.Steps {
		if world.WorthDelegating(s) {
			worth++
		}
	}
	for _, tt := range []struct {
		name  string
		wrong string
		calls int // the oracle's questions, then the delegations
	}{{"solver right", "", 2 * worth}, {"solver wrong on the first", p.Steps[0].Expr(), 2*worth - 1}} {
		s := modeltest.New("solver", solver(tt.wrong))
		tr, err := route(t, New("oracle", []*world.Problem{p}, Oracle(s)), s).Run(context.Background(), p.Text, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !world.Correct(tr.Answer, p.Answer) || s.Calls() != tt.calls {
			t.Errorf("%s: answer %q, %d solver calls; want %d, %d", tt.name, tr.Answer, s.Calls(), p.Answer, tt.calls)
		}
	}
}

func TestDelegatorErrors(t *testing.T) {
	ps, err := world.Generate(world.DefaultConfig(), 3, world.Test, 1)
	if err != nil {
		t.Fatal(err)
	}
	d := New("always", ps, FromPolicy(world.Always))
	_, err = d.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User("not a problem")}})
	if apiErr, ok := errors.AsType[*delegate.APIError](err); !ok || apiErr.Status != 400 {
		t.Errorf("an unknown problem: %v, want a 400 APIError", err)
	}
	boom := errors.New("boom")
	failing := New("failing", ps, func(context.Context, *world.Problem, int, int64, int64) (bool, error) { return false, boom })
	if _, err := failing.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User(ps[0].Text)}}); !errors.Is(err, boom) {
		t.Errorf("a failing decider: %v, want it wrapped", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Chat(ctx, &delegate.Request{Messages: []delegate.Message{delegate.User(ps[0].Text)}}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled context: %v, want context.Canceled", err)
	}
}

// bandSolver is a fake solver right on the products whose first factor is
// from from to below cut, and on every other step. It is wrong by one on
// the other products.
func bandSolver(from, cut int64) modeltest.Func {
	return func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		op, x, y, err := world.ParseExpr(modeltest.LastUser(req))
		if err != nil {
			return nil, err
		}
		if op == world.Mul && (x >= cut || x < from) {
			return modeltest.Text(world.Boxed(op.Apply(x, y) + 1)), nil
		}
		text, _, err := world.SolverAnswer(op, x, y)
		if err != nil {
			return nil, err
		}
		return modeltest.Text(text), nil
	}
}

func TestFitThreshold(t *testing.T) {
	ps, err := world.Generate(world.DefaultConfig(), 4, world.Train, 200)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name       string
		from, cut  int64
		gain, loss float64
		want       int64
	}{
		{"the digits world's solver", 0, 50, 0.11, 1, 50},
		{"a solver right below 30", 0, 30, 0.11, 1, 30},
		{"a solver never right on a product", 0, 0, 0.11, 1, MinThreshold},
		{"a solver always right on a product", 0, 1000, 0.11, 1, MaxThreshold},
		// The band world: a wrong product below 30 costs 0.89 at the
		// default reward, more than the band's right ones gain.
		{"the band's solver at the default reward", 30, 70, 0.11, 0.89, MinThreshold},
		{"the band's solver at the band's reward", 30, 70, 0.37, 0.63, 70},
	} {
		s := modeltest.New("solver", bandSolver(tt.from, tt.cut))
		got, err := FitThreshold(context.Background(), s, ps, tt.gain, tt.loss)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got != tt.want {
			t.Errorf("%s: threshold %d, want %d", tt.name, got, tt.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	failing := modeltest.New("solver", func(ctx context.Context, _ *delegate.Request) (*delegate.Response, error) { return nil, ctx.Err() })
	if _, err := FitThreshold(ctx, failing, ps, 0.11, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("FitThreshold with a failing solver: %v, want context.Canceled wrapped", err)
	}
}

// TestThresholdDelegatesBelow runs the threshold rule in route: it hands
// over exactly the products whose first factor is below t.
func TestThresholdDelegatesBelow(t *testing.T) {
	ps, err := world.Generate(world.DefaultConfig(), 3, world.Test, 40)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps[:10] {
		want := 0
		for i := range p.Steps {
			if world.FirstFactorBelow(50)(p, i) {
				want++
			}
		}
		s := modeltest.New("solver", solver(""))
		tr, err := route(t, New("threshold", []*world.Problem{p}, Threshold(50)), s).Run(context.Background(), p.Text, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !world.Correct(tr.Answer, p.Answer) || s.Calls() != want {
			t.Errorf("%q: answer %q, %d solver calls; want %d, %d", p.Text, tr.Answer, s.Calls(), p.Answer, want)
		}
	}
}
