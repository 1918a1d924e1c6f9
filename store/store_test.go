package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
)

func openTemp(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

func TestSchemaVersionMismatch(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	if _, err := db.db.ExecContext(ctx, `UPDATE meta SET value = '7' WHERE key = 'schema_version'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err := Open(ctx, path)
	if err == nil {
		t.Fatal("Open of a version-7 store: got nil error")
	}
	for _, want := range []string{"version 7", "version 1", path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func TestReopenKeepsState(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	if err := db.SetIdentity(ctx, []byte(`{"g":4}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.PutBaseline(ctx, 0, 0, []byte("base")); err != nil {
		t.Fatal(err)
	}
	r := Rollout{Item: 0, Group: 0, Index: 1, ID: "a#0.1", Offset: 0, Length: 10, Data: []byte("r1")}
	if err := db.CommitRollout(ctx, "artifacts.jsonl", r); err != nil {
		t.Fatal(err)
	}
	if err := db.CommitGroup(ctx, "groups.jsonl", Group{Item: 0, Status: "written", Offset: 0, Length: 5, Data: []byte("g")}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	id, ok, err := db.Identity(ctx)
	if err != nil || !ok || string(id) != `{"g":4}` {
		t.Errorf("Identity = %q, %v, %v; want {\"g\":4}, true, nil", id, ok, err)
	}
	if err := db.SetIdentity(ctx, []byte(`{"g":8}`)); err == nil {
		t.Error("SetIdentity with another identity: got nil error")
	}
	base, ok, err := db.Baseline(ctx, 0, 0)
	if err != nil || !ok || string(base) != "base" {
		t.Errorf("Baseline = %q, %v, %v; want base, true, nil", base, ok, err)
	}
	if _, ok, _ := db.Baseline(ctx, 1, 0); ok {
		t.Error("Baseline of item 1: got ok")
	}
	lens, err := db.FileLengths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(lens), "map[artifacts.jsonl:10 groups.jsonl:5]"; got != want {
		t.Errorf("FileLengths = %s, want %s", got, want)
	}
	rs, err := db.Rollouts(ctx)
	if err != nil || len(rs) != 1 || rs[0].ID != "a#0.1" || string(rs[0].Data) != "r1" {
		t.Errorf("Rollouts = %+v, %v; want the one committed", rs, err)
	}
	gs, err := db.Groups(ctx)
	if err != nil || len(gs) != 1 || gs[0].Status != "written" {
		t.Errorf("Groups = %+v, %v; want the one committed", gs, err)
	}
}

func TestCommitRolloutRejects(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	if err := db.CommitRollout(ctx, "f", Rollout{ID: "x", Offset: 0, Length: 4}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		r    Rollout
		want string
	}{
		{"gap in the file", Rollout{Index: 1, ID: "y", Offset: 9, Length: 4}, "recorded length is 4"},
		{"same place", Rollout{ID: "z", Offset: 4, Length: 4}, "commit rollout z"},
		{"same id", Rollout{Index: 2, ID: "x", Offset: 4, Length: 4}, "commit rollout x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := db.CommitRollout(ctx, "f", tt.r)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CommitRollout: got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// A failed commit left the length alone.
	lens, _ := db.FileLengths(ctx)
	if got, want := lens["f"], int64(4); got != want {
		t.Errorf("length of f after rejected commits = %d, want %d", got, want)
	}
}

func TestCommitsConcurrent(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	var mu sync.Mutex // the caller serialises appends to one file, as rollout does
	var off int64
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			errs[i] = db.CommitRollout(ctx, "f", Rollout{Item: i, ID: fmt.Sprint(i), Offset: off, Length: 3})
			off += 3
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("commit %d: %v", i, err)
		}
	}
	rs, err := db.Rollouts(ctx)
	if err != nil || len(rs) != 16 {
		t.Errorf("Rollouts: %d, %v; want 16, nil", len(rs), err)
	}
}

func temp(v float64) *float64 { return &v }

func TestCached(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	var mu sync.Mutex
	n := 0
	fake := modeltest.New("m", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if req.Messages[0].Content == "fail" {
			return nil, errors.New("boom")
		}
		return modeltest.Text(fmt.Sprintf("answer %d", n)), nil
	})
	seed := int64(3)
	greedy := &delegate.Request{Messages: []delegate.Message{delegate.User("q")}, Temperature: temp(0)}
	seeded := &delegate.Request{Messages: []delegate.Message{delegate.User("q")}, Temperature: temp(0.7), Seed: &seed}
	sampled := &delegate.Request{Messages: []delegate.Message{delegate.User("q")}, Temperature: temp(0.7)}
	otherParam := &delegate.Request{Messages: []delegate.Message{delegate.User("q")}, Temperature: temp(0), MaxTokens: 5}
	failing := &delegate.Request{Messages: []delegate.Message{delegate.User("fail")}, Temperature: temp(0)}

	m := Cached(fake, db, "http://a")
	steps := []struct {
		name  string
		req   *delegate.Request
		want  string
		stats CacheStats
	}{
		{"greedy miss", greedy, "answer 1", CacheStats{Misses: 1}},
		{"greedy hit", greedy, "answer 1", CacheStats{Hits: 1, Misses: 1}},
		{"seeded miss", seeded, "answer 2", CacheStats{Hits: 1, Misses: 2}},
		{"seeded hit", seeded, "answer 2", CacheStats{Hits: 2, Misses: 2}},
		{"sampled bypass", sampled, "answer 3", CacheStats{Hits: 2, Misses: 2, Bypassed: 1}},
		{"sampled again", sampled, "answer 4", CacheStats{Hits: 2, Misses: 2, Bypassed: 2}},
		{"another max_tokens", otherParam, "answer 5", CacheStats{Hits: 2, Misses: 3, Bypassed: 2}},
	}
	for _, s := range steps {
		resp, err := m.Chat(ctx, s.req)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := resp.Text(); got != s.want {
			t.Errorf("%s: got %q, want %q", s.name, got, s.want)
		}
		if got := m.Stats(); got != s.stats {
			t.Errorf("%s: stats %+v, want %+v", s.name, got, s.stats)
		}
	}
	for range 2 {
		if _, err := m.Chat(ctx, failing); err == nil {
			t.Fatal("failing request: got nil error")
		}
	}
	if got, want := m.Stats().Misses, int64(5); got != want {
		t.Errorf("after two failures misses = %d, want %d (errors are never cached)", got, want)
	}

	// Another scope does not share entries; the same scope after reopening does.
	other := Cached(fake, db, "http://b")
	if resp, _ := other.Chat(ctx, greedy); resp.Text() == "answer 1" {
		t.Error("scope http://b served scope http://a's entry")
	}
	db.Close()
	db2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	again := Cached(fake, db2, "http://a")
	resp, err := again.Chat(ctx, greedy)
	if err != nil || resp.Text() != "answer 1" || again.Stats().Hits != 1 {
		t.Errorf("after reopening: %q, %v, %+v; want answer 1 from the cache", resp.Text(), err, again.Stats())
	}
}

func TestCachedConcurrent(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	fake := modeltest.New("m", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("echo " + req.Messages[0].Content), nil
	})
	m := Cached(fake, db, "s")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				q := fmt.Sprint(i % 5)
				resp, err := m.Chat(ctx, &delegate.Request{Messages: []delegate.Message{delegate.User(q)}, Temperature: temp(0)})
				if err == nil && resp.Text() != "echo "+q {
					err = fmt.Errorf("got %q for %q", resp.Text(), q)
				}
				if err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Errorf("goroutine %d: %v", g, err)
		}
	}
	st := m.Stats()
	if got, want := st.Hits+st.Misses, int64(160); got != want {
		t.Errorf("hits+misses = %d, want %d", got, want)
	}
	if st.Misses < 5 {
		t.Errorf("misses = %d, want at least the 5 distinct requests", st.Misses)
	}
}

func TestOpenExclusive(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := OpenExclusive(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetIdentity(ctx, []byte("run")); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenExclusive(ctx, path); err == nil || !strings.Contains(err.Error(), "another process holds it") {
		t.Errorf("second OpenExclusive: got %v, want an error saying another process holds it", err)
	}
	db.Close()
	db, err = OpenExclusive(ctx, path)
	if err != nil {
		t.Fatalf("OpenExclusive after Close: %v", err)
	}
	defer db.Close()
	if id, ok, err := db.Identity(ctx); err != nil || !ok || string(id) != "run" {
		t.Errorf("Identity after reopening = %q, %v, %v", id, ok, err)
	}
}

// TestCacheSharedFile: two handles on one cache file, as two benchmark
// processes would have, write and read concurrently.
func TestCacheSharedFile(t *testing.T) {
	ctx := context.Background()
	db1, path := openTemp(t)
	db2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	fake := modeltest.New("m", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("echo " + req.Messages[0].Content), nil
	})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for g, db := range []*DB{db1, db2, db1, db2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := Cached(fake, db, "s")
			for i := range 15 {
				q := fmt.Sprint(i)
				resp, err := m.Chat(ctx, &delegate.Request{Messages: []delegate.Message{delegate.User(q)}, Temperature: temp(0)})
				if err == nil && resp.Text() != "echo "+q {
					err = fmt.Errorf("got %q for %q", resp.Text(), q)
				}
				if err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Errorf("goroutine %d: %v", g, err)
		}
	}
}

func TestEachBaseline(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	for _, b := range []struct{ item, group int }{{2, 0}, {0, 1}, {0, 0}} {
		if err := db.PutBaseline(ctx, b.item, b.group, []byte(fmt.Sprintf("b%d.%d", b.item, b.group))); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err := db.EachBaseline(ctx, func(item, group int, data []byte) error {
		got = append(got, fmt.Sprintf("%d.%d=%s", item, group, data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0.0=b0.0", "0.1=b0.1", "2.0=b2.0"}; !slices.Equal(got, want) {
		t.Errorf("walk = %v, want %v", got, want)
	}
	stop := errors.New("stop")
	n := 0
	if err := db.EachBaseline(ctx, func(int, int, []byte) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("fn's error: walk returned %v after %d calls, want stop after 1", err, n)
	}
}
