package train

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// minChunkValues is the fewest values a chunk of a per-row layer holds.
// Starting and waking a goroutine costs microseconds, as much as a
// norm or a rotation over a few hundred rows of a 64-wide model, so
// such a layer runs on one core.
const minChunkValues = 1 << 14

// rowChunk is the fewest rows of width w in a chunk: at least least, and
// at least minChunkValues values.
func rowChunk(w, least int) int { return max(least, minChunkValues/max(w, 1)) }

// parallel runs fn over [0, n) split into contiguous chunks of at least minChunk items.
// It runs at most GOMAXPROCS chunks at once, the last on the caller's
// goroutine, and returns when every chunk is done. Each chunk must write
// only its own outputs, so results do not depend on the split. A panic in
// a chunk is a programming error. It is re-raised in the caller's
// goroutine with the chunk's stack, so it can be recovered there like
// inline code.
func parallel(n, minChunk int, fn func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if minChunk < 1 {
		minChunk = 1
	}
	if most := n / minChunk; most < workers {
		workers = most
	}
	if workers <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		panicked any
	)
	run := func(lo, hi int) {
		defer func() {
			if r := recover(); r != nil {
				mu.Lock()
				if panicked == nil {
					panicked = fmt.Sprintf("%v\n\nworker stack:\n%s", r, debug.Stack())
				}
				mu.Unlock()
			}
		}()
		fn(lo, hi)
	}
	for w := 0; w < workers-1; w++ {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Go(func() { run(lo, hi) })
	}
	// The caller takes the last chunk instead of waiting idle: one
	// goroutine fewer to start and to wake on every call.
	run(n*(workers-1)/workers, n)
	wg.Wait()
	if panicked != nil {
		panic(panicked)
	}
}
