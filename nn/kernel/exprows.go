package kernel

// expRowsFunc is ExpSum's vector part on the rows of a causal block.
// Row r holds n0+r values at p[r·ld:]; the first (n0+r) &^ 7 become
// e^(scale·x − shift[r]) and sums[r] their sum, as activeExp gives them.
type expRowsFunc func(p []float32, ld, n0, rows int, scale float32, shift, sums []float32)

// activeExpRows is the AVX-512 loop over rows, nil where ExpSumRows calls ExpSum per row.
var activeExpRows = archExpRows

// ExpSumRows runs ExpSum in place on each row of a causal block, one call for all.
// Row r, the n0+r values at p[r·ld:], becomes e^(scale·x − shift[r]), and
// sums[r] gets their sum: bit for bit what ExpSum(row, row, scale,
// shift[r]) gives. So attention's rows pay the vector code's setup once
// per block instead of once per row. n0 must be at least 1.
func ExpSumRows(p []float32, ld, n0, rows int, scale float32, shift, sums []float32) {
	if rows <= 0 {
		return
	}
	if n0 < 1 || ld < n0+rows-1 {
		panic("kernel.ExpSumRows: empty first row, or rows longer than their stride") // a programming error
	}
	shift, sums = shift[:rows], sums[:rows]
	if activeExpRows == nil {
		for r := range rows {
			row := p[r*ld : r*ld+n0+r]
			sums[r] = ExpSum(row, row, scale, shift[r])
		}
		return
	}
	activeExpRows(p, ld, n0, rows, scale, shift, sums)
	for r := range rows {
		n := n0 + r
		head := n &^ 7
		row := p[r*ld+head : r*ld+n]
		sums[r] = expTail(row, row, scale, shift[r], sums[r])
	}
}
