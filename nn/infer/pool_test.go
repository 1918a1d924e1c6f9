package infer

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestWorkerPoolDoesEveryPieceOnce checks that every piece of a task is done exactly once.
// It runs many tasks of varying widths back to back, each a counter of
// pieces that any worker takes. Pauses between some let the helpers wait on
// their channels. Each piece must be done by a worker the task allowed,
// before run returned.
func TestWorkerPoolDoesEveryPieceOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := newWorkerPool(4)
	defer p.close()
	const pieces = 64
	for i := range 300 {
		workers := 1 + i%5 // 5 is clamped to 4
		var next atomic.Int64
		var done [pieces]atomic.Int32
		var bad atomic.Int32
		p.run(workers, func(k int) {
			if k >= min(workers, 4) {
				bad.Add(1)
			}
			for c := next.Add(1) - 1; c < pieces; c = next.Add(1) - 1 {
				done[c].Add(1)
				if c%16 == 0 {
					time.Sleep(time.Microsecond) // let the helpers arrive
				}
			}
		})
		for c := range done {
			if got := done[c].Load(); got != 1 {
				t.Fatalf("task %d (%d workers): piece %d done %d times, want 1", i, workers, c, got)
			}
		}
		if bad.Load() != 0 {
			t.Fatalf("task %d (%d workers): a worker beyond the task's count ran", i, workers)
		}
		if i%50 == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// A helper's panic comes back on the caller's goroutine with the worker
// named.
func TestWorkerPoolPanic(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := newWorkerPool(2)
	defer p.close()
	got := func() (r any) {
		defer func() { r = recover() }()
		joined := make(chan struct{})
		p.run(2, func(k int) {
			if k == 0 {
				select { // keep the task open until the helper is in it
				case <-joined:
				case <-time.After(10 * time.Second):
				}
				return
			}
			close(joined)
			panic("boom")
		})
		return nil
	}()
	if s := fmt.Sprint(got); !strings.Contains(s, "inference worker 1: boom") {
		t.Errorf("recovered %q, want the helper's panic", s)
	}
}

// The caller waits for a helper still on its last piece.
// It spins when the piece is short and blocks when it is long. A task after
// the wait starts clean, with no wake-up left over.
func TestWorkerPoolWaitsForSlowHelper(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := newWorkerPool(2)
	defer p.close()
	for i, d := range []time.Duration{0, 20 * time.Millisecond, time.Microsecond, 20 * time.Millisecond, 0} {
		var finished atomic.Bool
		joined := make(chan struct{})
		p.run(2, func(k int) {
			if k == 0 {
				select { // keep the task open until the helper is in it
				case <-joined:
				case <-time.After(10 * time.Second):
					t.Error("helper never joined")
				}
				return
			}
			close(joined)
			time.Sleep(d)
			finished.Store(true)
		})
		if !finished.Load() {
			t.Fatalf("task %d (helper's piece %v): run returned before the helper finished", i, d)
		}
	}
}
