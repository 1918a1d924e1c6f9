package infer

import (
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// workerPool runs one task on several cores with goroutines started once.
//
// A task is a set of pieces that any worker may take from a counter the
// task keeps. The caller works on it at once. Each helper, seeing the task
// number change, joins only if the task is still open when it gets there.
// When the caller runs out of pieces it closes the task. It then waits only
// for the helpers that joined, which are on their last piece: it spins for
// them and blocks only if they take long. Blocking at once parked the
// caller's goroutine on every product a helper finished last, and a helper
// spinning on the caller's processor delayed its wake-up. So a helper that
// another process keeps off its core, or that wakes late, delays nothing:
// the others do its share. An idle helper checks the task number a few
// thousand times, some microseconds, before it parks on its channel. The
// next task of the same decode step then finds it awake without a wake-up.
// Longer spinning with a caller that waited for every helper was tried
// first and was slower; docs/engine.md has the figures.
//
// run may be called from one goroutine at a time; close stops the helpers
// and waits for them.
type workerPool struct {
	n     int             // workers, the caller included
	start []chan struct{} // per helper, buffered: wakes a parked helper
	// state holds openBit, waitBit and the number of helpers on the task.
	// openBit is set while a task takes helpers, waitBit once the caller of
	// a closed task blocks on idle.
	state   atomic.Int64
	workers int              // of the open task: helpers k < workers may join
	task    func(worker int) // of the open task
	idle    chan struct{}    // the last helper out says so to a blocked caller
	gen     atomic.Uint64    // task number, bumped when a task opens
	parked  []atomic.Bool    // per helper: waiting on its start channel
	fault   []any            // per worker: a recovered panic, re-raised by run
	wg      sync.WaitGroup
}

const (
	openBit = 1 << 40
	waitBit = 1 << 41
	helpers = openBit - 1 // mask of state's helper count
)

func newWorkerPool(n int) *workerPool {
	p := &workerPool{n: max(1, n), idle: make(chan struct{}, 1)}
	p.fault = make([]any, p.n)
	p.parked = make([]atomic.Bool, p.n)
	for range p.n - 1 { // all made before any helper reads p.start
		p.start = append(p.start, make(chan struct{}, 1))
	}
	for k := 1; k < p.n; k++ {
		p.wg.Go(func() {
			var seen uint64
			for {
				g, ok := p.await(k, seen)
				if !ok {
					return
				}
				seen = g
				p.join(k)
			}
		})
	}
	return p
}

// poolSpin is how many times an idle helper checks for a new task
// before it parks on its channel.
const poolSpin = 1 << 12

// await returns the task number once it differs from seen.
// It checks poolSpin times before parking. It reports false when the pool
// is closed.
func (p *workerPool) await(k int, seen uint64) (uint64, bool) {
	for {
		for range poolSpin {
			if g := p.gen.Load(); g != seen {
				return g, true
			}
		}
		p.parked[k].Store(true)
		if g := p.gen.Load(); g != seen { // run bumps gen before it looks at parked
			p.parked[k].Store(false)
			return g, true
		}
		if _, ok := <-p.start[k-1]; !ok {
			return 0, false
		}
		p.parked[k].Store(false)
	}
}

// join runs helper k on the open task, if there is one it may take part
// in.
func (p *workerPool) join(k int) {
	for {
		s := p.state.Load()
		if s&openBit == 0 {
			return // closed: the others did the work
		}
		if p.state.CompareAndSwap(s, s+1) {
			break
		}
	}
	if k < p.workers { // written before the task opened
		p.call(k)
	}
	if p.state.Add(-1) == waitBit { // the last one out, and the caller blocked
		p.idle <- struct{}{}
	}
}

// run calls task(k) for k in [0, workers) on up to workers cores.
// task(0) runs on the calling goroutine, and run returns when every call
// that started has returned. Every call must take pieces of the work until
// none is left, so that the work is done whichever of them run. workers is
// clamped to [1, p.n].
func (p *workerPool) run(workers int, task func(worker int)) {
	workers = min(max(workers, 1), p.n)
	if workers == 1 {
		task(0)
		return
	}
	p.task, p.workers = task, workers
	p.state.Store(openBit) // publishes task and workers
	p.gen.Add(1)
	for k := 1; k < workers; k++ {
		if !p.parked[k].Load() {
			continue // spinning: it sees gen
		}
		select {
		case p.start[k-1] <- struct{}{}:
		default: // a token is waiting: the helper will come
		}
	}
	task(0)
	s := p.state.Add(-openBit) // closed: no helper joins from here on
	// The helpers still in are on their last piece: wait for them
	// spinning, and block only if they take long.
	for i := 0; s&helpers != 0; i++ {
		if i < poolWaitSpin {
			s = p.state.Load()
			continue
		}
		if p.state.CompareAndSwap(s, s|waitBit) {
			<-p.idle
			break
		}
		s = p.state.Load()
	}
	p.state.Store(0)
	p.task = nil
	for k := 1; k < workers; k++ {
		if f := p.fault[k]; f != nil {
			p.fault[k] = nil
			panic(f) // on the caller's goroutine, where the engine recovers it
		}
	}
}

// poolWaitSpin is how many times the caller of a closed task checks for
// its helpers before it blocks.
const poolWaitSpin = 1 << 14

// call runs the task of helper k, keeping a panic for run to re-raise
// instead of crashing the process.
func (p *workerPool) call(k int) {
	defer func() {
		if r := recover(); r != nil {
			p.fault[k] = fmt.Sprintf("inference worker %d: %v\n%s", k, r, debug.Stack())
		}
	}()
	p.task(k)
}

func (p *workerPool) close() {
	for _, ch := range p.start {
		close(ch)
	}
	p.wg.Wait()
}
