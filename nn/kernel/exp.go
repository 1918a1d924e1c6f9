package kernel

import "math"

// expFunc sets dst[i] = e^(scale·src[i] − shift) for the first n and returns their sum.
// n is a multiple of 8.
type expFunc func(dst, src []float32, n int, scale, shift float32) float32

// activeExp is the exponential ExpSum uses, chosen with the matrix kernel
// (gemm.go's init).
var activeExp expFunc = goExpBlock

// ExpSum sets dst[i] = e^(scale·src[i] − shift) for every i and returns their sum.
// The sum is accumulated in float32. dst may be src itself; it must be at
// least as long as src. Each result's relative error is within a few
// float32 ulps. Arguments below −87.3, the smallest normal float32, give 0;
// NaN gives NaN. It is the softmax and SiLU exponential of training and
// inference, eight lanes at a time on amd64 with AVX2 and FMA. The last
// len mod 8 values have Exp's bits and are added last, in order; with
// AVX-512 one masked step computes them.
func ExpSum(dst, src []float32, scale, shift float32) float32 {
	n := len(src)
	dst = dst[:n]
	head := n &^ 7
	var sum float32
	if head > 0 {
		sum = activeExp(dst, src, head, scale, shift)
	}
	return expTail(dst[head:], src[head:], scale, shift, sum)
}

// goExpBlock is the portable expFunc, lane by lane in the order the
// vector code adds them.
func goExpBlock(dst, src []float32, n int, scale, shift float32) float32 {
	var lanes [8]float32
	for i := 0; i < n; i += 8 {
		for l := range 8 {
			e := Exp(scale*src[i+l] - shift)
			dst[i+l] = e
			lanes[l] += e
		}
	}
	return ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]))
}

// Exp is e^x in float32 without the float64 round trip of math.Exp.
// The argument is reduced to x = k·ln2 + r with |r| ≤ ln2/2; ln2 is split in
// two parts for an exact product. e^r comes from a degree-7 minimax
// polynomial with the Cephes expf coefficients, and 2^k goes into the
// exponent bits. The relative error is within a few float32 ulps; results
// below the smallest normal float32 flush to 0.
func Exp(x float32) float32 {
	switch {
	case x != x: // NaN
		return x
	case x > expHi:
		return float32(math.Inf(1))
	case x < expLo:
		return 0
	}
	t := x * log2e
	var k int32
	if t < 0 {
		k = int32(t - 0.5)
	} else {
		k = int32(t + 0.5)
	}
	fk := float32(k)
	r := x - fk*ln2hi - fk*ln2lo
	p := ((((expC0*r+expC1)*r+expC2)*r+expC3)*r+expC4)*r + expC5
	e := p*r*r + r + 1
	// 2^k comes from the exponent bits, for k in [-126, 127]. At the ends of
	// the range k is split in two factors, so that neither overflows.
	switch {
	case k > 127:
		return e * 2 * math.Float32frombits(uint32(k-1+127)<<23)
	case k < -125:
		return e * math.Float32frombits(uint32(k+127+64)<<23) * math.Float32frombits(uint32(127-64)<<23)
	}
	return e * math.Float32frombits(uint32(k+127)<<23)
}

// The constants of Exp; exp_amd64.s holds the same values.
const (
	expHi = 88.72283
	expLo = -87.33654
	log2e = 1.44269504088896341
	ln2hi = 0.693359375
	ln2lo = -2.12194440e-4
	expC0 = 1.9875691500e-4
	expC1 = 1.3981999507e-3
	expC2 = 8.3334519073e-3
	expC3 = 4.1665795894e-2
	expC4 = 1.6666665459e-1
	expC5 = 5.0000001201e-1
)

// Softmax sets x[i] = e^(scale·x[i] − shift), with shift = scale·max(x).
// It returns the sum of the new values and the shift: softmax(scale·x) is x
// divided by the sum, and log Σ e^(scale·x) is shift + log(sum). scale must
// be positive and x not empty. It is the softmax of attention in both
// engines and of the loss.
func Softmax(x []float32, scale float32) (sum, shift float32) {
	shift = scale * Max(x) // scale·x rounds monotonically, so this is max(scale·x)
	return ExpSum(x, x, scale, shift), shift
}

// Max returns the largest value of x (NaN if x holds one); x must not be
// empty. Zeros of either sign compare equal: the result may be −0 where
// the largest values are +0 and −0.
func Max(x []float32) float32 {
	i, m := 0, x[0]
	if activeMax8 != nil && len(x) >= 8 {
		i = len(x) &^ 7
		m = activeMax8(x[:i])
	}
	m0, m1, m2, m3 := m, m, m, m
	for ; i+4 <= len(x); i += 4 {
		m0, m1, m2, m3 = max(m0, x[i]), max(m1, x[i+1]), max(m2, x[i+2]), max(m3, x[i+3])
	}
	for ; i < len(x); i++ {
		m0 = max(m0, x[i])
	}
	return max(max(m0, m1), max(m2, m3))
}

// activeMax8 is the largest value of x, or NaN if x holds one.
// len(x) is a positive multiple of 8. It is nil where there is no vector
// code.
var activeMax8 func(x []float32) float32
