package train

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

func TestTrainParallel(t *testing.T) {
	for _, n := range []int{0, 1, 7, 1000} {
		hits := make([]atomic.Int32, n)
		parallel(n, 3, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				hits[i].Add(1)
			}
		})
		for i := range hits {
			if got := hits[i].Load(); got != 1 {
				t.Fatalf("n=%d: item %d visited %d times, want 1", n, i, got)
			}
		}
	}
	defer func() {
		// with GOMAXPROCS 1 the chunk runs inline and panics as itself
		if r := fmt.Sprint(recover()); !strings.Contains(r, "boom") {
			t.Errorf("recovered %q, want the worker's panic", r)
		} else if runtime.GOMAXPROCS(0) > 1 && !strings.Contains(r, "worker stack") {
			t.Errorf("recovered %q, want the worker's stack in it", r)
		}
	}()
	parallel(1000, 1, func(lo, hi int) {
		if lo == 0 {
			panic("boom")
		}
	})
	t.Error("parallel returned after a worker panicked")
}
