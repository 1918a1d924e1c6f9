package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// withImpl makes the entry points use im (and its panel-vector products)
// until the returned function restores the previous choice. Tests in this
// package do not run in parallel, so swapping the globals is safe.
func withImpl(im impl) (restore func()) {
	k, k2, p, g1, g4, g8 := active, activeKernel2, activePackT16, activeGemv1, activeGemv4, activeGemv8
	active, activeKernel2, activePackT16 = im.kern, im.kern2, im.pack
	activeGemv1, activeGemv4, activeGemv8 = goGemv1, nil, nil
	if im.name != "go" {
		activeGemv1, activeGemv4 = archGemv1, archGemv4
	}
	if im.kern2 != nil { // the AVX-512 kernels
		activeGemv8 = archGemv8
	}
	return func() {
		active, activeKernel2, activePackT16, activeGemv1, activeGemv4, activeGemv8 = k, k2, p, g1, g4, g8
	}
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: dst[%d] = %g, want %g as MatMulNT gives", what, i, got[i], want[i])
		}
	}
}

// TestMatMulPackedSameBitsAsNT checks packed products against MatMulNT, bit for bit.
// It runs them whole and by column ranges, vector and matrix, for every
// kernel this machine runs.
func TestMatMulPackedSameBitsAsNT(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, im := range impls() {
		restore := withImpl(im)
		for _, k := range []int{1, 7, 64, 300} {
			for _, rows := range [][]int{{1}, {16}, {17}, {40, 24}, {33, 5, 90}, {290}} {
				n := 0
				var parts [][]float32
				for _, r := range rows {
					parts = append(parts, randMat(rng, r*k))
					n += r
				}
				b := make([]float32, 0, n*k)
				for _, p := range parts {
					b = append(b, p...)
				}
				w := Pack(k, parts...)
				if w.N() != n || w.K() != k {
					t.Fatalf("Pack shape (%d,%d), want (%d,%d)", w.N(), w.K(), n, k)
				}
				for _, m := range []int{1, 2, 6, 13, 31, rowsInPlace, rowsInPlace + 1} { // every tile of the row kernels, and past them
					name := fmt.Sprintf("%s m=%d k=%d rows=%v", im.name, m, k, rows)
					a := randMat(rng, m*k)
					want := make([]float32, m*n)
					MatMulNT(want, a, b, m, k, n)
					got := randMat(rng, m*n) // overwritten
					MatMulPacked(got, a, m, w)
					sameBits(t, name, got, want)
					got = randMat(rng, m*n)
					for g := 0; g < 3; g++ {
						j0, j1 := PanelRange(w.Panels(), 3, g, n)
						MatMulPackedCols(got, a, m, w, j0, j1)
					}
					sameBits(t, name+" in three column ranges", got, want)
				}
				row := make([]float32, k)
				for _, j := range []int{0, n / 2, n - 1} {
					w.Row(row, j)
					sameBits(t, fmt.Sprintf("row %d", j), row, b[j*k:(j+1)*k])
				}
			}
		}
		restore()
	}
}

// TestRepackFollowsChanges checks that Repack brings a Packed up to date.
// It repacks whole and by panel ranges. A product before Repack still sees
// the old values, since a Packed is a copy.
func TestRepackFollowsChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	k, n := 40, 70
	b := randMat(rng, n*k)
	w := Pack(k, b[:30*k], b[30*k:])
	a := randMat(rng, k)
	before := make([]float32, n)
	MatMulPacked(before, a, 1, w)
	for i := range b {
		b[i] = float32(rng.NormFloat64())
	}
	stale := make([]float32, n)
	MatMulPacked(stale, a, 1, w)
	sameBits(t, "before Repack", stale, before)
	want := make([]float32, n)
	MatMulNT(want, a, b, 1, k, n)
	w.RepackPanels(0, 2, b[:30*k], b[30*k:])
	w.RepackPanels(2, w.Panels(), b[:30*k], b[30*k:])
	got := make([]float32, n)
	MatMulPacked(got, a, 1, w)
	sameBits(t, "after Repack", got, want)
}

// TestMatMulPackedAcrossGOMAXPROCS checks split products under GOMAXPROCS 1, 2 and 3.
// A vector product split by columns and a matrix one split by rows give
// the same bits under each.
func TestMatMulPackedAcrossGOMAXPROCS(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	k, n := 288, 4000 // 2·k·n above parallelFlops for one row
	b := randMat(rng, n*k)
	w := Pack(k, b)
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for _, m := range []int{1, 9} {
		a := randMat(rng, m*k)
		want := make([]float32, m*n)
		MatMulNT(want, a, b, m, k, n)
		for _, procs := range []int{1, 2, 3} {
			runtime.GOMAXPROCS(procs)
			got := make([]float32, m*n)
			MatMulPacked(got, a, m, w)
			sameBits(t, fmt.Sprintf("m=%d GOMAXPROCS=%d", m, procs), got, want)
		}
	}
}

func TestPackedShortSlicePanics(t *testing.T) {
	w := Pack(3, make([]float32, 12))
	tests := []struct {
		name string
		call func()
	}{
		{"short dst", func() { MatMulPacked(make([]float32, 3), make([]float32, 3), 1, w) }},
		{"short a", func() { MatMulPacked(make([]float32, 4), make([]float32, 2), 1, w) }},
		{"ragged range", func() { MatMulPackedCols(make([]float32, 4), make([]float32, 3), 1, w, 1, 4) }},
		{"wrong repack", func() { w.Repack(make([]float32, 9)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			tt.call()
		})
	}
}
