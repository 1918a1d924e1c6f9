package nn

import "math"

// trainExp is e^x in float32 without the float64 round trip of math.Exp:
// the argument is reduced to x = k·ln2 + r with |r| ≤ ln2/2 (ln2 split in
// two parts for an exact product), e^r comes from a degree-7 minimax
// polynomial (the Cephes expf coefficients) and 2^k is put into the
// exponent bits. The relative error is within a few float32 ulps;
// results below the smallest normal float32 flush to 0.
func trainExp(x float32) float32 {
	switch {
	case x != x: // NaN
		return x
	case x > 88.72283:
		return float32(math.Inf(1))
	case x < -87.33654:
		return 0
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	t := x * log2e
	var k int32
	if t < 0 {
		k = int32(t - 0.5)
	} else {
		k = int32(t + 0.5)
	}
	fk := float32(k)
	r := x - fk*ln2hi - fk*ln2lo
	p := ((((1.9875691500e-4*r+1.3981999507e-3)*r+8.3334519073e-3)*r+4.1665795894e-2)*r+1.6666665459e-1)*r + 5.0000001201e-1
	e := p*r*r + r + 1
	// 2^k from the exponent bits, for k in [-126, 127]; at the ends of the
	// range k is split in two factors so that neither overflows
	switch {
	case k > 127:
		return e * 2 * math.Float32frombits(uint32(k-1+127)<<23)
	case k < -125:
		return e * math.Float32frombits(uint32(k+127+64)<<23) * math.Float32frombits(uint32(127-64)<<23)
	}
	return e * math.Float32frombits(uint32(k+127)<<23)
}
