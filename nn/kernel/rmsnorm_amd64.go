//go:build !purego

package kernel

import "unsafe"

//go:noescape
func rmsApplyAVX(y, x, gain *float32, r float32, n int)

//go:noescape
func rmsInputAVX(dx, dy, x, gain *float32, r, c float32, n int)

//go:noescape
func rmsGainAVX(dg, dy, x *float32, r float32, n int)

// archRMSApply, archRMSInput and archRMSGain are the AVX loops where the CPU has AVX2.
var archRMSApply, archRMSInput, archRMSGain = func() (rmsApplyFunc, rmsInputFunc, rmsGainFunc) {
	if !haveAVX2FMA() {
		return nil, nil, nil
	}
	return func(y, x, g []float32, r float32, n int) {
			_, _, _ = y[n-1], x[n-1], g[n-1]
			rmsApplyAVX(unsafe.SliceData(y), unsafe.SliceData(x), unsafe.SliceData(g), r, n)
		}, func(dx, dy, x, g []float32, r, c float32, n int) {
			_, _, _, _ = dx[n-1], dy[n-1], x[n-1], g[n-1]
			rmsInputAVX(unsafe.SliceData(dx), unsafe.SliceData(dy), unsafe.SliceData(x), unsafe.SliceData(g), r, c, n)
		}, func(dg, dy, x []float32, r float32, n int) {
			_, _, _ = dg[n-1], dy[n-1], x[n-1]
			rmsGainAVX(unsafe.SliceData(dg), unsafe.SliceData(dy), unsafe.SliceData(x), r, n)
		}
}()
