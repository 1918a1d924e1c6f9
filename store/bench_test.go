package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
)

// BenchmarkCachedHit measures serving a temperature-0 request from the
// cache: key hashing, one SQLite read and JSON decoding.
func BenchmarkCachedHit(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(b.TempDir(), "cache.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	fake := modeltest.New("m", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("a reply of a few words, as a judge would give"), nil
	})
	m := Cached(fake, db, "s")
	req := &delegate.Request{Messages: []delegate.Message{delegate.System("You are a judge."), delegate.User("Compare these two answers.")}, Temperature: temp(0)}
	if _, err := m.Chat(ctx, req); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := m.Chat(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
