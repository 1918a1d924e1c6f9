package local

import (
	"path/filepath"
	"testing"

	"github.com/delegatelab/delegate/nn"
)

// TestReloadingSet checks that Set serves weights from memory: the next
// call is answered by them under the given version, and changing the
// caller's weights afterwards changes nothing served.
func TestReloadingSet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoint") // never written
	start := testParams(t, 128, 1)
	r, err := NewReloading(start, dir, named("policy"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	before, v := greedy(t, r)
	if v == nil || *v != 0 {
		t.Fatalf("version %v, want 0", v)
	}
	trained := testParams(t, 128, 2)
	want, _ := greedy(t, mustNew(t, trained))
	if want == before {
		t.Fatal("the two weights answer alike: the test cannot tell them apart")
	}
	for _, version := range []int{1, 2} {
		// The first Set starts an engine, the second copies in place.
		if err := r.Set(trained, version); err != nil {
			t.Fatal(err)
		}
		got, v := greedy(t, r)
		if got != want || v == nil || *v != version {
			t.Errorf("after Set(%d): %q version %v, want %q version %d", version, got, v, want, version)
		}
		if r.Version() != version {
			t.Errorf("Version() = %d, want %d", r.Version(), version)
		}
	}
	trained.Init(3) // the caller's weights move on; the served ones do not
	if got, _ := greedy(t, r); got != want {
		t.Errorf("after the caller changed its weights: %q, want %q", got, want)
	}
}

func mustNew(t *testing.T, p *nn.Params) *Model {
	t.Helper()
	m, err := New(p, named("reference"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m
}
