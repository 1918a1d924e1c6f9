package kernel

// ExpSumRows runs ExpSum in place on each row of a causal block, one call for all.
// Row r, the n0+r values at p[r·ld:], becomes e^(scale·x − shift[r]), and
// sums[r] gets their sum: bit for bit what ExpSum(row, row, scale,
// shift[r]) gives. So attention's rows pay the vector code's setup and a
// call once per block instead of once per row. n0 must be at least 1.
func ExpSumRows(p []float32, ld, n0, rows int, scale float32, shift, sums []float32) {
	if rows <= 0 {
		return
	}
	if n0 < 1 || ld < n0+rows-1 {
		panic("kernel.ExpSumRows: empty first row, or rows longer than their stride") // a programming error
	}
	shift, sums = shift[:rows], sums[:rows]
	if !haveExpRows {
		for r := range rows {
			row := p[r*ld : r*ld+n0+r]
			sums[r] = ExpSum(row, row, scale, shift[r])
		}
		return
	}
	const chunk = 64
	var redo [chunk]uint16 // per row, the last values left to Exp
	for r0 := 0; r0 < rows; r0 += chunk {
		k := min(chunk, rows-r0)
		expRows(p[r0*ld:], ld, n0+r0, k, scale, shift[r0:r0+k], sums[r0:r0+k], redo[:k])
		for r, bits := range redo[:k] {
			if bits == 0 {
				continue
			}
			// Values that take another branch of Exp: the row's head and
			// its other last values are done, these are not.
			i := r0 + r
			n := n0 + i
			head := n &^ 7
			row := p[i*ld+head : i*ld+n]
			sum := sums[i]
			for j, x := range row {
				if bits&(1<<j) != 0 {
					row[j] = Exp(scale*x - shift[i])
				}
				sum += row[j]
			}
			sums[i] = sum
		}
	}
}
