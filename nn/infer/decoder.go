package infer

import (
	"math"
	"runtime"
	"sync/atomic"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/kernel"
)

// This file is the inference forward pass. It is the same Llama 2 block as
// the training engine's forward, with llama2.c's arithmetic, and computes
// the per-row layers with the same functions of package nn. But it runs
// over a list of rows, each one token at one position of one cached
// sequence. A row list can mix a prompt's tokens, consecutive positions of
// one slot in prefill, with single next tokens of many slots in decode.
// Every row reads and writes only its own slot of the KV cache, and every
// linear layer over the rows is one kernel.MatMulNT. The kernel computes
// each output row the same way whatever the number of rows. So a row's
// result never depends on which other rows share the pass, and a sequence
// comes out bitwise identical alone or batched. Imported checkpoints add
// q/k/v biases, a per-head RMSNorm of queries and keys, a head width other
// than Dim/Heads and 16-bit matrices; the nn.Params path never sets them.

// tokenRow is one token to push through the model.
type tokenRow struct {
	slot, pos, token int
	logits           bool // compute the output head for this row
}

// decoder evaluates rows against one KV cache. It owns scratch buffers
// sized for the largest row list seen, so a steady-state step allocates
// nothing, and a pool of helper goroutines (one per extra core) that the
// owner stops with close. Not safe for concurrent use.
//
// The model reads its weights from its own copy, w, laid out for the
// kernels (kernel.Packed) when it is made and refreshed from the nn.Params
// only by refresh: forward never reads the nn.Params. Whoever changes the
// nn.Params sets stale, and the next forward refreshes first.
type decoder struct {
	p     *nn.Params
	cfg   nn.Config
	cache *KVCache
	w     packedWeights
	stale bool // w may differ from p: refresh before the next forward

	rope nn.Rope

	rows   int         // capacity of the row buffers
	x      []float32   // (rows, Dim) residual stream
	xb     []float32   // (rows, Dim) normed input of a sublayer
	qkv    []float32   // (rows, QDim+2·KVDim) queries, keys, values
	att    []float32   // (rows, QDim) attention output
	xo     []float32   // (rows, Dim) sublayer output
	h13    []float32   // (rows, 2·Hidden) gate then up
	hb     []float32   // (rows, Hidden) gated
	scores [][]float32 // per core: (Context) attention weights of one head

	pool     *workerPool      // cores for attention and products
	parWork  int              // attention work above which a step is split
	parMul   int              // product work (multiply-adds) above which it is split
	job      attendJob        // the step being attended
	bounds   []int            // per core: first (row, head) pair, then the end
	attendFn func(worker int) // m.attendTask, bound once
	mul      mulJob           // the product being computed
	mulFn    func(worker int) // m.mulTask, bound once
	work     int              // multiply-adds of one row through every product
	parStep  int              // work from which a one-row step runs on every core
	one      oneRow           // the one-row step in progress
	oneOff   int              // one-row steps left to split per product, after a stall
	backoff  int              // oneOff after a stall
	oneFn    func(worker int) // m.oneTask, bound once
	head     []float32        // (nlogits, Dim) final-normed rows that need logits
	logits   []float32        // (nlogits, Vocab)
}

// packedWeights are the model's weights as forward reads them.
// Every matrix is packed once and the norms copied. Queries, keys and values
// are stacked into one matrix, and the gate and up projections into another,
// so that each is one product.
//
// Imported checkpoints may add biases to the queries, keys and values and
// RMSNorm weights for each head of the queries and keys. They may keep the
// matrices in 16-bit values with kernel.NewPackedHalf.
type packedWeights struct {
	qkv, wo, w13, w2  []*kernel.Packed // per layer: (QD+2KV, D), (D, QD), (2H, D), (D, H)
	attnNorm, ffnNorm [][]float32      // per layer: (D)
	finalNorm         []float32        // (D)
	out               *kernel.Packed   // (V, D) output head
	emb               *kernel.Packed   // (V, D) token embedding: out itself when tied
	qkvBias           [][]float32      // per layer: (QD+2KV); nil without nn.Config.QKVBias
	qNorm, kNorm      [][]float32      // per layer: (HeadDim); nil without nn.Config.QKNorm
}

// bytes is the memory the weights take.
func (w *packedWeights) bytes() int64 {
	n := 4 * int64(len(w.finalNorm))
	all := []*kernel.Packed{w.out}
	if w.emb != w.out {
		all = append(all, w.emb)
	}
	for l := range w.qkv {
		all = append(all, w.qkv[l], w.wo[l], w.w13[l], w.w2[l])
		n += 4 * int64(len(w.attnNorm[l])+len(w.ffnNorm[l]))
		if w.qkvBias != nil {
			n += 4 * int64(len(w.qkvBias[l]))
		}
		if w.qNorm != nil {
			n += 4 * int64(len(w.qNorm[l])+len(w.kNorm[l]))
		}
	}
	for _, p := range all {
		n += p.Bytes()
	}
	return n
}

// mulJob is one product split across the pool's cores by column panels.
// Whichever core is free takes the next of chunks ranges from next, so a
// core another process delays takes fewer.
type mulJob struct {
	dst, a []float32
	rows   int
	w      *kernel.Packed
	q8     bool         // w is q8_0: the ranges read act, quantised once
	act    kernel.Q8Act // a quantised for a q8_0 w
	chunks int
	next   atomic.Int64
}

// mulChunks is how many column ranges each core takes on average.
const mulChunks = 4

// parallelMul is the work of a product, rows·k·n multiply-adds, above which columns split across cores.
// It is about 1 MiB of weights for one row. Handing a task to another core
// costs some microseconds, and below this the split saved less than that;
// docs/engine.md has the measurements.
const parallelMul = 1 << 18

func newDecoder(p *nn.Params, cache *KVCache) *decoder {
	c := p.Config
	m := newDecoderWeights(c, cache, packedWeights{})
	m.p = p
	d, kv, h := c.Dim, c.KVDim(), c.Hidden
	w := &m.w
	for range c.Layers {
		w.qkv = append(w.qkv, kernel.NewPacked(d, d, kv, kv))
		w.wo = append(w.wo, kernel.NewPacked(d, d))
		w.w13 = append(w.w13, kernel.NewPacked(d, h, h))
		w.w2 = append(w.w2, kernel.NewPacked(h, d))
		w.attnNorm = append(w.attnNorm, make([]float32, d))
		w.ffnNorm = append(w.ffnNorm, make([]float32, d))
	}
	w.finalNorm = make([]float32, d)
	w.out = kernel.NewPacked(d, c.Vocab)
	w.emb = w.out
	if !c.TiedOutput {
		w.emb = kernel.NewPacked(d, c.Vocab)
	}
	m.refresh()
	return m
}

// newDecoderWeights makes a model over weights already laid out.
// It only reads them, so several models may share them. It has no
// nn.Params and never refreshes.
func newDecoderWeights(c nn.Config, cache *KVCache, w packedWeights) *decoder {
	cores := max(1, runtime.GOMAXPROCS(0))
	m := &decoder{cfg: c, cache: cache, w: w, scores: make([][]float32, cores), parWork: parallelWork, parMul: parallelMul,
		work: stepWork(c), parStep: parallelStep, backoff: stallBackoff}
	m.pool = newWorkerPool(cores)
	m.attendFn = m.attendTask
	m.mulFn = m.mulTask
	m.oneFn = m.oneTask
	for i := range m.scores {
		m.scores[i] = make([]float32, c.Context)
	}
	m.rope = nn.NewRope(c)
	return m
}

// close stops the helper goroutines.
func (m *decoder) close() { m.pool.close() }

// refresh copies the current values of the nn.Params into m.w, the matrices
// split across the pool's cores by panels.
func (m *decoder) refresh() {
	if m.p == nil {
		m.stale = false
		return
	}
	p, w := m.p, &m.w
	type repack struct {
		w     *kernel.Packed
		parts [][]float32
	}
	var jobs []repack
	for l, lp := range p.Layers {
		jobs = append(jobs,
			repack{w.qkv[l], [][]float32{lp.Wq, lp.Wk, lp.Wv}},
			repack{w.wo[l], [][]float32{lp.Wo}},
			repack{w.w13[l], [][]float32{lp.W1, lp.W3}},
			repack{w.w2[l], [][]float32{lp.W2}})
		copy(w.attnNorm[l], lp.AttnNorm)
		copy(w.ffnNorm[l], lp.FFNNorm)
	}
	copy(w.finalNorm, p.FinalNorm)
	jobs = append(jobs, repack{w.out, [][]float32{p.Output}})
	if w.emb != w.out {
		jobs = append(jobs, repack{w.emb, [][]float32{p.TokenEmb}})
	}
	// Pieces of up to 64 panels, taken in turn by whichever core is free.
	type piece struct{ job, q0, q1 int }
	var pieces []piece
	for i, j := range jobs {
		for q := 0; q < j.w.Panels(); q += 64 {
			pieces = append(pieces, piece{i, q, min(q+64, j.w.Panels())})
		}
	}
	var next atomic.Int64
	m.pool.run(m.pool.n, func(int) {
		for i := int(next.Add(1) - 1); i < len(pieces); i = int(next.Add(1) - 1) {
			pc := pieces[i]
			jobs[pc.job].w.RepackPanels(pc.q0, pc.q1, jobs[pc.job].parts...)
		}
	})
	m.stale = false
}

// grow makes the row buffers hold n rows and nl logit rows.
func (m *decoder) grow(n, nl int) {
	c := m.cfg
	if n > m.rows {
		m.rows = n
		m.x = make([]float32, n*c.Dim)
		m.xb = make([]float32, n*c.Dim)
		m.qkv = make([]float32, n*(c.QDim()+2*c.KVDim()))
		m.att = make([]float32, n*c.QDim())
		m.xo = make([]float32, n*c.Dim)
		m.h13 = make([]float32, n*2*c.Hidden)
		m.hb = make([]float32, n*c.Hidden)
	}
	if nl*c.Dim > len(m.head) {
		m.head = make([]float32, nl*c.Dim)
		m.logits = make([]float32, nl*c.Vocab)
	}
}

// forward pushes rows through the model and returns the logits of rows marked logits.
// It stores each row's key and value in its slot of the cache at its
// position. The logits come in row order, an (nlogits, Vocab) view valid
// until the next call. Rows of one slot must come in increasing position
// order, and every earlier position of that slot must already be in the
// cache or in this list. Tokens and positions are trusted: the Engine
// validates requests before they get here.
func (m *decoder) forward(rows []tokenRow) []float32 {
	if m.stale {
		m.refresh()
	}
	c, w := m.cfg, &m.w
	n := len(rows)
	nl := 0
	for _, r := range rows {
		if r.logits {
			nl++
		}
	}
	m.grow(n, nl)
	if n == 1 && m.pool.n > 1 && m.work >= m.parStep {
		if m.oneOff == 0 {
			return m.forwardOne(rows[0]) // batch-1 decoding: one task for the step
		}
		m.oneOff--
	}
	d, qd, kv, hid := c.Dim, c.QDim(), c.KVDim(), c.Hidden
	hd := c.HeadDim()
	s := qd + 2*kv // qkv row stride
	x, xb, qkv, att, xo := m.x[:n*d], m.xb[:n*d], m.qkv[:n*s], m.att[:n*qd], m.xo[:n*d]
	h13, hb := m.h13[:n*2*hid], m.hb[:n*hid]
	eps := float32(c.NormEps)

	for i, r := range rows {
		w.emb.Row(x[i*d:(i+1)*d], r.token) // (n, D)
	}
	for l := range c.Layers {
		// Attention sublayer.
		rmsNorm(xb, x, w.attnNorm[l], n, d, eps) // (n, D)
		m.matmul(qkv, xb, n, w.qkv[l])           // (n, QD+2KV)
		for i, r := range rows {
			row := qkv[i*s : (i+1)*s]
			if w.qkvBias != nil {
				nn.Add(row, w.qkvBias[l])
			}
			if w.qNorm != nil { // each head of the queries, then of the keys
				rmsNorm(row[:qd], row[:qd], w.qNorm[l], c.Heads, hd, eps)
				rmsNorm(row[qd:qd+kv], row[qd:qd+kv], w.kNorm[l], c.KVHeads, hd, eps)
			}
			m.rope.Forward(row[:qd+kv], r.pos) // queries and keys
			m.cache.store(l, r.slot, r.pos, row[qd:qd+kv], row[qd+kv:])
		}
		m.attendRows(rows, l, att, qkv, s)
		m.matmul(xo, att, n, w.wo[l]) // (n, D)
		nn.Add(x, xo)

		// Feed-forward sublayer: W2 · (silu(W1·xb) ⊙ W3·xb).
		rmsNorm(xb, x, w.ffnNorm[l], n, d, eps)
		m.matmul(h13, xb, n, w.w13[l]) // (n, 2H): gate, then up
		for i := range n {
			g13 := h13[i*2*hid : (i+1)*2*hid]
			nn.SwiGLU(hb[i*hid:(i+1)*hid], g13[:hid], g13[hid:]) // (n, H)
		}
		m.matmul(xo, hb, n, w.w2[l]) // (n, D)
		nn.Add(x, xo)
	}
	if nl == 0 {
		return nil
	}
	head := m.head[:nl*d]
	j := 0
	for i, r := range rows {
		if r.logits {
			rmsNorm(head[j*d:(j+1)*d], x[i*d:(i+1)*d], w.finalNorm, 1, d, eps)
			j++
		}
	}
	logits := m.logits[:nl*c.Vocab]
	m.matmul(logits, head, nl, w.out) // (nl, V)
	return logits
}

// matmul computes dst(rows, n) = a(rows, k) · Wᵀ.
// A large enough product is split by column panels across the pool's
// cores. As package kernel guarantees, each element's bits are the same
// however it is split. A q8_0 matrix's rows of a are quantised once,
// before the split.
func (m *decoder) matmul(dst, a []float32, rows int, w *kernel.Packed) {
	workers := 1
	if rows*w.K()*w.N() >= m.parMul {
		workers = min(m.pool.n, (w.Panels()+1)/2)
	}
	if workers <= 1 {
		kernel.MatMulPackedCols(dst, a, rows, w, 0, w.N())
		return
	}
	j := &m.mul
	j.dst, j.a, j.rows, j.w = dst, a, rows, w
	if j.q8 = w.DType() == kernel.Q8_0; j.q8 {
		j.act.Quantize(a, rows, w)
	}
	j.chunks = min((w.Panels()+1)/2, workers*mulChunks)
	j.next.Store(0)
	m.pool.run(workers, m.mulFn)
	j.dst, j.a, j.w = nil, nil, nil
}

// mulTask computes column ranges of m.mul until none is left.
func (m *decoder) mulTask(int) {
	j := &m.mul
	for c := int(j.next.Add(1) - 1); c < j.chunks; c = int(j.next.Add(1) - 1) {
		j0, j1 := kernel.PanelRange(j.w.Panels(), j.chunks, c, j.w.N())
		if j.q8 {
			kernel.MatMulQ8ActCols(j.dst, &j.act, j.w, j0, j1)
			continue
		}
		kernel.MatMulPackedCols(j.dst, j.a, j.rows, j.w, j0, j1)
	}
}

// parallelWork is the attention work above which a step's row-head pairs split across cores.
// The work is multiply-adds over a step. Below it the hand-off costs more
// than it saves.
const parallelWork = 1 << 15

// attendRows computes causal attention for every row of layer l.
// It writes att (n, Dim) from the queries in qkv, of row stride s. The
// row-head pairs are split into contiguous ranges of about equal work, one
// per core of m.pool. Each pair's arithmetic is the same however they are
// split.
func (m *decoder) attendRows(rows []tokenRow, l int, att, qkv []float32, s int) {
	c := m.cfg
	work := 0
	for _, r := range rows {
		work += (r.pos + 1) * c.QDim()
	}
	w := 1
	if work >= m.parWork {
		w = m.pool.n
	}
	units := len(rows) * c.Heads
	w = min(w, units)
	// Pieces of about equal work, mulChunks per core, taken in turn
	// by whichever core is free.
	pieces := min(units, w*mulChunks)
	if w == 1 {
		pieces = 1
	}
	j := &m.job
	j.rows, j.layer, j.out, j.qkv, j.stride = rows, l, att, qkv, s
	b := m.bounds[:0]
	b = append(b, 0)
	acc, u := 0, 0
	for k := 1; k < pieces; k++ {
		for u < units && acc*pieces < work*k {
			acc += (rows[u/c.Heads].pos + 1) * c.HeadDim()
			u++
		}
		b = append(b, u)
	}
	m.bounds = append(b, units)
	j.next.Store(0)
	m.pool.run(w, m.attendFn)
	j.rows, j.out, j.qkv = nil, nil, nil
}

// attendJob is the step attendTask works on, set by attendRows.
type attendJob struct {
	rows   []tokenRow
	layer  int
	out    []float32
	qkv    []float32
	stride int
	next   atomic.Int64 // the next piece of m.bounds to take
}

// attendTask computes pieces of the (row, head) pairs until none is left,
// with worker k's scratch.
func (m *decoder) attendTask(k int) {
	j := &m.job
	for p := int(j.next.Add(1) - 1); p < len(m.bounds)-1; p = int(j.next.Add(1) - 1) {
		m.attendPiece(k, m.bounds[p], m.bounds[p+1])
	}
}

// attendPiece computes the (row, head) pairs [u0, u1) of m.job.
func (m *decoder) attendPiece(k, u0, u1 int) {
	j := &m.job
	c := m.cfg
	d, hs := c.QDim(), c.Heads
	for u := u0; u < u1; {
		i, h0 := u/hs, u%hs
		h1 := min(hs, h0+u1-u)
		r := j.rows[i]
		m.attend(j.out[i*d:(i+1)*d], j.qkv[i*j.stride:i*j.stride+d], m.scores[k], j.layer, r.slot, r.pos, h0, h1)
		u += h1 - h0
	}
}

// attend computes causal attention of heads [h0, h1) of one row's queries q.
// It attends over positions [0, pos] of slot in layer l's cache and writes
// those heads of out. q and out are QDim long; sc is scratch of at least
// pos+1 values.
func (m *decoder) attend(out, q, sc []float32, l, slot, pos, h0, h1 int) {
	c := m.cfg
	hd, kvd := c.HeadDim(), c.KVDim()
	group := c.Heads / c.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	keys := m.cache.Keys(l, slot, pos+1)   // (pos+1, KV)
	vals := m.cache.Values(l, slot, pos+1) // (pos+1, KV)
	sc = sc[:pos+1]
	for h := h0; h < h1; h++ {
		ko := (h / group) * hd
		kernel.Dots(sc, q[h*hd:(h+1)*hd], keys[ko:], kvd, scale)
		// softmax(sc)·V, normalized after the sum: hd multiplies
		// instead of pos+1.
		sum, _ := kernel.Softmax(sc, 1)
		inv := 1 / sum
		o := out[h*hd : (h+1)*hd]
		kernel.Mix(o, sc, vals[ko:], kvd)
		for i := range o {
			o[i] *= inv
		}
	}
}

// rmsNorm normalises each of the n rows of x with the gain w into dst.
// x and dst are (n, d), w is (d); dst may be x.
func rmsNorm(dst, x, w []float32, n, d int, eps float32) {
	for i := range n {
		nn.RMSNorm(dst[i*d:(i+1)*d], x[i*d:(i+1)*d], w, eps)
	}
}
