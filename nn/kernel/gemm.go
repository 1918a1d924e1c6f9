package kernel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The blocked product. Every entry point reduces to
//
//	dst(m,n) [+]= A(m,k) · B(k,n)
//
// where A and B are read through an op that says how they are stored. A is
// packed into panels of mr rows and B into panels of nr columns, both
// zero-padded to full panels. A micro-kernel computes one mr×nr tile of dst
// at a time, holding it in registers across a block of k.
//
// Determinism: each element of dst is a chain of multiply-adds over k in
// increasing order. It starts from zero, or from dst for the accumulating
// product, and the running sum is stored as float32 between k blocks. Edge
// tiles run the same full-tile kernel on zero-padded panels. So an
// element's bits depend only on its row of A, its column of B and k. They
// do not depend on m, n, the tile, or how the work is split.

const (
	mr = 6   // rows of a micro-tile
	nr = 16  // columns of a micro-tile
	kc = 256 // k block: an A panel (kc·mr) and a B panel (kc·nr) stay in L1
	mc = 96  // rows of an A block (mc·kc floats, in L2)
	nc = 512 // columns of a B block (kc·nc floats, in L2/L3)
)

// microKernel computes c(mr,nr) = [c +] a·b over k steps, c with row stride ldc.
// Step p reads mr floats of a at p·lda and nr floats of b at p·ldb. A
// packed panel has lda = mr and ldb = nr; a panel read in place has the
// matrix's row stride.
type microKernel func(k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool)

// pairKernel is a micro-kernel for a 6×32 tile over two adjacent panels of B.
// b0 and b1 share the step ldb. Its elements must round exactly as
// microKernel's do, one fused multiply-add per step, so that which kernel
// computes a tile does not change its bits.
type pairKernel func(k int, a []float32, lda int, b0, b1 []float32, ldb int, c []float32, ldc int, acc bool)

// packA6Func packs the first kl steps of a full panel of 6 rows of a row-major A.
// kl is a multiple of 8 and lda the row stride: dst[p·6+r] = a[r·lda+p].
type packA6Func func(dst, a []float32, lda, kl int)

// activePackA6 is archPackA6; nil leaves packA's loop to do it all.
var activePackA6 packA6Func

// packFunc packs a full panel of 16 rows of b (stride ld) over kl steps:
// dst[p·16+r] = src[r·ld+p].
type packFunc func(dst, src []float32, ld, kl int)

// archKernel and archPackT16 are the fastest micro-kernel and packer this machine supports.
// Package variable initialization chooses them, before any init function,
// through archImpl in kern_amd64.go or kern_generic.go. Under the build tag
// purego the amd64 files are left out and kern_generic.go's pure-Go kernel
// is the only one.
var archKernel, archKernel2, archPackT16, archName = archImpl()

var (
	active        microKernel
	activeKernel2 pairKernel
	activePackT16 packFunc
	activeName    string
)

func init() {
	active, activeKernel2, activePackT16, activeName = archKernel, archKernel2, archPackT16, archName
	if archExp != nil {
		activeExp = archExp
	}
	activeMax8 = archMax8
	if archAdamW != nil {
		activeAdamW = archAdamW
	}
	activePackA6 = archPackA6
	if archSwiGLU != nil {
		activeSwiGLU, activeSwiGLUBack = archSwiGLU, archSwiGLUBack
	}
	if activeName != "go" {
		activeGemv1, activeGemv4 = archGemv1, archGemv4
	}
	if activeName == "avx512" {
		activeGemv8 = archGemv8
		activeDots8, activeMix = archDots8, archMix
	}
}

// Impl names the micro-kernel the entry points use: "avx512", "avx2" or "go".
// "avx512" runs AVX-512 on pairs of panels and AVX2 on the rest.
//
// Each entry point packs its operands into cache-sized panels, or reads them
// in place where their layout fits, and runs a register-blocked
// micro-kernel over them. On amd64 that is assembly: 6×32 tiles with
// AVX-512 where the CPU and the operating system support it, else 6×16 tiles
// with AVX2 and FMA. CPUID and XGETBV detect this at run time; XGETBV checks
// that the OS saves the vector state. Elsewhere a portable pure-Go kernel
// runs. The build tag purego leaves the assembly out and selects the pure-Go
// kernels everywhere. Products above parallelFlops are split across
// runtime.GOMAXPROCS(0) goroutines; smaller ones run on the caller's.
func Impl() string { return activeName }

type op uint8

const (
	opNT op = iota // A = a(m,k),  B = b(n,k)ᵀ
	opNN           // A = a(m,k),  B = b(k,n)
	opTN           // A = a(k,m)ᵀ, B = b(k,n)
)

// problem is one product, possibly restricted to a block of dst.
type problem struct {
	op      op
	dst     []float32
	a, b    []float32
	m, k, n int
	acc     bool // accumulate into dst instead of overwriting
	kern    microKernel
	kern2   pairKernel // nil: pairs of panels go through kern one by one
	// packT16 packs a full panel of B for opNT; nil means goPackT16.
	packT16 packFunc
	// packed, when set, is B already in panels (a Packed's data, opNT):
	// panel q at q·16·k, read in place.
	packed []float32
}

// inPlaceB reports whether the kernel reads full panels of B straight from b.
// b is a row-major (k,n) matrix. Reading in place saves the copy but walks
// b with a stride of n floats. At 4 KiB and above, n >= 1024, every step of
// a panel falls in the same few cache sets and packing wins.
func (pr *problem) inPlaceB() bool { return pr.op != opNT && pr.n < 1024 }

// inPlaceA is inPlaceB for A stored (k,m) in the transposed product.
func (pr *problem) inPlaceA() bool { return pr.op == opTN && pr.m < 1024 }

// packA copies rows [i0,i0+rows) and k range [p0,p0+kl) of A into panels of mr rows.
// Panel q holds, for each p, the mr values A[i0+q·mr+r][p0+p]; rows past the
// end are zero.
func (pr *problem) packA(buf []float32, i0, rows, p0, kl int) {
	for q := 0; q*mr < rows; q++ {
		panel := buf[q*mr*kl : (q+1)*mr*kl]
		rq := min(mr, rows-q*mr)
		ib := i0 + q*mr
		switch pr.op {
		case opNT, opNN: // A row-major (m,k)
			if rq == mr {
				// A full panel: write it in order, six values per step
				// from the six rows side by side.
				off := ib*pr.k + p0
				p8 := 0
				if activePackA6 != nil && kl >= 8 {
					p8 = kl &^ 7
					activePackA6(panel, pr.a[off:], pr.k, p8)
				}
				// Every row sliced to length kl, so that the loop
				// needs no bounds checks.
				a0 := pr.a[off:][:kl]
				a1 := pr.a[off+pr.k:][:kl]
				a2 := pr.a[off+2*pr.k:][:kl]
				a3 := pr.a[off+3*pr.k:][:kl]
				a4 := pr.a[off+4*pr.k:][:kl]
				a5 := pr.a[off+5*pr.k:][:kl]
				d := panel[:mr*kl]
				for p := p8; p < kl; p++ {
					q := (*[mr]float32)(d[mr*p:])
					q[0], q[1], q[2], q[3], q[4], q[5] = a0[p], a1[p], a2[p], a3[p], a4[p], a5[p]
				}
				continue
			}
			for r := 0; r < mr; r++ {
				if r >= rq {
					for p := 0; p < kl; p++ {
						panel[p*mr+r] = 0
					}
					continue
				}
				row := pr.a[(ib+r)*pr.k+p0 : (ib+r)*pr.k+p0+kl]
				for p, v := range row {
					panel[p*mr+r] = v
				}
			}
		case opTN: // A stored (k,m)
			if rq == mr {
				if pr.inPlaceA() {
					continue
				}
				for p := 0; p < kl; p++ {
					off := (p0+p)*pr.m + ib
					*(*[mr]float32)(panel[p*mr:]) = *(*[mr]float32)(pr.a[off:])
				}
				continue
			}
			for p := 0; p < kl; p++ {
				src := pr.a[(p0+p)*pr.m+ib : (p0+p)*pr.m+ib+rq]
				dst := panel[p*mr : p*mr+mr]
				copy(dst, src)
				clear(dst[rq:])
			}
		}
	}
}

// packB copies columns [j0,j0+cols) and k range [p0,p0+kl) of B into panels
// of nr columns, columns past the end zero.
func (pr *problem) packB(buf []float32, j0, cols, p0, kl int) {
	if pr.packed != nil {
		return
	}
	for q := 0; q*nr < cols; q++ {
		panel := buf[q*nr*kl : (q+1)*nr*kl]
		cq := min(nr, cols-q*nr)
		jb := j0 + q*nr
		switch pr.op {
		case opNT: // b stored (n,k): column j of B is row j of b
			if cq == nr {
				pack := pr.packT16
				if pack == nil {
					pack = goPackT16
				}
				pack(panel, pr.b[jb*pr.k+p0:], pr.k, kl)
				continue
			}
			for c := 0; c < nr; c++ {
				if c >= cq {
					for p := 0; p < kl; p++ {
						panel[p*nr+c] = 0
					}
					continue
				}
				row := pr.b[(jb+c)*pr.k+p0 : (jb+c)*pr.k+p0+kl]
				for p, v := range row {
					panel[p*nr+c] = v
				}
			}
		case opNN, opTN: // b stored (k,n)
			if cq == nr {
				if pr.inPlaceB() {
					continue
				}
				for p := 0; p < kl; p++ {
					off := (p0+p)*pr.n + jb
					*(*[nr]float32)(panel[p*nr:]) = *(*[nr]float32)(pr.b[off:])
				}
				continue
			}
			for p := 0; p < kl; p++ {
				src := pr.b[(p0+p)*pr.n+jb : (p0+p)*pr.n+jb+cq]
				dst := panel[p*nr : p*nr+nr]
				copy(dst, src)
				clear(dst[cq:])
			}
		}
	}
}

// goPackT16 packs a full panel of 16 rows of b (stride ld) over kl steps:
// dst[p·16+r] = src[r·ld+p]. It walks the output in order, reading the 16
// rows side by side.
func goPackT16(dst, src []float32, ld, kl int) {
	_ = dst[kl*nr-1]
	_ = src[(nr-1)*ld+kl-1]
	for p := 0; p < kl; p++ {
		out := dst[p*nr : p*nr+nr : p*nr+nr]
		for r := range out {
			out[r] = src[r*ld+p]
		}
	}
}

// packBufs are the per-worker packing buffers, pooled so that the steady
// state allocates nothing.
type packBufs struct {
	a    [mc * kc]float32
	b    [kc * nc]float32
	tile [mr * nr]float32 // scratch for edge tiles
}

var bufPool = sync.Pool{New: func() any { return new(packBufs) }}

// run computes the block rows [i0,i1) × columns [j0,j1) of dst serially.
func (pr *problem) run(i0, i1, j0, j1 int) {
	if i0 >= i1 || j0 >= j1 {
		return
	}
	if pr.k == 0 {
		if !pr.acc {
			for i := i0; i < i1; i++ {
				clear(pr.dst[i*pr.n+j0 : i*pr.n+j1])
			}
		}
		return
	}
	bufs := bufPool.Get().(*packBufs)
	defer bufPool.Put(bufs)
	tile := bufs.tile[:]
	ldc := pr.n
	for jc := j0; jc < j1; jc += nc {
		ncl := min(nc, j1-jc)
		for pc := 0; pc < pr.k; pc += kc {
			kcl := min(kc, pr.k-pc)
			acc := pr.acc || pc > 0
			pr.packB(bufs.b[:], jc, ncl, pc, kcl)
			for ic := i0; ic < i1; ic += mc {
				mcl := min(mc, i1-ic)
				pr.packA(bufs.a[:], ic, mcl, pc, kcl)
				for jr := 0; jr < ncl; jr += nr {
					cols := min(nr, ncl-jr)
					bp, ldb := bufs.b[jr*kcl:(jr+nr)*kcl], nr
					if cols == nr && pr.inPlaceB() {
						// A full panel of a row-major (k,n) B is already
						// 16 contiguous floats per step.
						bp, ldb = pr.b[pc*pr.n+jc+jr:], pr.n
					}
					if pr.packed != nil {
						bp = pr.packed[(jc+jr)*pr.k+pc*nr:]
					}
					// Two full panels side by side: the wide kernel, if any,
					// for the full rows.
					pair := pr.kern2 != nil && jr+2*nr <= ncl
					var bp1 []float32
					if pair {
						bp1 = bufs.b[(jr+nr)*kcl : (jr+2*nr)*kcl]
						if pr.inPlaceB() {
							bp1 = pr.b[pc*pr.n+jc+jr+nr:]
						}
						if pr.packed != nil {
							bp1 = pr.packed[(jc+jr+nr)*pr.k+pc*nr:]
						}
					}
					for ir := 0; ir < mcl; ir += mr {
						rows := min(mr, mcl-ir)
						ap, lda := bufs.a[ir*kcl:(ir+mr)*kcl], mr
						if rows == mr && pr.inPlaceA() {
							ap, lda = pr.a[pc*pr.m+ic+ir:], pr.m
						}
						off := (ic+ir)*ldc + jc + jr
						if pair && rows == mr {
							pr.kern2(kcl, ap, lda, bp, bp1, ldb, pr.dst[off:], ldc, acc)
							continue
						}
						if pair {
							pr.tile(kcl, ap, lda, bp, ldb, off, rows, nr, acc, tile)
							pr.tile(kcl, ap, lda, bp1, ldb, off+nr, rows, nr, acc, tile)
							continue
						}
						if rows == mr && cols == nr {
							pr.kern(kcl, ap, lda, bp, ldb, pr.dst[off:], ldc, acc)
							continue
						}
						pr.tile(kcl, ap, lda, bp, ldb, off, rows, cols, acc, tile)
					}
					if pair {
						jr += nr // the second panel is done
					}
				}
			}
		}
	}
}

// tile computes an edge tile by running the full-tile kernel on the scratch tile.
// The edge tile is rows×cols of dst at off, fewer than mr×nr.
func (pr *problem) tile(kcl int, ap []float32, lda int, bp []float32, ldb, off, rows, cols int, acc bool, tile []float32) {
	ldc := pr.n
	if acc {
		for r := 0; r < rows; r++ {
			copy(tile[r*nr:r*nr+cols], pr.dst[off+r*ldc:off+r*ldc+cols])
		}
	}
	pr.kern(kcl, ap, lda, bp, ldb, tile, nr, acc)
	for r := 0; r < rows; r++ {
		copy(pr.dst[off+r*ldc:off+r*ldc+cols], tile[r*nr:r*nr+cols])
	}
}

// parallelFlops is the size, 2·m·k·n, below which a product runs on the caller.
// Under it, handing work to other cores costs more than it saves.
const parallelFlops = 1 << 22

// do computes the whole product with up to workers goroutines (the caller
// included), serially when it is small.
func (pr *problem) do(workers int) {
	if 2*pr.m*pr.k*pr.n < parallelFlops {
		workers = 1
	}
	pr.split(workers)
}

// chunksPerWorker is how many pieces each goroutine takes on average.
// More pieces than goroutines, handed out on demand, keep all of them busy
// to the end when one runs slower, as when another process took its core.
// Each piece repacks its share of the other operand, a cost of about
// 1/(2·rows) of its work.
const chunksPerWorker = 4

// split runs the product on up to workers goroutines whatever its size.
// The product is cut into contiguous blocks of whole mr panels of rows when
// m is large enough, else of whole nr panels of columns. The goroutines take
// blocks from a shared counter until none is left.
func (pr *problem) split(workers int) {
	rowPanels := (pr.m + mr - 1) / mr
	colPanels := (pr.n + nr - 1) / nr
	byRows := rowPanels >= 2*workers || rowPanels >= colPanels
	panels := colPanels
	if byRows {
		panels = rowPanels
	}
	workers = min(workers, panels)
	if workers <= 1 {
		pr.run(0, pr.m, 0, pr.n)
		return
	}
	chunks := min(panels, workers*chunksPerWorker)
	// A copy, so that only this parallel branch moves the problem to the
	// heap and the serial path allocates nothing.
	shared := *pr
	var next atomic.Int64
	work := func() {
		for c := int(next.Add(1) - 1); c < chunks; c = int(next.Add(1) - 1) {
			lo, hi := c*panels/chunks, (c+1)*panels/chunks
			if byRows {
				shared.run(lo*mr, min(hi*mr, shared.m), 0, shared.n)
			} else {
				shared.run(0, shared.m, lo*nr, min(hi*nr, shared.n))
			}
		}
	}
	var wg sync.WaitGroup
	wg.Add(workers - 1)
	for w := 1; w < workers; w++ {
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}

func defaultWorkers() int { return runtime.GOMAXPROCS(0) }

// goKernel is the portable micro-kernel: the same tile and the same
// summation order as the assembly, in plain Go. It works on 2×4 sub-blocks
// so that the eight running sums stay in registers. The explicit float32
// conversion of each product forbids the compiler from fusing the
// multiply-add, so that every element rounds the same way in every
// sub-block.
func goKernel(k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	_ = c[(mr-1)*ldc+nr-1]
	if k > 0 {
		_ = a[(k-1)*lda+mr-1]
		_ = b[(k-1)*ldb+nr-1]
	}
	for r := 0; r < mr; r += 2 {
		c0 := c[r*ldc : r*ldc+nr]
		c1 := c[(r+1)*ldc : (r+1)*ldc+nr]
		for j := 0; j < nr; j += 4 {
			var s00, s01, s02, s03, s10, s11, s12, s13 float32
			if acc {
				s00, s01, s02, s03 = c0[j], c0[j+1], c0[j+2], c0[j+3]
				s10, s11, s12, s13 = c1[j], c1[j+1], c1[j+2], c1[j+3]
			}
			ai, bi := r, j
			for p := 0; p < k; p++ {
				av := a[ai : ai+2 : ai+2]
				bv := b[bi : bi+4 : bi+4]
				a0, a1 := av[0], av[1]
				b0, b1, b2, b3 := bv[0], bv[1], bv[2], bv[3]
				s00 += float32(a0 * b0)
				s01 += float32(a0 * b1)
				s02 += float32(a0 * b2)
				s03 += float32(a0 * b3)
				s10 += float32(a1 * b0)
				s11 += float32(a1 * b1)
				s12 += float32(a1 * b2)
				s13 += float32(a1 * b3)
				ai += lda
				bi += ldb
			}
			c0[j], c0[j+1], c0[j+2], c0[j+3] = s00, s01, s02, s03
			c1[j], c1[j+1], c1[j+2], c1[j+3] = s10, s11, s12, s13
		}
	}
}
