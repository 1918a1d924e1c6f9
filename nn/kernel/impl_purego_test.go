//go:build purego

package kernel

import (
	"slices"
	"testing"
)

// TestPuregoImpl checks that under the purego tag the entry points use pure Go.
// No assembly hook may be wired.
func TestPuregoImpl(t *testing.T) {
	if got, want := Impl(), "go"; got != want {
		t.Fatalf("Impl() = %q, want %q", got, want)
	}
	if got, want := Q8Impl(), "go"; got != want {
		t.Errorf("Q8Impl() = %q, want %q", got, want)
	}
	hooks := []struct {
		name string
		set  bool
	}{
		{"archKernel2", archKernel2 != nil},
		{"activeKernel2", activeKernel2 != nil},
		{"archPackA6", archPackA6 != nil},
		{"activePackA6", activePackA6 != nil},
		{"archGemv4", archGemv4 != nil},
		{"activeGemv4", activeGemv4 != nil},
		{"archGemv8", archGemv8 != nil},
		{"activeGemv8", activeGemv8 != nil},
		{"archDots8", archDots8 != nil},
		{"activeDots8", activeDots8 != nil},
		{"archMix", archMix != nil},
		{"activeMix", activeMix != nil},
		{"archExp", archExp != nil},
		{"archMax8", archMax8 != nil},
		{"activeMax8", activeMax8 != nil},
		{"archAdamW", archAdamW != nil},
		{"archSwiGLU", archSwiGLU != nil},
		{"archSwiGLUBack", archSwiGLUBack != nil},
		{"activeAdd", activeAdd != nil},
		{"activeScale", activeScale != nil},
		{"activeRMSApply", activeRMSApply != nil},
		{"activeRMSInput", activeRMSInput != nil},
		{"activeRMSGain", activeRMSGain != nil},
		{"activeBF16Pairs8", activeBF16Pairs8 != nil},
		{"activeWidenBF16Pairs", activeWidenBF16Pairs != nil},
		{"archQ8Dot4", archQ8Dot4() != nil},
		{"activeQ8Panels", activeQ8Panels != nil},
		{"activeQ8Panels4", activeQ8Panels4 != nil},
		{"archStrided", archStrided != nil},
		{"archExpTail", archExpTail != nil},
		{"activeExpTail", activeExpTail != nil},
		{"archRotate", archRotate != nil},
		{"haveExpRows", haveExpRows},
		{"archSoftmaxGrad", archSoftmaxGrad != nil},
	}
	for _, h := range hooks {
		if h.set {
			t.Errorf("%s is set, want nil under purego", h.name)
		}
	}
	for dt := range activeGemvHalf1 {
		if activeGemvHalf1[dt] != nil || activeGemvHalf4[dt] != nil || activeGemvHalf8[dt] != nil || activeWiden[dt] != nil {
			t.Errorf("half-width hooks for dtype %d are set, want nil under purego", dt)
		}
	}

	dst := make([]float32, 4)
	MatMulNT(dst, []float32{1, 2}, []float32{3, 4, 5, 6, 7, 8, 9, 10}, 1, 2, 4)
	if want := []float32{11, 17, 23, 29}; !slices.Equal(dst, want) {
		t.Errorf("MatMulNT: got %v, want %v", dst, want)
	}
	// The exponential is the portable one.
	probe := []float32{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}
	got, want := make([]float32, 8), make([]float32, 8)
	activeExp(got, probe, 8, 1, 0)
	goExpBlock(want, probe, 8, 1, 0)
	if !slices.Equal(got, want) {
		t.Errorf("exponential: got %v, want the portable %v", got, want)
	}
}
