//go:build !purego

package kernel

import (
	"fmt"
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

// TestQ8ImplIsMachines checks that the q8_0 products use the assembly
// where the CPU has AVX2, FMA and F16C.
func TestQ8ImplIsMachines(t *testing.T) {
	asm := archQ8Dot4() != nil
	if got := fmt.Sprintf("%p", activeQ8Dot4) != fmt.Sprintf("%p", goQ8Dot4); got != asm {
		t.Errorf("q8_0 assembly in use: %v, the CPU has it: %v", got, asm)
	}
}
