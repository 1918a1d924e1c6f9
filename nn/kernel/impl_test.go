package kernel

import (
	"os"
	"os/exec"
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
