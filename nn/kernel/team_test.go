package kernel

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestMatMulPackedOneRowSplitSameBits checks split one-row products against one core, bit for bit.
// The widths cover whole units, a part unit and a part panel. Each product
// runs many times under GOMAXPROCS 2, 1, 3 and 4, so that helpers join
// early, late or not at all.
func TestMatMulPackedOneRowSplitSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	tests := []struct{ k, n int }{
		{64, 1024},  // k·n exactly oneRowSplit: eight whole units
		{128, 1000}, // the last unit six and a half panels
		{300, 2000}, // the last unit five panels
		{768, 2048},
	}
	for _, tt := range tests {
		if tt.k*tt.n < oneRowSplit {
			t.Fatalf("k=%d n=%d is under oneRowSplit: not split", tt.k, tt.n)
		}
		w := Pack(tt.k, randMat(rng, tt.n*tt.k))
		a := randMat(rng, tt.k)
		want := make([]float32, tt.n)
		MatMulPackedCols(want, a, 1, w, 0, tt.n) // on this goroutine
		for _, procs := range []int{2, 1, 3, 4} {
			runtime.GOMAXPROCS(procs)
			name := fmt.Sprintf("k=%d n=%d GOMAXPROCS=%d", tt.k, tt.n, procs)
			got := make([]float32, tt.n)
			for range 50 {
				copy(got, randMat(rng, tt.n)) // overwritten
				MatMulPacked(got, a, 1, w)
				sameBits(t, name, got, want)
			}
		}
	}
}

// TestMatMulPackedOneRowConcurrent runs one-row products from several goroutines at once.
// One holds the team at a time and the others run on their own; each gets
// the bits of one core. Under -race it also checks the team's hand-offs.
func TestMatMulPackedOneRowConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	runtime.GOMAXPROCS(max(2, prev))
	k, n := 256, 768
	w := Pack(k, randMat(rng, n*k))
	const callers = 4
	as := make([][]float32, callers)
	wants := make([][]float32, callers)
	for c := range as {
		as[c] = randMat(rng, k)
		wants[c] = make([]float32, n)
		MatMulPackedCols(wants[c], as[c], 1, w, 0, n)
	}
	gots := make([][]float32, callers)
	var wg sync.WaitGroup
	for c := range callers {
		gots[c] = make([]float32, n)
		wg.Go(func() {
			for range 200 {
				MatMulPacked(gots[c], as[c], 1, w)
				for j := range gots[c] {
					if gots[c][j] != wants[c][j] {
						return // reported below, on the test's goroutine
					}
				}
			}
		})
	}
	wg.Wait()
	for c := range callers {
		sameBits(t, fmt.Sprintf("caller %d", c), gots[c], wants[c])
	}
}

// TestTeamParksWhenIdle checks that the helpers stop spinning once products stop.
// The deadline is far above the bounded spin; only a helper that never
// parks misses it.
func TestTeamParksWhenIdle(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	runtime.GOMAXPROCS(3)
	k, n := 128, 1024
	w := Pack(k, randMat(rng, n*k))
	a, dst := randMat(rng, k), make([]float32, n)
	for range 20 {
		MatMulPacked(dst, a, 1, w)
	}
	if len(rowTeam.helpers) < 2 {
		t.Fatalf("team has %d helpers after products on 3 cores, want at least 2", len(rowTeam.helpers))
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, h := range rowTeam.helpers {
		for !h.parked.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("helper %d still not parked 10 s after the last product", h.k)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestTeamBacksOff checks that a team backing off leaves products to their callers.
// matVec then reports false and writes nothing, until the count runs out.
func TestTeamBacksOff(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 38))
	k, n := 128, 1024
	w := Pack(k, randMat(rng, n*k))
	a := randMat(rng, k)
	want := make([]float32, n)
	MatMulPackedCols(want, a, 1, w, 0, n)
	tm := &team{idle: make(chan struct{}, 1), backoff: 2}
	got := make([]float32, n)
	for i, split := range []bool{false, false, true} {
		clear(got)
		if ok := tm.matVec(got, a, w, 2); ok != split {
			t.Fatalf("product %d: matVec = %v, want %v", i, ok, split)
		}
		if !split {
			sameBits(t, fmt.Sprintf("product %d, not run", i), got, make([]float32, n))
			continue
		}
		sameBits(t, fmt.Sprintf("product %d", i), got, want)
	}
}
