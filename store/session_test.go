package store

import (
	"context"
	"maps"
	"slices"
	"testing"
)

// TestSessionLifecycle follows sessions through open, finished, lost on
// reopen and grouped, checking what each state allows.
func TestSessionLifecycle(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	for _, k := range []string{"a", "b", "c"} {
		if err := db.OpenSession(ctx, k, "g", 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.OpenSession(ctx, "a", "g", 1); err == nil {
		t.Error("a key opened twice: got nil error")
	}
	for _, k := range []string{"a", "b"} {
		if err := db.FinishSession(ctx, k, []byte(`{"k":"`+k+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishSession(ctx, "a", nil); err == nil {
		t.Error("a session finished twice: got nil error")
	}
	if err := db.FinishSession(ctx, "nope", nil); err == nil {
		t.Error("an unknown session finished: got nil error")
	}
	// A crash: the store closes with c open.
	db.Close()
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lost, err := db.LoseOpenSessions(ctx)
	if err != nil || lost != 1 {
		t.Errorf("LoseOpenSessions = %d, %v; want 1", lost, err)
	}
	if err := db.FinishSession(ctx, "c", nil); err == nil {
		t.Error("a lost session finished: got nil error")
	}
	got, err := db.SessionCounts(ctx)
	if want := map[string]int{SessionFinished: 2, SessionLost: 1}; err != nil || !maps.Equal(got, want) {
		t.Errorf("SessionCounts = %v, %v; want %v", got, err, want)
	}
	fin, err := db.FinishedSessions(ctx)
	if err != nil || len(fin) != 2 || fin[0].Key != "a" || string(fin[1].Data) != `{"k":"b"}` {
		t.Fatalf("FinishedSessions = %+v, %v", fin, err)
	}
	if err := db.CommitSessionGroup(ctx, "groups.jsonl", 0, 10, []string{"a", "c"}); err == nil {
		t.Error("a group holding a lost session: got nil error")
	}
	if err := db.CommitSessionGroup(ctx, "groups.jsonl", 0, 10, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if err := db.CommitSessionGroup(ctx, "groups.jsonl", 10, 5, []string{"a"}); err == nil {
		t.Error("a session grouped twice: got nil error")
	}
	if fin, _ := db.FinishedSessions(ctx); len(fin) != 0 {
		t.Errorf("after grouping, FinishedSessions = %+v, want none", fin)
	}
	if l, _ := db.FileLengths(ctx); l["groups.jsonl"] != 10 {
		t.Errorf("recorded length %d, want 10", l["groups.jsonl"])
	}
}

// TestSessionsPaged lists sessions of every status newest first, pages
// them, and reads one by key.
func TestSessionsPaged(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	defer db.Close()
	for i, k := range []string{"a", "b", "c"} {
		if err := db.OpenSession(ctx, k, "g", int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishSession(ctx, "b", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		offset, limit int
		want          []string
	}{
		{0, 10, []string{"c", "b", "a"}},
		{1, 1, []string{"b"}},
		{3, 5, nil},
	}
	for _, tt := range tests {
		got, total, err := db.Sessions(ctx, tt.offset, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, s := range got {
			keys = append(keys, s.Key)
		}
		if total != 3 || !slices.Equal(keys, tt.want) {
			t.Errorf("Sessions(%d, %d) = %q of %d, want %q of 3", tt.offset, tt.limit, keys, total, tt.want)
		}
	}
	s, ok, err := db.SessionByKey(ctx, "b")
	if err != nil || !ok || s.Status != SessionFinished || string(s.Data) != "{}" {
		t.Errorf("SessionByKey(b) = %+v, %v, %v; want finished with {}", s, ok, err)
	}
	if _, ok, err := db.SessionByKey(ctx, "nope"); ok || err != nil {
		t.Errorf("SessionByKey(nope) = %v, %v; want not found", ok, err)
	}
}

// TestDropSessions drops a finished session of a group that timed out:
// it leaves the ungrouped ones and is counted apart. Only a finished,
// ungrouped session can be dropped.
func TestDropSessions(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	defer db.Close()
	for _, k := range []string{"a", "b", "open"} {
		if err := db.OpenSession(ctx, k, "g", 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "b"} {
		if err := db.FinishSession(ctx, k, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		keys []string
		ok   bool
	}{
		{"an open session", []string{"open"}, false},
		{"an unknown session", []string{"nope"}, false},
		{"a finished session", []string{"a"}, true},
		{"a dropped session", []string{"a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := db.DropSessions(ctx, tc.keys); (err == nil) != tc.ok {
				t.Errorf("DropSessions(%v) = %v, want ok %v", tc.keys, err, tc.ok)
			}
		})
	}
	fin, err := db.FinishedSessions(ctx)
	if err != nil || len(fin) != 1 || fin[0].Key != "b" {
		t.Errorf("FinishedSessions = %+v, %v; want b alone", fin, err)
	}
	got, err := db.SessionCounts(ctx)
	if want := map[string]int{SessionFinished: 1, SessionDropped: 1, SessionOpen: 1}; err != nil || !maps.Equal(got, want) {
		t.Errorf("SessionCounts = %v, %v; want %v", got, err, want)
	}
}
