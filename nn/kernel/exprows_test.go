package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpSumRowsSameBits checks ExpSumRows against ExpSum row by row, bit
// for bit, in values and sums, for blocks whose rows cross the vector
// code's steps of 8 and 16 and the kernel's chunk of 64 rows. Some values
// take Exp's other branches: NaN, above expHi, 2^k below the normal
// exponents.
func TestExpSumRowsSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	special := []float32{float32(math.NaN()), 89, -86.9, -87.2, -87.3, -100, float32(math.Inf(1))}
	for _, scale := range []float32{0.25, 1} {
		for _, tc := range []struct{ n0, rows int }{{1, 1}, {1, 32}, {33, 32}, {7, 3}, {15, 20}, {200, 5}, {1, 70}} {
			t.Run(fmt.Sprintf("scale=%g/n0=%d/rows=%d", scale, tc.n0, tc.rows), func(t *testing.T) {
				ld := tc.n0 + tc.rows + 3
				p := randMat(rng, tc.rows*ld)
				for i := range p {
					p[i] *= 20
					if rng.IntN(10) == 0 {
						p[i] = special[rng.IntN(len(special))]
					}
				}
				shift, sums := make([]float32, tc.rows), make([]float32, tc.rows)
				for r := range shift {
					if r%2 == 1 { // even rows keep the special values as they are
						shift[r] = float32(rng.NormFloat64() * 5)
					}
				}
				want := append([]float32(nil), p...)
				wantSums := make([]float32, tc.rows)
				for r := range tc.rows {
					row := want[r*ld : r*ld+tc.n0+r]
					wantSums[r] = ExpSum(row, row, scale, shift[r])
				}
				ExpSumRows(p, ld, tc.n0, tc.rows, scale, shift, sums)
				for i := range want {
					if math.Float32bits(p[i]) != math.Float32bits(want[i]) {
						t.Fatalf("p[%d] = %v, want %v bit for bit", i, p[i], want[i])
					}
				}
				for r := range wantSums {
					if math.Float32bits(sums[r]) != math.Float32bits(wantSums[r]) {
						t.Fatalf("sum of row %d = %v, want %v bit for bit", r, sums[r], wantSums[r])
					}
				}
			})
		}
	}
}
