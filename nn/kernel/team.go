package kernel

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
)

// This file splits a one-row packed product across cores.
//
// A one-row product of a few megabytes of weights takes some tens of
// microseconds. Starting a goroutine for each product, or waking a parked
// one, costs a large part of that. So a team of helper goroutines, started
// once, checks for the next product for some microseconds after each one
// before it parks. Back-to-back products, as in a decode step, then hand
// work over with an atomic store and collect it with atomic loads.
//
// A product is cut into units of eight panels, the most gemv reads at
// once. Every worker takes units from a counter: of those left, one in
// workers, at least one. So the first takes are large and the last ones
// small. The caller starts at once and takes every unit the helpers do
// not. A helper that is parked, late or kept off its core by another
// process so costs little: the caller does its share. When no unit is left
// the caller closes the product. It then waits only for the helpers that
// joined, which are on their last units: it spins, and blocks if they
// take long.
//
// On a machine with more busy threads than cores, other processes keep
// the helpers off their cores. A helper then holds units the caller must
// wait for, or does little while its spinning takes processor time. So a
// product goes wrong when the caller blocked, or when helpers that were
// spinning at its start did under half of their even share. The helpers
// park during a back-off; its last product wakes them, so that the next
// one finds them spinning. After one
// that goes wrong the next products run on their callers alone and the
// helpers park: 64 products after the first, twice as many after each
// one that follows, half as many after each product that goes well.
// Columns are computed as on one core, so the bits are the same.

// oneRowSplit is the k·n from which a one-row MatMulPacked is split across cores.
// That is 256 KiB of float32 weights: a few microseconds on one core,
// several times what the hand-off costs when the helpers are spinning.
const oneRowSplit = 1 << 16

// teamUnit is the columns of a unit of work: eight panels.
const teamUnit = 8 * nr

// teamSpin is how many times an idle helper checks for a product before it parks.
// With a yield every teamYield checks, that is some tens of microseconds.
const (
	teamSpin  = 1 << 16
	teamYield = 1 << 10
)

// teamWaitSpin is how many times the caller of a closed product checks
// for its helpers before it blocks. Some tens of microseconds: a helper on
// its last unit of a large product needs that long, and blocking counts
// against the split.
const teamWaitSpin = 1 << 17

// teamBackoff and teamBackoffMax bound how many products run unsplit after one that went wrong.
const (
	teamBackoff    = 64
	teamBackoffMax = 1 << 14
)

// The bits of team.state.
const (
	teamOpen   = 1 << 40      // the product takes helpers
	teamWait   = 1 << 41      // the caller blocks on idle
	teamJoined = teamOpen - 1 // mask of the number of helpers in the product
)

// team runs one-row products on several cores, one product at a time.
// The helpers live as long as the process; parked, they cost nothing.
type team struct {
	busy  atomic.Bool   // held by the caller whose product the team runs
	gen   atomic.Uint64 // product number, bumped when a product opens
	state atomic.Int64  // teamOpen, teamWait and the helpers in the product
	// width is the workers of the last product. A helper past it parks
	// at once instead of spinning for a product it will not take part in.
	width atomic.Int64
	next  atomic.Int64 // the next unit of the open product to take

	// The open product, written by the holder of busy before it sets
	// teamOpen.
	workers int
	units   int64
	dst, a  []float32
	w       *Packed

	helpers []*helper     // grown by the holder of busy
	idle    chan struct{} // the last helper out says so to a blocked caller
	helped  atomic.Int64  // units of the open product the helpers took

	// Of the holder of busy: the products left to run unsplit, and how
	// many to run so after the next product that goes wrong.
	backoff, backoffNext int
}

// helper is one helper goroutine's part of a team.
type helper struct {
	k      int         // its worker number, from 1
	parked atomic.Bool // waiting on wake
	wake   chan struct{}
	fault  any // a recovered panic, re-raised by the caller
}

// rowTeam runs MatMulPacked's one-row products.
var rowTeam = team{idle: make(chan struct{}, 1)}

// matVec computes dst(n) = a(k) · Wᵀ on up to workers cores, the caller's included.
// It reports false, having done nothing, when workers is below two,
// another product holds the team or the team backs off.
func (t *team) matVec(dst, a []float32, w *Packed, workers int) bool {
	units := int64((w.n + teamUnit - 1) / teamUnit)
	workers = int(min(int64(workers), units))
	if workers < 2 || !t.busy.CompareAndSwap(false, true) {
		return false
	}
	defer t.busy.Store(false)
	if t.backoff > 0 {
		t.backoff--
		if t.backoff == 0 {
			t.rouse(workers)
		}
		return false
	}
	for len(t.helpers) < workers-1 {
		h := &helper{k: len(t.helpers) + 1, wake: make(chan struct{}, 1)}
		t.helpers = append(t.helpers, h)
		go t.serve(h)
	}
	t.dst, t.a, t.w, t.units, t.workers = dst, a, w, units, workers
	t.next.Store(0)
	t.helped.Store(0)
	t.width.Store(int64(workers))
	t.state.Store(teamOpen) // publishes the product
	t.gen.Add(1)
	judged := !t.rouse(workers) // every helper spinning: each should do its share
	t.work(false)
	s := t.state.Add(-teamOpen) // closed: no helper joins from here on
	wrong := false
	for i := 0; s&teamJoined != 0; i++ {
		if i < teamWaitSpin {
			s = t.state.Load()
			continue
		}
		if t.state.CompareAndSwap(s, s|teamWait) {
			<-t.idle
			wrong = true
			break
		}
		s = t.state.Load()
	}
	if judged && 2*int64(workers)*t.helped.Load() < units*int64(workers-1) {
		wrong = true // under half of the helpers' share
	}
	if wrong {
		t.backoff = max(t.backoffNext, teamBackoff)
		t.backoffNext = min(2*t.backoff, teamBackoffMax)
	} else {
		t.backoffNext /= 2
	}
	t.state.Store(0)
	t.dst, t.a, t.w = nil, nil, nil
	for _, h := range t.helpers[:workers-1] {
		if f := h.fault; f != nil {
			h.fault = nil
			panic(f) // on the caller's goroutine, as if it had run the units
		}
	}
	return true
}

// rouse wakes the parked helpers among a product's workers and reports whether there were any.
// The last product of a back-off rouses them, so that they spin by the
// next one: woken by that product itself, they would be late by their
// wake-up, and it would go wrong and start the next back-off.
func (t *team) rouse(workers int) bool {
	woke := false
	for _, h := range t.helpers[:min(len(t.helpers), workers-1)] {
		if !h.parked.Load() {
			continue // spinning: it sees gen
		}
		woke = true
		select {
		case h.wake <- struct{}{}:
		default: // a token is waiting: the helper will come
		}
	}
	return woke
}

// work takes units of the open product and computes them until none is left.
// A helper counts the units it takes in helped.
func (t *team) work(byHelper bool) {
	for {
		u0 := t.next.Load()
		left := t.units - u0
		if left <= 0 {
			return
		}
		u1 := u0 + max(1, left/int64(t.workers))
		if !t.next.CompareAndSwap(u0, u1) {
			continue
		}
		if byHelper {
			t.helped.Add(u1 - u0)
		}
		n := t.w.n
		gemv(t.dst, t.a, t.w, min(int(u0)*teamUnit, n), min(int(u1)*teamUnit, n))
	}
}

// serve is helper h's goroutine: it joins each product that opens.
func (t *team) serve(h *helper) {
	var seen uint64
	for {
		seen = t.await(h, seen)
		t.join(h)
	}
}

// await returns the product number once it differs from seen.
// A helper the last product used checks teamSpin times, yielding its
// processor now and then, before it parks on its channel.
func (t *team) await(h *helper, seen uint64) uint64 {
	for {
		if int64(h.k) < t.width.Load() {
			for i := 1; i <= teamSpin; i++ {
				if g := t.gen.Load(); g != seen {
					return g
				}
				if i%teamYield == 0 {
					runtime.Gosched() // a goroutine waiting for this processor runs
				}
			}
		}
		h.parked.Store(true)
		if g := t.gen.Load(); g != seen { // matVec bumps gen before it looks at parked
			h.parked.Store(false)
			return g
		}
		<-h.wake
		h.parked.Store(false)
	}
}

// join runs helper h on the open product, if there is one it may take part in.
func (t *team) join(h *helper) {
	for {
		s := t.state.Load()
		if s&teamOpen == 0 {
			return // closed: the others did the work
		}
		if t.state.CompareAndSwap(s, s+1) {
			break
		}
	}
	if h.k < t.workers { // written before the product opened
		t.call(h)
	}
	if t.state.Add(-1) == teamWait { // the last one out, and the caller blocked
		t.idle <- struct{}{}
	}
}

// call runs helper h's share, keeping a panic for the caller to re-raise
// instead of crashing the process.
func (t *team) call(h *helper) {
	defer func() {
		if r := recover(); r != nil {
			h.fault = fmt.Sprintf("kernel: matmul helper %d: %v\n%s", h.k, r, debug.Stack())
		}
	}()
	t.work(true)
}
