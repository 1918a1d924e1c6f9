package kernel

// The reference loops: the plain definitions of the three products, kept as
// the oracle the tests compare against and the baseline the benchmarks
// report. They are not used by the entry points.

func refNT(dst, a, b []float32, m, k, n int) {
	for i := 0; i < m; i++ {
		ai := a[i*k : i*k+k]
		for j := 0; j < n; j++ {
			bj := b[j*k : j*k+k]
			var s float32
			for p, v := range ai {
				s += v * bj[p]
			}
			dst[i*n+j] = s
		}
	}
}

func refNN(dst, a, b []float32, m, k, n int) {
	for i := 0; i < m; i++ {
		di := dst[i*n : i*n+n]
		for j := range di {
			di[j] = 0
		}
		for p := 0; p < k; p++ {
			v := a[i*k+p]
			bp := b[p*n : p*n+n]
			for j, w := range bp {
				di[j] += v * w
			}
		}
	}
}

func refTNAcc(dst, a, b []float32, m, k, n int) {
	for p := 0; p < k; p++ {
		ap := a[p*m : p*m+m]
		bp := b[p*n : p*n+n]
		for i, v := range ap {
			di := dst[i*n : i*n+n]
			for j, w := range bp {
				di[j] += v * w
			}
		}
	}
}
