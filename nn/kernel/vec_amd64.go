//go:build !purego

package kernel

import "unsafe"

//go:noescape
func addAVX(x, y *float32, n int)

//go:noescape
func scaleAVX(x *float32, s float32, n int)

// archAdd and archScale are the AVX loops where the CPU has AVX2.
var archAdd, archScale = func() (addFunc, scaleFunc) {
	if !haveAVX2FMA() {
		return nil, nil
	}
	return func(x, y []float32, n int) {
			_, _ = x[n-1], y[n-1]
			addAVX(unsafe.SliceData(x), unsafe.SliceData(y), n)
		}, func(x []float32, s float32, n int) {
			_ = x[n-1]
			scaleAVX(unsafe.SliceData(x), s, n)
		}
}()
