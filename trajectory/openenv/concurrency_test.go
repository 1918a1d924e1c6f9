package openenv

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/world"
)

// TestConcurrentEpisodes runs 200 WebSocket episodes at once against a fast fake sub-agent.
// Every step is answered in order, every episode ends
// correct with its own problem, the sub-agent sees every delegate call,
// and no session or goroutine outlives the server.
func TestConcurrentEpisodes(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // registered first, so it runs after the server's cleanup
	const n = 200
	sub := fakeSolver()
	srv, d := newDelegationServer(t, DelegationConfig{Subagent: sub}, func(c *Config) { c.MaxSessions = n })
	c := serveWith(t, srv, "", edge.DefaultTimeouts()) // 200 handshakes at once can take longer than serve's short timeouts
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make([]error, n)
	delegated := make([]int, n)
	for i := range n {
		wg.Go(func() { delegated[i], errs[i] = episodeOnce(ctx, c, d, int64(i)) })
	}
	wg.Wait()
	total := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("episode %d: %v", i, err)
		}
		total += delegated[i]
	}
	if got := sub.Calls(); got != total {
		t.Errorf("sub-agent calls: got %d, want %d (one per delegate step)", got, total)
	}
	waitActive(t, srv, 0)
}

// episodeOnce drives the episode of seed: delegates every product,
// answers right, and checks each answer and the final state. It returns
// the number of delegate calls.
func episodeOnce(ctx context.Context, c *Client, d *Delegation, seed int64) (int, error) {
	p, err := d.Problem(seed)
	if err != nil {
		return 0, err
	}
	s, err := c.Dial(ctx)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	id := fmt.Sprintf("ep-%d", seed)
	res, err := s.Reset(ctx, ResetRequest{Seed: &seed, EpisodeID: &id})
	if err != nil {
		return 0, fmt.Errorf("reset: %w", err)
	}
	if o, err := decodeObservation(res); err != nil || o.Task != p.Text {
		return 0, fmt.Errorf("reset: task %q, %v; want %q", o.Task, err, p.Text)
	}
	calls := 0
	for _, st := range p.Steps {
		if st.Op != world.Mul {
			continue
		}
		res, err := s.Step(ctx, call(ToolDelegate, map[string]string{"question": st.Expr()}))
		if err != nil {
			return calls, fmt.Errorf("delegate %s: %w", st.Expr(), err)
		}
		calls++
		o, err := decodeObservation(res)
		if err != nil || o.Result != world.Pad(st.Result) || o.Spend.Subagent.Calls != calls {
			return calls, fmt.Errorf("delegate %s: result %q after %d calls, %v; want %s after %d", st.Expr(), o.Result, o.Spend.Subagent.Calls, err, world.Pad(st.Result), calls)
		}
	}
	res, err = s.Step(ctx, call(ToolAnswer, map[string]string{"answer": fmt.Sprint(p.Answer)}))
	if err != nil {
		return calls, fmt.Errorf("answer: %w", err)
	}
	raw, err := s.State(ctx)
	if err != nil {
		return calls, fmt.Errorf("state: %w", err)
	}
	var st DelegationState
	if err := jsonUnmarshal(raw, &st); err != nil {
		return calls, err
	}
	if !res.Done || st.EpisodeID == nil || *st.EpisodeID != id || st.StepCount != calls+1 || st.Correct == nil || !*st.Correct || st.ProblemID != p.ID {
		return calls, fmt.Errorf("end: done %v, state %+v; want %s done and correct after %d steps", res.Done, st, id, calls+1)
	}
	return calls, nil
}
