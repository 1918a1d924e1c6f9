package pretrain

import (
	"context"
	"errors"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/world"
)

// coveredOnly is a fake solver that answers right inside the coverage and
// wrong outside it, and fails on one question shape.
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
