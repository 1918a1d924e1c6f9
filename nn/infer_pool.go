package nn

import (
	"fmt"
	"runtime/debug"
	"sync"
)

// inferPool runs one task on several cores with goroutines started once, so
// that splitting a decode step's attention costs two channel operations per
// helper rather than a goroutine and a closure per token.
//
// run may be called from one goroutine at a time; close stops the helpers
// and waits for them.
type inferPool struct {
	n     int             // workers, the caller included
	start []chan struct{} // one per helper
	done  chan struct{}
	task  func(worker int) // written by run before it signals the helpers
	fault []any            // per worker: a recovered panic, re-raised by run
	wg    sync.WaitGroup
}

func newInferPool(n int) *inferPool {
	p := &inferPool{n: max(1, n), done: make(chan struct{}, n)}
	p.fault = make([]any, p.n)
	for k := 1; k < p.n; k++ {
		ch := make(chan struct{})
		p.start = append(p.start, ch)
		p.wg.Go(func() {
			for range ch {
				p.call(k)
				p.done <- struct{}{}
			}
		})
	}
	return p
}

// run calls task(k) for k in [0, workers) concurrently, task(0) on the
// calling goroutine, and returns when all have returned. workers is
// clamped to [1, p.n].
func (p *inferPool) run(workers int, task func(worker int)) {
	workers = min(max(workers, 1), p.n)
	p.task = task
	for k := 1; k < workers; k++ {
		p.start[k-1] <- struct{}{}
	}
	task(0)
	for k := 1; k < workers; k++ {
		<-p.done
	}
	p.task = nil
	for k := 1; k < workers; k++ {
		if f := p.fault[k]; f != nil {
			p.fault[k] = nil
			panic(f) // on the caller's goroutine, where the engine recovers it
		}
	}
}

// call runs the task of helper k, keeping a panic for run to re-raise
// instead of crashing the process.
func (p *inferPool) call(k int) {
	defer func() {
		if r := recover(); r != nil {
			p.fault[k] = fmt.Sprintf("inference worker %d: %v\n%s", k, r, debug.Stack())
		}
	}()
	p.task(k)
}

func (p *inferPool) close() {
	for _, ch := range p.start {
		close(ch)
	}
	p.wg.Wait()
}
