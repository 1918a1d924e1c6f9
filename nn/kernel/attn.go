package kernel

// The two products of one attention head over a sequence's cached keys and values.
// They are a query's scores against every key, and the weighted sum of the
// values. Each result is a deterministic function of its inputs and their
// lengths: the same call gives the same bits. But the summation order is
// not the matrix products', and it differs between the assembly and the
// portable code.

// Dots sets sc[t] = scale · Σ_i q[i]·keys[t·stride+i] for t < len(sc) and
// i < len(q).
func Dots(sc, q, keys []float32, stride int, scale float32) {
	if len(sc) == 0 {
		return
	}
	_ = keys[(len(sc)-1)*stride+len(q)-1]
	done := 0
	if activeDots8 != nil && len(q)%8 == 0 && len(q) > 0 && len(sc) >= 8 {
		done = len(sc) / 8 * 8
		activeDots8(sc[:done], q, keys, stride, scale)
	}
	if done < len(sc) {
		goDots(sc[done:], q, keys[done*stride:], stride, scale)
	}
}

// Mix sets out[i] = Σ_t w[t]·vals[t·stride+i] for i < len(out) and
// t < len(w).
func Mix(out, w, vals []float32, stride int) {
	if len(w) == 0 {
		clear(out)
		return
	}
	_ = vals[(len(w)-1)*stride+len(out)-1]
	i := 0
	if activeMix != nil && len(out)%8 == 0 {
		i = len(out)
		activeMix(out, w, vals, stride)
	}
	if i < len(out) {
		goMix(out[i:], w, vals[i:], stride)
	}
}

var (
	activeDots8 func(sc, q, keys []float32, stride int, scale float32) // len(sc) and len(q) multiples of 8
	activeMix   func(out, w, vals []float32, stride int)               // len(out) a multiple of 8
)

// goDots is the portable Dots: four running sums per dot product.
func goDots(sc, q, keys []float32, stride int, scale float32) {
	hd := len(q)
	for t := range sc {
		k := keys[t*stride : t*stride+hd]
		k = k[:len(q)]
		var s0, s1, s2, s3 float32
		i := 0
		for ; i+4 <= len(q); i += 4 {
			s0 += q[i] * k[i]
			s1 += q[i+1] * k[i+1]
			s2 += q[i+2] * k[i+2]
			s3 += q[i+3] * k[i+3]
		}
		for ; i < len(q); i++ {
			s0 += q[i] * k[i]
		}
		sc[t] = ((s0 + s1) + (s2 + s3)) * scale
	}
}

// goMix is the portable Mix: four outputs at a time stay in registers
// across all t.
func goMix(out, w, vals []float32, stride int) {
	hd := len(out)
	i := 0
	for ; i+4 <= hd; i += 4 {
		var s0, s1, s2, s3 float32
		for t, a := range w {
			v := vals[t*stride+i : t*stride+i+4]
			s0 += a * v[0]
			s1 += a * v[1]
			s2 += a * v[2]
			s3 += a * v[3]
		}
		out[i], out[i+1], out[i+2], out[i+3] = s0, s1, s2, s3
	}
	for ; i < hd; i++ {
		var s0 float32
		for t, a := range w {
			s0 += a * vals[t*stride+i]
		}
		out[i] = s0
	}
}
