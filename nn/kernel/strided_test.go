package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestMatMulStridedSameBits checks the strided products against the blocked
// ones bit for bit: A read in place and transposed, B row-major and packed
// by PackPanels, overwriting and accumulating, over row counts around the
// kernel's 8, 4, 2 and 1 and k past the blocked kernel's k block.
func TestMatMulStridedSameBits(t *testing.T) {
	if !HaveStrided() {
		t.Skip("no strided kernel on this machine")
	}
	rng := rand.New(rand.NewPCG(41, 42))
	for _, m := range []int{1, 2, 3, 7, 8, 13, 32} {
		for _, k := range []int{0, 1, 16, 33, 300} {
			for _, n := range []int{16, 48} {
				t.Run(fmt.Sprintf("m=%d/k=%d/n=%d", m, k, n), func(t *testing.T) {
					const pad = 5 // extra columns, so that strides differ from widths
					// NN: A (m,k) with row stride k+pad, B (k,n) with row stride n+pad.
					a := randMat(rng, m*(k+pad))
					b := randMat(rng, k*(n+pad))
					aDense, bDense := make([]float32, m*k), make([]float32, k*n)
					for i := range m {
						copy(aDense[i*k:(i+1)*k], a[i*(k+pad):])
					}
					for p := range k {
						copy(bDense[p*n:(p+1)*n], b[p*(n+pad):])
					}
					want := make([]float32, m*n)
					MatMulNN(want, aDense, bDense, m, k, n)
					got := make([]float32, m*(n+pad))
					if !MatMulStrided(got, n+pad, a, k+pad, 1, b, n+pad, nr, m, k, n, false) {
						t.Fatal("MatMulStrided reported no kernel")
					}
					sameBits(t, "NN", dense(got, m, n, n+pad), want)

					// TN with accumulation: A stored (k, m), read transposed.
					at := make([]float32, k*m)
					for i := range m {
						for p := range k {
							at[p*m+i] = aDense[i*k+p]
						}
					}
					dst0 := randMat(rng, m*n)
					want = append([]float32(nil), dst0...)
					MatMulTNAcc(want, at, bDense, m, k, n)
					got = append([]float32(nil), dst0...)
					MatMulStrided(got, n, at, 1, m, bDense, n, nr, m, k, n, true)
					sameBits(t, "TN", got, want)

					// NT: B given as bᵀ (n, k) with row stride k+pad, packed.
					bt := randMat(rng, n*(k+pad))
					btDense := make([]float32, n*k)
					for j := range n {
						copy(btDense[j*k:(j+1)*k], bt[j*(k+pad):])
					}
					want = make([]float32, m*n)
					MatMulNT(want, aDense, btDense, m, k, n)
					for _, rows := range []int{n, n - 3} { // a partial last panel is zero-padded
						panels := make([]float32, n*k)
						PackPanels(panels, bt, rows, k, k+pad)
						got = make([]float32, m*n)
						MatMulStrided(got, n, a, k+pad, 1, panels, nr, nr*k, m, k, n, false)
						if rows < n {
							w := append([]float32(nil), want...)
							for i := range m {
								clear(w[i*n+rows : (i+1)*n])
							}
							sameBits(t, "NT partial", got, w)
							continue
						}
						sameBits(t, "NT", got, want)
					}
				})
			}
		}
	}
}

// dense copies the (m, n) matrix of s, row stride ld, into a new slice.
func dense(s []float32, m, n, ld int) []float32 {
	out := make([]float32, m*n)
	for i := range m {
		copy(out[i*n:(i+1)*n], s[i*ld:])
	}
	return out
}
