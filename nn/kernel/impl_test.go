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

// TestQ8ImplIsMachines checks that the q8_0 products use the best assembly the CPU runs.
// That is AVX-512 VNNI over q8_0 panels, else AVX2 with FMA and F16C.
func TestQ8ImplIsMachines(t *testing.T) {
	asm := archQ8Dot4() != nil
	if got := fmt.Sprintf("%p", activeQ8Dot4) != fmt.Sprintf("%p", goQ8Dot4); got != asm {
		t.Errorf("q8_0 AVX2 assembly in use: %v, the CPU has it: %v", got, asm)
	}
	vnni := haveAVX512VNNI()
	if got := activeQ8Panels != nil && activeQ8Panels4 != nil; got != vnni {
		t.Errorf("q8_0 VNNI assembly in use: %v, the CPU has it: %v", got, vnni)
	}
	if got := NewPackedQ8(32, 1).q8panels; got != vnni {
		t.Errorf("NewPackedQ8 lays out q8_0 panels: %v, want %v", got, vnni)
	}
	want := "go"
	switch {
	case vnni:
		want = "avx512vnni"
	case asm:
		want = "avx2"
	}
	if got := Q8Impl(); got != want {
		t.Errorf("Q8Impl() = %q, want %q", got, want)
	}
}
