package local

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/tokenizer"
)

func testParams(t *testing.T, context int, seed uint64) *nn.Params {
	t.Helper()
	p, err := nn.Alloc(nn.Config{Vocab: tokenizer.VocabSize, Dim: 32, Layers: 1, Heads: 4, KVHeads: 2, Hidden: 64, Context: context}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	p.Init(seed)
	return p
}

// writePolicy writes weights seeded by seed as a trainer's checkpoint of
// step (dir/policy with "rl_step"), replacing the previous one whole.
func writePolicy(t *testing.T, dir string, seed uint64, step int) *nn.Params {
	t.Helper()
	p := testParams(t, 128, seed)
	err := nn.ReplaceDir(dir, func(tmp string) error {
		return nn.Save(filepath.Join(tmp, "policy"), p, map[string]string{"rl_step": strconv.Itoa(step)})
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func greedy(t *testing.T, m delegate.Model) (string, *int) {
	t.Helper()
	zero := 0.0
	resp, err := m.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User("hi")}, MaxTokens: 12, Temperature: &zero})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Choices[0].Message.Content, resp.PolicyVersion
}

func TestReloadingFollowsTheCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoint")
	r, err := NewReloading(testParams(t, 128, 1), dir, named("policy"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, v := greedy(t, r); v == nil || *v != 0 {
		t.Fatalf("version %v, want 0", v)
	}
	if changed, err := r.Reload(); err != nil || changed {
		t.Fatalf("reload before the trainer wrote a checkpoint: %v, %v; want no change", changed, err)
	}
	writePolicy(t, dir, 1, 0)
	if changed, err := r.Reload(); err != nil || changed {
		t.Fatalf("reload of a checkpoint of step 0: %v, %v; want no change", changed, err)
	}

	// Requests keep flowing while the trainer writes new steps.
	// None fails, every answer names a version, and a client never sees the
	// version go back.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := r.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User("go")}, MaxTokens: 20})
				if err != nil {
					errs <- err
					return
				}
				if v := resp.PolicyVersion; v == nil || *v < last {
					errs <- errFromVersion(v, last)
					return
				}
				last = *resp.PolicyVersion
			}
		}()
	}
	var want *nn.Params
	for step := 1; step <= 3; step++ {
		want = writePolicy(t, dir, uint64(10+step), step)
		if changed, err := r.Reload(); err != nil || !changed {
			t.Fatalf("reload of step %d: %v, %v", step, changed, err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if r.Version() != 3 {
		t.Errorf("version %d, want 3", r.Version())
	}
	fresh, err := New(want, named("fresh"))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	got, v := greedy(t, r)
	if wantText, _ := greedy(t, fresh); got != wantText || *v != 3 {
		t.Errorf("after the reload: %q (version %d), the new weights say %q", got, *v, wantText)
	}

	// A checkpoint that cannot be read changes nothing.
	if err := os.WriteFile(filepath.Join(dir, "policy", "config.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(); err == nil || changed {
		t.Errorf("reload of a broken checkpoint: %v, %v; want an error", changed, err)
	}
	if after, _ := greedy(t, r); after != got {
		t.Error("a failed reload changed the answers")
	}
}

type versionError struct{ got, last int }

func (e versionError) Error() string {
	return "version " + strconv.Itoa(e.got) + " after " + strconv.Itoa(e.last)
}

func errFromVersion(v *int, last int) error {
	if v == nil {
		return versionError{-1, last}
	}
	return versionError{*v, last}
}

// A request without a seed gets the next seed of the model's life, across reloads.
// A new version does not hand out the first version's seeds again; the
// response id names the seed.
func TestReloadingKeepsCountingSeeds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoint")
	r, err := NewReloading(testParams(t, 128, 1), dir, seeded("policy", 100), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ask := func() string {
		t.Helper()
		resp, err := r.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User("go")}, MaxTokens: 2})
		if err != nil {
			t.Fatal(err)
		}
		return resp.ID
	}
	var ids []string
	for step := 1; step <= 2; step++ {
		ids = append(ids, ask(), ask())
		writePolicy(t, dir, uint64(10+step), step)
		if changed, err := r.Reload(); err != nil || !changed {
			t.Fatalf("reload of step %d: %v, %v", step, changed, err)
		}
	}
	ids = append(ids, ask())
	want := []string{"local-100", "local-101", "local-102", "local-103", "local-104"}
	for i := range want {
		if ids[i] != want[i] {
			t.Errorf("request %d: id %s, want %s (ids %v)", i, ids[i], want[i], ids)
		}
	}
}

// A reload with no call in flight copies the new weights into the model it serves.
// The first reload instead replaces the caller's weights with its own copy.
// The same engine then answers as a fresh model over the new weights, and
// says the new version.
func TestReloadingSwapsWeightsInPlace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoint")
	start := testParams(t, 128, 1)
	r, err := NewReloading(start, dir, named("policy"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var first *Model
	for step := 1; step <= 3; step++ {
		want := writePolicy(t, dir, uint64(20+step), step)
		if changed, err := r.Reload(); err != nil || !changed {
			t.Fatalf("reload of step %d: %v, %v", step, changed, err)
		}
		r.mu.RLock()
		m := r.cur.m
		r.mu.RUnlock()
		switch {
		case step == 1:
			first = m
		case m != first:
			t.Errorf("step %d: a new model, want the weights copied into the one serving", step)
		}
		fresh, err := New(want, named("fresh"))
		if err != nil {
			t.Fatal(err)
		}
		got, v := greedy(t, r)
		wantText, _ := greedy(t, fresh)
		fresh.Close()
		if got != wantText || v == nil || *v != step {
			t.Errorf("step %d: %q (version %v), the new weights say %q", step, got, v, wantText)
		}
	}
	if fresh := testParams(t, 128, 1); !slices.Equal(start.Data, fresh.Data) {
		t.Error("the weights given to NewReloading were overwritten")
	}
	if n := first.Stats().Refreshes; n < 2 {
		t.Errorf("the engine took new weights %d times, want 2", n)
	}
}

// WaitVersion looks at the checkpoint at once.
// Otherwise it returns when a reload brings the version, or when its
// context ends.
func TestReloadingWaitVersion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoint")
	r, err := NewReloading(testParams(t, 128, 1), dir, named("policy"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	writePolicy(t, dir, 2, 1)
	if v, err := r.WaitVersion(ctx, 1); err != nil || v != 1 {
		t.Fatalf("WaitVersion(1) with step 1 written: %d, %v", v, err)
	}
	got := make(chan int, 1)
	go func() {
		v, err := r.WaitVersion(ctx, 2)
		if err != nil {
			v = -1
		}
		got <- v
	}()
	writePolicy(t, dir, 3, 2)
	if changed, err := r.Reload(); err != nil || !changed {
		t.Fatalf("reload of step 2: %v, %v", changed, err)
	}
	if v := <-got; v != 2 {
		t.Errorf("WaitVersion(2) returned %d, want 2", v)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if v, err := r.WaitVersion(short, 5); err == nil || v != 2 {
		t.Errorf("WaitVersion(5) with step 2 written: %d, %v; want 2 and the context's error", v, err)
	}
}

// A server restarted mid-run starts on the trainer's newest checkpoint.
// It does not start on the starting weights: its first answer already names
// the trainer's step, and so does every later one.
func TestReloadingStartsOnTheNewestCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoint")
	want := writePolicy(t, dir, 31, 2)
	r, err := NewReloading(testParams(t, 128, 1), dir, named("policy"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.Version(); got != 2 {
		t.Errorf("version before the first request: got %d, want 2", got)
	}
	fresh, err := New(want, named("fresh"))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	got, v := greedy(t, r)
	if wantText, _ := greedy(t, fresh); got != wantText || v == nil || *v != 2 {
		t.Errorf("first answer: %q (version %v), the checkpoint of step 2 says %q", got, v, wantText)
	}
	if changed, err := r.Reload(); err != nil || changed {
		t.Errorf("reload of the checkpoint already served: %v, %v; want no change", changed, err)
	}
	// The weights loaded are the server's own: a reload copies into them.
	writePolicy(t, dir, 32, 3)
	if changed, err := r.Reload(); err != nil || !changed || r.Version() != 3 {
		t.Errorf("reload of step 3: %v, %v, version %d", changed, err, r.Version())
	}

	// A checkpoint that cannot be read is an error, not the starting
	// weights served as if they were the trainer's.
	if err := os.WriteFile(filepath.Join(dir, "policy", "config.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r2, err := NewReloading(testParams(t, 128, 1), dir, named("policy"), nil); err == nil {
		r2.Close()
		t.Error("a broken checkpoint: got a model, want an error")
	}
}
