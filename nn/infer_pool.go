package nn

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// inferPool runs one task on several cores with goroutines started once. A
// decode step hands it a few dozen tasks (every product and the attention
// of every layer), each tens of microseconds long, so the hand-off must
// cost far less than waking a parked goroutine: a helper that finished a
// task spins on the task counter for a while (inferPoolSpin) before it
// parks, and the caller spins until the helpers are done. Between steps
// the helpers park and use no CPU.
//
// run may be called from one goroutine at a time; close stops the helpers
// and waits for them.
type inferPool struct {
	n int // workers, the caller included
	// gen is the task number times 2^16 plus the task's worker count
	// (helpers k below it take part): one atomic word, so that a helper
	// reads both as they were when the task was published.
	gen     atomic.Uint64
	task    func(worker int) // read only by the helpers that take part
	pending atomic.Int32     // helpers still running the current task
	quit    atomic.Bool
	parked  []atomic.Bool   // per helper: waiting on wake
	wake    []chan struct{} // per helper, buffered: a task or quit may be there
	fault   []any           // per worker: a recovered panic, re-raised by run
	wg      sync.WaitGroup
}

// inferPoolSpin is how many times an idle helper checks for a new task
// before it parks: some tens of microseconds, longer than the gap between
// the products of one decode step.
const inferPoolSpin = 1 << 14

func newInferPool(n int) *inferPool {
	p := &inferPool{n: min(max(1, n), 1<<16-1)}
	p.fault = make([]any, p.n)
	p.parked = make([]atomic.Bool, p.n)
	p.wake = make([]chan struct{}, p.n)
	for k := 1; k < p.n; k++ {
		p.wake[k] = make(chan struct{}, 1)
		p.wg.Go(func() { p.helper(k) })
	}
	return p
}

// helper is the loop of helper k: wait for a new task number, run the
// task if it takes part, report, repeat.
func (p *inferPool) helper(k int) {
	var seen uint64
	for {
		g := p.await(k, seen)
		if p.quit.Load() {
			return
		}
		seen = g
		if k < int(g&(1<<16-1)) {
			p.call(k)
			p.pending.Add(-1)
		}
	}
}

// await returns the task number once it differs from seen, spinning first,
// then parked on p.wake[k].
func (p *inferPool) await(k int, seen uint64) uint64 {
	for {
		for range inferPoolSpin {
			if g := p.gen.Load(); g != seen || p.quit.Load() {
				return g
			}
		}
		p.parked[k].Store(true)
		// Re-check after announcing: run bumps gen before it looks at
		// parked, so either it sees parked and wakes us or we see its gen.
		if g := p.gen.Load(); g != seen || p.quit.Load() {
			p.parked[k].Store(false)
			return g
		}
		<-p.wake[k]
		p.parked[k].Store(false)
		// A wake-up may be left over from a task seen while spinning:
		// loop and check the number again.
	}
}

// run calls task(k) for k in [0, workers) concurrently, task(0) on the
// calling goroutine, and returns when all have returned. workers is
// clamped to [1, p.n].
func (p *inferPool) run(workers int, task func(worker int)) {
	workers = min(max(workers, 1), p.n)
	if workers == 1 {
		task(0)
		return
	}
	p.task = task
	p.pending.Store(int32(workers - 1))
	g := p.gen.Load()
	p.gen.Store((g>>16+1)<<16 | uint64(workers)) // publishes the task to the helpers
	for k := 1; k < workers; k++ {
		p.nudge(k)
	}
	task(0)
	for i := 0; p.pending.Load() != 0; i++ {
		if i%256 == 255 {
			runtime.Gosched() // let a helper sharing this core run
		}
	}
	p.task = nil
	for k := 1; k < workers; k++ {
		if f := p.fault[k]; f != nil {
			p.fault[k] = nil
			panic(f) // on the caller's goroutine, where the engine recovers it
		}
	}
}

// nudge wakes helper k if it is parked (or about to be).
func (p *inferPool) nudge(k int) {
	if p.parked[k].Load() {
		select {
		case p.wake[k] <- struct{}{}:
		default: // a wake-up is already waiting
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
	p.quit.Store(true)
	for k := 1; k < p.n; k++ {
		select {
		case p.wake[k] <- struct{}{}:
		default:
		}
	}
	p.wg.Wait()
}
