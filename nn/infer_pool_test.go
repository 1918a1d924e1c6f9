package nn

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestInferPoolRunsEveryWorkerOnce runs many tasks of varying widths
// back to back, with pauses long enough for the helpers to park between
// some of them, and checks that each task ran on exactly its workers,
// once each, and had finished when run returned.
func TestInferPoolRunsEveryWorkerOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := newInferPool(4)
	defer p.close()
	for i := range 300 {
		workers := 1 + i%5 // 5 is clamped to 4
		var ran [4]atomic.Int32
		p.run(workers, func(k int) { ran[k].Add(1) })
		for k := range ran {
			want := int32(0)
			if k < min(workers, 4) {
				want = 1
			}
			if got := ran[k].Load(); got != want {
				t.Fatalf("task %d (%d workers): worker %d ran %d times, want %d", i, workers, k, got, want)
			}
		}
		if i%50 == 0 {
			time.Sleep(5 * time.Millisecond) // the helpers park
		}
	}
}

// A helper's panic comes back on the caller's goroutine, with the worker
// named, and the pool keeps working.
func TestInferPoolPanic(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := newInferPool(2)
	defer p.close()
	got := func() (r any) {
		defer func() { r = recover() }()
		p.run(2, func(k int) {
			if k == 1 {
				panic("boom")
			}
		})
		return nil
	}()
	if s := fmt.Sprint(got); !strings.Contains(s, "inference worker 1: boom") {
		t.Errorf("recovered %q, want the helper's panic", s)
	}
	var n atomic.Int32
	p.run(2, func(int) { n.Add(1) })
	if n.Load() != 2 {
		t.Errorf("after a panic: %d workers ran, want 2", n.Load())
	}
}
