//go:build !purego

package kernel

import (
	"runtime"
	"testing"
)

// TestImplIsMachinesBest checks that, without the purego tag, the entry
// points use the fastest kernel this machine supports.
func TestImplIsMachinesBest(t *testing.T) {
	if got, want := Impl(), archName; got != want {
		t.Errorf("Impl() = %q, want the machine's best, %q", got, want)
	}
	switch got := Impl(); {
	case runtime.GOARCH != "amd64" && got != "go":
		t.Errorf("Impl() on %s = %q, want %q", runtime.GOARCH, got, "go")
	case got != "avx512" && got != "avx2" && got != "go":
		t.Errorf("Impl() = %q, want avx512, avx2 or go", got)
	}
}
