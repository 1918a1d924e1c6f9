package store

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
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

// BenchmarkSessionWrites measures a gateway session's two writes: it is
// opened, then finished with a record of a few kilobytes.
func BenchmarkSessionWrites(b *testing.B) {
	ctx := context.Background()
	db, err := OpenExclusive(ctx, filepath.Join(b.TempDir(), "gateway.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	data := []byte(`{"calls":[` + strings.Repeat(`{"request":"a call's request and answer"},`, 100) + `{}]}`)
	i := 0
	for b.Loop() {
		key := strconv.Itoa(i)
		if err := db.OpenSession(ctx, key, "g", int64(i)); err != nil {
			b.Fatal(err)
		}
		if err := db.FinishSession(ctx, key, data); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSessionGroup measures a gateway group of 4 sessions: each is
// opened and finished, then the four are committed as one group.
func BenchmarkSessionGroup(b *testing.B) {
	ctx := context.Background()
	db, err := OpenExclusive(ctx, filepath.Join(b.TempDir(), "gateway.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	data := []byte(`{"calls":[{"request":"a call's request and answer"}]}`)
	var offset int64
	i := 0
	for b.Loop() {
		keys := make([]string, 4)
		for j := range keys {
			keys[j] = strconv.Itoa(i) + "." + strconv.Itoa(j)
			if err := db.OpenSession(ctx, keys[j], "g", int64(i)); err != nil {
				b.Fatal(err)
			}
			if err := db.FinishSession(ctx, keys[j], data); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.CommitSessionGroup(ctx, "groups.jsonl", offset, 100, keys); err != nil {
			b.Fatal(err)
		}
		offset += 100
		i++
	}
}
