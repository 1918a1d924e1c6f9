package store

import (
	"context"
	"maps"
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
