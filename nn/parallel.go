package nn

import (
	"runtime"
	"sync"
)

// trainParallel runs fn over [0, n) split into contiguous chunks of at
// least minChunk items, one goroutine per chunk and at most GOMAXPROCS
// chunks; it returns when every chunk is done. Each chunk must write only
// its own outputs, so results do not depend on the split.
func trainParallel(n, minChunk int, fn func(lo, hi int)) {
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
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}
