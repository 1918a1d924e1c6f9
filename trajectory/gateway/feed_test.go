package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/delegatelab/delegate/trajectory/gateway"
)

// TestFeedHandsGroupsToATrainer checks the in-process sink. Committed
// records reach Next in file order with the feed's version. A full queue
// makes POST /sessions answer 503 after its wait. ReadSent finds, after a
// stop, every record the feed was sent, the ones Next never gave too.
func TestFeedHandsGroupsToATrainer(t *testing.T) {
	dir := t.TempDir()
	feed := gateway.NewFeed(2)
	feed.SetVersion(5)
	cfg := gateway.DefaultConfig()
	cfg.Dir, cfg.Token, cfg.GroupSize, cfg.Tokenizers = dir, "admin-token", 2, map[string]gateway.Tokenizer{"remote": byteTemplate{}}
	cfg.Sink, cfg.SinkWait = feed, 100*time.Millisecond
	gw, err := gateway.Open(context.Background(), cfg, nil, fakeBackend{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	h := &harness{t: t, srv: srv}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, group := range []string{"a", "a", "b", "b"} {
		id, c := h.session(`{"group":"` + group + `"}`)
		if _, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "remote",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("ids")}}); err != nil {
			t.Fatal(err)
		}
		h.reward(id, []string{`{"reward":1}`, `{"reward":0}`}[i%2])
	}
	// Two records queued: the queue is full.
	for deadline := time.Now().Add(10 * time.Second); feed.Queued() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d records queued, want 2", feed.Queued())
		}
	}
	if status, b := h.post("/sessions", `{"group":"c"}`); status != http.StatusServiceUnavailable {
		t.Errorf("POST /sessions with the queue full: %d %s, want 503", status, b)
	}
	first, err := feed.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if status, b := h.post("/sessions", `{"group":"c"}`); status != http.StatusOK {
		t.Errorf("POST /sessions with room in the queue: %d %s, want 200", status, b)
	}
	srv.Close()
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	if _, err := feed.Next(ctx); !errors.Is(err, gateway.ErrFeedClosed) {
		t.Errorf("Next after Close: %v, want ErrFeedClosed", err)
	}

	recs := readGroups(t, dir)
	if len(recs) != 2 {
		t.Fatalf("%d group records, want 2", len(recs))
	}
	if first.ID != recs[0].ID || first.PolicyVersion != 5 {
		t.Errorf("Next gave %s of version %d, want %s of version 5", first.ID, first.PolicyVersion, recs[0].ID)
	}
	sent, err := gateway.ReadSent(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 || sent[0].ID != recs[0].ID || sent[1].ID != recs[1].ID {
		var got []string
		for _, r := range sent {
			got = append(got, r.ID)
		}
		t.Errorf("ReadSent: %v, want %s and %s", got, recs[0].ID, recs[1].ID)
	}
}
