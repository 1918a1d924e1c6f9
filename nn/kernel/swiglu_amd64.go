//go:build !purego

package kernel

import "unsafe"

//go:noescape
func swigluAVX(h, a, b *float32, n int)

//go:noescape
func swigluBackAVX(da, db, dh, a, b *float32, n int)

// archSwiGLU and archSwiGLUBack are the AVX halves where the CPU has AVX2.
var archSwiGLU, archSwiGLUBack = func() (swigluFunc, swigluBackFunc) {
	if !haveAVX2FMA() {
		return nil, nil
	}
	return func(h, a, b []float32, n int) {
			_, _, _ = h[n-1], a[n-1], b[n-1]
			swigluAVX(unsafe.SliceData(h), unsafe.SliceData(a), unsafe.SliceData(b), n)
		}, func(da, db, dh, a, b []float32, n int) {
			_, _, _, _, _ = da[n-1], db[n-1], dh[n-1], a[n-1], b[n-1]
			swigluBackAVX(unsafe.SliceData(da), unsafe.SliceData(db), unsafe.SliceData(dh), unsafe.SliceData(a), unsafe.SliceData(b), n)
		}
}()
