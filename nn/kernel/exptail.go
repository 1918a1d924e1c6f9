package kernel

// expTailFunc sets dst[i] = Exp(scale·src[i] − shift) for the len(src) ≤ 16 values, bit for bit.
// It leaves dst[i] unwritten where bit i of redo is set: those values take
// a branch of Exp that the vector code does not, and the caller computes
// them with Exp. So dst may be src itself.
type expTailFunc func(dst, src []float32, scale, shift float32) (redo uint16)

// activeExpTail computes ExpSum's last len mod 8 values, nil where Exp does.
// Its lanes round as Exp compiled without fused multiply-adds, Go's
// default for amd64 (GOAMD64 below v3).
var activeExpTail = archExpTail

// expTail sets dst[i] = Exp(scale·src[i] − shift) for the len(src) < 16 values and adds them to sum in order.
// dst may be src itself.
func expTail(dst, src []float32, scale, shift, sum float32) float32 {
	n := len(src)
	dst = dst[:n]
	if activeExpTail == nil || n == 0 {
		for i, x := range src {
			e := Exp(scale*x - shift)
			dst[i] = e
			sum += e
		}
		return sum
	}
	redo := activeExpTail(dst, src, scale, shift)
	for i := range n {
		if redo&(1<<i) != 0 {
			dst[i] = Exp(scale*src[i] - shift)
		}
		sum += dst[i]
	}
	return sum
}
