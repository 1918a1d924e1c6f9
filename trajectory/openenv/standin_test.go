package openenv

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/openai"
	"github.com/delegatelab/delegate/standin"
)

// TestConcurrentEpisodesStandin runs 200 WebSocket episodes at once with the stand-in API as the sub-agent.
// Every delegate step reaches the stand-in once, over real HTTP, and comes back in its episode.
// No session or goroutine outlives the run, and the heap after it is within a bound of the heap before.
// It does not run under the race detector.
func TestConcurrentEpisodesStandin(t *testing.T) {
	if raceEnabled {
		t.Skip("a load test: 200 episodes over real HTTP take minutes under the race detector; TestConcurrentEpisodes covers the races")
	}
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // registered first, so it runs after the servers' cleanups
	sc := standin.DefaultConfig()
	sc.Latency = 2 * time.Millisecond
	sv, err := standin.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sv.Close(); err != nil {
			t.Errorf("close stand-in: %v", err)
		}
	})
	oc := openai.DefaultConfig()
	oc.BaseURL, oc.Model, oc.MaxRetries = sv.URL(), "standin", 0
	sub, err := openai.New(oc)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	srv, d := newDelegationServer(t, DelegationConfig{Subagent: sub}, func(c *Config) { c.MaxSessions = n })
	c := serveWith(t, srv, "", edge.DefaultTimeouts())
	ctx := context.Background()

	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	var wg sync.WaitGroup
	errs := make([]error, n)
	steps := make([]int, n)
	for i := range n {
		wg.Go(func() { steps[i], errs[i] = standinEpisode(ctx, c, d, int64(i)) })
	}
	wg.Wait()
	total := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("episode %d: %v", i, err)
		}
		total += steps[i]
	}
	if st := sv.Stats(); st.Requests != int64(total) || st.BadRequests != 0 {
		t.Errorf("the stand-in got %d requests (%d bad), want %d: one per delegate step", st.Requests, st.BadRequests, total)
	}
	waitActive(t, srv, 0)
	after := heap()
	t.Logf("%d episodes, %d delegate steps; heap %d KiB before, %d KiB after", n, total, before>>10, after>>10)
	if after > before+16<<20 {
		t.Errorf("heap grew from %d to %d bytes over the run, want under 16 MiB", before, after)
	}
}

// standinEpisode delegates every step of the seed's problem, answers, and returns the number of delegate steps.
// Each step must come back with the stand-in's reply and one more sub-agent call,
// and the episode must end after them.
func standinEpisode(ctx context.Context, c *Client, d *Delegation, seed int64) (int, error) {
	p, err := d.Problem(seed)
	if err != nil {
		return 0, err
	}
	s, err := c.Dial(ctx)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	if _, err := s.Reset(ctx, ResetRequest{Seed: &seed}); err != nil {
		return 0, fmt.Errorf("reset: %w", err)
	}
	calls := 0
	for _, st := range p.Steps {
		res, err := s.Step(ctx, call(ToolDelegate, map[string]string{"question": st.Expr()}))
		if err != nil {
			return calls, fmt.Errorf("delegate %s: %w", st.Expr(), err)
		}
		calls++
		o, err := decodeObservation(res)
		if err != nil || o.Error != nil || o.Result == "" || o.Spend.Subagent.Calls != calls || res.Done {
			return calls, fmt.Errorf("delegate %s: %+v, %v; want a result after %d calls", st.Expr(), o, err, calls)
		}
	}
	res, err := s.Step(ctx, call(ToolAnswer, map[string]string{"answer": fmt.Sprint(p.Answer)}))
	if err != nil || !res.Done || res.Reward == nil {
		return calls, fmt.Errorf("answer: %+v, %v", res, err)
	}
	raw, err := s.State(ctx)
	if err != nil {
		return calls, err
	}
	var st DelegationState
	if err := jsonUnmarshal(raw, &st); err != nil || st.StepCount != calls+1 || st.Spend.Subagent.Calls != calls {
		return calls, fmt.Errorf("state %s, %v; want %d steps, %d sub-agent calls", raw, err, calls+1, calls)
	}
	return calls, nil
}
