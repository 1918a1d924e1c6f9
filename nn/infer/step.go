package infer

import (
	"sync"
	"sync/atomic"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/kernel"
)

// This file is the one-row step on every core: batch-1 decoding.
//
// forward hands a step of one row to the pool as a single task instead of
// one task per product. The task is a list of stages: per layer the
// query-key-value product, attention, the output projection, the gate and
// up projections with SwiGLU, the down projection; then the classifier.
// Each stage is cut into units: pairs of column panels, or key-value heads
// for attention. Whichever core is free takes the next units from a
// counter: of those left, one in twice the cores, at least one. So big
// takes come first, and the last, small ones balance the cores. A core
// takes units of a stage only once the stage before is complete. The core
// that finishes a stage's last unit does its small closing work, such as
// the next RMSNorm, then marks it complete. So a helper that arrives late,
// or that another process keeps off its core, delays nothing: the caller
// takes every unit it does not. Each element is computed as forward's
// unsplit path computes it, so the bits are the same.

// panelCols is the column granularity of kernel.MatMulPackedCols.
// A column range starts on a multiple of it. A unit of a product is two
// panels, which the matrix-vector kernel reads together.
const panelCols = 16

// stallBackoff is how many one-row steps run split per product after a
// core slept in one. A core sleeps when another holds units and is kept
// off its core, as on a machine with more busy threads than cores. Then
// fewer waits a step lose less.
const stallBackoff = 64

// parallelStep is the step work, multiply-adds of one row, from which a
// one-row step runs on every core. It is 4 MiB of float32 weights.
const parallelStep = 1 << 20

// stageKind says what a stage of a one-row step computes.
type stageKind uint8

const (
	stageQKV    stageKind = iota // queries, keys and values of the layer
	stageAttend                  // per key-value head: rope, cache, attention
	stageWo                      // output projection, added to the residual
	stageFFN                     // gate and up projections, then SwiGLU
	stageDown                    // down projection, added to the residual
	stageHead                    // the classifier
)

// stage is one stage of a one-row step.
// next and done are reset by the caller before each step.
type stage struct {
	kind  stageKind
	layer int
	units int64
	fused bool         // stageFFN: each unit also applies SwiGLU to its columns
	next  atomic.Int64 // the next unit to take
	done  atomic.Int64 // units finished; units+1 once the closing work is done too
	_     [24]byte     // stages 64 bytes apart
}

// take takes the next units [u0, u1) of sg: of those left, one in
// 2·workers, at least one. It reports false when none is left.
func (sg *stage) take(workers int64) (u0, u1 int64, ok bool) {
	for {
		u0 = sg.next.Load()
		left := sg.units - u0
		if left <= 0 {
			return 0, 0, false
		}
		u1 = u0 + max(1, left/(2*workers))
		if sg.next.CompareAndSwap(u0, u1) {
			return u0, u1, true
		}
	}
}

// oneRow is the state of the one-row step in progress.
type oneRow struct {
	stages []stage // per layer qkv, attend, wo, ffn, down; then the head
	n      int     // stages of this step: the head's only when it wants logits
	row    tokenRow
	act    kernel.Q8Act // the next q8_0 product's input, quantised once
	failed atomic.Bool  // a core panicked: waiting cores give up
	slept  atomic.Bool  // a core slept in wait during this step
	// A core that waits long sleeps on cond. The closer of a stage
	// wakes it when sleepers is not zero.
	sleepers atomic.Int32
	mu       sync.Mutex
	cond     sync.Cond
}

// stepWork is the multiply-adds of one row through every product of c.
func stepWork(c nn.Config) int {
	d, qd, kv, h := c.Dim, c.QDim(), c.KVDim(), c.Hidden
	return c.Layers*(d*(qd+2*kv)+qd*d+2*d*h+h*d) + d*c.Vocab
}

// stages lists the stages of a one-row step of m's weights.
func (m *decoder) stages() []stage {
	c, w := m.cfg, &m.w
	pairs := func(n int) int { return (n + 2*panelCols - 1) / (2 * panelCols) }
	fused := c.Hidden%panelCols == 0
	out := make([]stage, 0, 5*c.Layers+1)
	add := func(kind stageKind, l, n int) {
		out = append(out, stage{kind: kind, layer: l, units: int64(n), fused: kind == stageFFN && fused})
	}
	for l := range c.Layers {
		add(stageQKV, l, pairs(w.qkv[l].N()))
		add(stageAttend, l, c.KVHeads)
		add(stageWo, l, pairs(w.wo[l].N()))
		if fused {
			add(stageFFN, l, pairs(c.Hidden))
		} else {
			add(stageFFN, l, pairs(w.w13[l].N()))
		}
		add(stageDown, l, pairs(w.w2[l].N()))
	}
	add(stageHead, 0, pairs(w.out.N()))
	return out
}

// forwardOne pushes one row through the model with every core of the pool.
// It returns the row's logits, or nil when the row wants none. The row
// buffers must hold one row and its logits (grow).
func (m *decoder) forwardOne(r tokenRow) []float32 {
	c, w := m.cfg, &m.w
	st := &m.one
	if st.stages == nil {
		st.stages = m.stages()
		st.cond.L = &st.mu
	}
	st.row = r
	st.n = len(st.stages)
	if !r.logits {
		st.n--
	}
	for i := range st.stages[:st.n] {
		st.stages[i].next.Store(0)
		st.stages[i].done.Store(0)
	}
	st.failed.Store(false)
	st.slept.Store(false)
	w.emb.Row(m.x[:c.Dim], r.token)
	m.normFor(m.xb, w.attnNorm[0], w.qkv[0])
	m.pool.run(m.pool.n, m.oneFn)
	if st.slept.Load() {
		m.oneOff = m.backoff
	}
	if !r.logits {
		return nil
	}
	return m.logits[:c.Vocab]
}

// normFor writes dst = RMSNorm(x) with gain g, the input of product p.
// For a q8_0 p it also quantises dst.
func (m *decoder) normFor(dst, g []float32, p *kernel.Packed) {
	d := m.cfg.Dim
	rmsNorm(dst[:d], m.x[:d], g, 1, d, float32(m.cfg.NormEps))
	if p.DType() == kernel.Q8_0 {
		m.one.act.Quantize(dst[:d], 1, p)
	}
}

// oneTask takes units of the step's stages, in order, until none is left.
// Worker 0, the caller, returns only once the last stage is complete.
func (m *decoder) oneTask(k int) {
	st := &m.one
	workers := int64(m.pool.n)
	ok := false
	defer func() {
		if !ok { // a panic: let the other cores stop waiting
			st.failed.Store(true)
			st.wake()
		}
	}()
	for i := range st.stages[:st.n] {
		sg := &st.stages[i]
		if sg.next.Load() >= sg.units {
			continue // taken: the others complete it
		}
		if i > 0 && !st.wait(&st.stages[i-1]) {
			ok = true
			return
		}
		for u0, u1, more := sg.take(workers); more; u0, u1, more = sg.take(workers) {
			m.oneUnits(k, sg, int(u0), int(u1))
			if sg.done.Add(u1-u0) == sg.units {
				m.closeStage(sg)
				sg.done.Add(1)
				st.wake()
			}
		}
	}
	if k == 0 {
		st.wait(&st.stages[st.n-1])
	}
	ok = true
}

// wait returns once sg is complete: its units and its closing work.
// It spins, then sleeps if that takes long. It reports false if a core
// panicked, which ends the step.
func (st *oneRow) wait(sg *stage) bool {
	end := sg.units + 1
	for i := 0; sg.done.Load() < end; i++ {
		if st.failed.Load() {
			return false
		}
		if i < poolWaitSpin {
			continue
		}
		st.slept.Store(true)
		st.mu.Lock()
		st.sleepers.Add(1) // before the check: a closer after it sees the sleeper
		for sg.done.Load() < end && !st.failed.Load() {
			st.cond.Wait()
		}
		st.sleepers.Add(-1)
		st.mu.Unlock()
		break
	}
	return sg.done.Load() >= end
}

// wake wakes the cores asleep in wait, if any.
func (st *oneRow) wake() {
	if st.sleepers.Load() == 0 {
		return
	}
	st.mu.Lock()
	st.cond.Broadcast()
	st.mu.Unlock()
}

// oneUnits computes units [u0, u1) of stage sg with worker k's scratch.
func (m *decoder) oneUnits(k int, sg *stage, u0, u1 int) {
	c, w := m.cfg, &m.w
	l, d := sg.layer, c.Dim
	switch sg.kind {
	case stageQKV:
		m.cols(m.qkv, m.xb, w.qkv[l], u0, u1)
	case stageAttend:
		for g := u0; g < u1; g++ {
			m.attendHead(k, l, g)
		}
	case stageWo:
		j0, j1 := m.cols(m.xo, m.att, w.wo[l], u0, u1)
		nn.Add(m.x[j0:j1], m.xo[j0:j1])
	case stageFFN:
		if !sg.fused {
			m.cols(m.h13, m.xb, w.w13[l], u0, u1)
			return
		}
		hid := c.Hidden
		j0, j1 := min(u0*2*panelCols, hid), min(u1*2*panelCols, hid)
		m.colRange(m.h13, m.xb, w.w13[l], j0, j1)         // gate
		m.colRange(m.h13, m.xb, w.w13[l], hid+j0, hid+j1) // up
		nn.SwiGLU(m.hb[j0:j1], m.h13[j0:j1], m.h13[hid+j0:hid+j1])
	case stageDown:
		j0, j1 := m.cols(m.xo, m.hb, w.w2[l], u0, u1)
		nn.Add(m.x[j0:j1], m.xo[j0:j1])
	case stageHead:
		m.cols(m.logits, m.head[:d], w.out, u0, u1)
	}
}

// closeStage does what follows sg's units and precedes the next stage's.
// That is the next product's RMSNorm, or SwiGLU when the units could not
// apply it, and quantising a q8_0 product's input.
func (m *decoder) closeStage(sg *stage) {
	c, w := m.cfg, &m.w
	l := sg.layer
	switch sg.kind {
	case stageAttend:
		if w.wo[l].DType() == kernel.Q8_0 {
			m.one.act.Quantize(m.att, 1, w.wo[l])
		}
	case stageWo:
		m.normFor(m.xb, w.ffnNorm[l], w.w13[l])
	case stageFFN:
		hid := c.Hidden
		if !sg.fused {
			nn.SwiGLU(m.hb[:hid], m.h13[:hid], m.h13[hid:2*hid])
		}
		if w.w2[l].DType() == kernel.Q8_0 {
			m.one.act.Quantize(m.hb, 1, w.w2[l])
		}
	case stageDown:
		switch {
		case l+1 < c.Layers:
			m.normFor(m.xb, w.attnNorm[l+1], w.qkv[l+1])
		case m.one.row.logits:
			m.normFor(m.head, w.finalNorm, w.out)
		}
	}
}

// cols computes units [u0, u1) of dst(1, n) = a · Wᵀ and returns their columns.
func (m *decoder) cols(dst, a []float32, w *kernel.Packed, u0, u1 int) (j0, j1 int) {
	j0, j1 = min(u0*2*panelCols, w.N()), min(u1*2*panelCols, w.N())
	m.colRange(dst, a, w, j0, j1)
	return j0, j1
}

// colRange computes columns [j0, j1) of dst(1, n) = a · Wᵀ.
// A q8_0 W reads m.one.act, a quantised when the stage before closed.
func (m *decoder) colRange(dst, a []float32, w *kernel.Packed, j0, j1 int) {
	if w.DType() == kernel.Q8_0 {
		kernel.MatMulQ8ActCols(dst, &m.one.act, w, j0, j1)
		return
	}
	kernel.MatMulPackedCols(dst, a, 1, w, j0, j1)
}

// attendHead computes key-value head g of layer l for the step's row.
// It finishes the head's keys and values (bias, norm, rope) and stores them
// in the cache. It then finishes the queries of the heads that share them
// and attends with those heads. The operations per element are forward's.
func (m *decoder) attendHead(k, l, g int) {
	c, w := m.cfg, &m.w
	r := m.one.row
	qd, kv, hd := c.QDim(), c.KVDim(), c.HeadDim()
	group := c.Heads / c.KVHeads
	eps := float32(c.NormEps)
	row := m.qkv[:qd+2*kv]
	ko, vo := qd+g*hd, qd+kv+g*hd
	key, val := row[ko:ko+hd], row[vo:vo+hd]
	if w.qkvBias != nil {
		nn.Add(key, w.qkvBias[l][ko:])
		nn.Add(val, w.qkvBias[l][vo:])
	}
	if w.kNorm != nil {
		rmsNorm(key, key, w.kNorm[l], 1, hd, eps)
	}
	m.rope.Forward(key, r.pos)
	m.cache.storeHead(l, r.slot, r.pos, g*hd, key, val)
	for h := g * group; h < (g+1)*group; h++ {
		q := row[h*hd : (h+1)*hd]
		if w.qkvBias != nil {
			nn.Add(q, w.qkvBias[l][h*hd:])
		}
		if w.qNorm != nil {
			rmsNorm(q, q, w.qNorm[l], 1, hd, eps)
		}
		m.rope.Forward(q, r.pos)
	}
	m.attend(m.att[:qd], row[:qd], m.scores[k], l, r.slot, r.pos, g*group, (g+1)*group)
}
