package kernel

// Rotate turns the adjacent pairs of every row of x, as rotary position embeddings do.
// x holds rows of len(c) values; c and s, of one length, give each
// pair's factors, already laid out per value:
//
//	x'[2i]   = x[2i]·c[2i]     + x[2i+1]·s[2i]
//	x'[2i+1] = x[2i+1]·c[2i+1] + x[2i]·s[2i+1]
//
// With c = (cos a, cos a) and s = (−sin a, sin a) for each pair this is
// the turn by a; with s negated, the turn by −a. Each product and the sum
// round on their own, so the result has the bits of the plain scalar
// formulas x·cos − y·sin and x·sin + y·cos. With AVX-512, and a row
// length that is a multiple of 16, sixteen values run at a time.
func Rotate(x, c, s []float32) {
	w := len(c)
	if w == 0 || len(x) == 0 {
		return
	}
	n := len(x) / w
	s = s[:w]
	if archRotate != nil && w%16 == 0 {
		archRotate(x, c, s, n, w)
		return
	}
	for r := range n {
		row := x[r*w : (r+1)*w]
		for i := 0; i+1 < w; i += 2 {
			a, b := row[i], row[i+1]
			// The conversions round each product on its own, so
			// that no compiler fuses them.
			row[i] = float32(a*c[i]) + float32(b*s[i])
			row[i+1] = float32(b*c[i+1]) + float32(a*s[i+1])
		}
	}
}
