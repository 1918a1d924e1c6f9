package kernel

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// TestForceGenericEnv runs this test binary again with
// DELEGATE_KERNEL_GENERIC=1 and checks, in the child, that the entry points
// then use the pure-Go kernel.
func TestForceGenericEnv(t *testing.T) {
	if os.Getenv("KERNEL_TEST_CHILD") == "1" {
		if got, want := Impl(), "go"; got != want {
			t.Fatalf("Impl() with %s=1 = %q, want %q", ForceGenericEnv, got, want)
		}
		dst := make([]float32, 4)
		MatMulNT(dst, []float32{1, 2}, []float32{3, 4, 5, 6, 7, 8, 9, 10}, 1, 2, 4)
		want := []float32{11, 17, 23, 29}
		for i := range want {
			if dst[i] != want[i] {
				t.Fatalf("dst = %v, want %v", dst, want)
			}
		}
		// The exponential follows the kernel's choice: the portable one.
		probe := []float32{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}
		a, b := make([]float32, 8), make([]float32, 8)
		activeExp(a, probe, 8, 1, 0)
		goExpBlock(b, probe, 8, 1, 0)
		if !slices.Equal(a, b) {
			t.Fatalf("with %s=1 the exponential is not the portable one: %v vs %v", ForceGenericEnv, a, b)
		}
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot find the test binary: %v", err)
	}
	cmd := exec.Command(exe, "-test.run=^TestForceGenericEnv$", "-test.count=1")
	cmd.Env = append(os.Environ(), "KERNEL_TEST_CHILD=1", ForceGenericEnv+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child with %s=1: %v\n%s", ForceGenericEnv, err, out)
	}
}

func TestImplNamesAKernel(t *testing.T) {
	got := Impl()
	if got != "go" && got != archName {
		t.Errorf("Impl() = %q, want %q or %q", got, "go", archName)
	}
	if os.Getenv(ForceGenericEnv) != "1" && got != archName {
		t.Errorf("Impl() = %q without %s, want the machine's best, %q", got, ForceGenericEnv, archName)
	}
}
