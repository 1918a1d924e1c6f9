package gateway_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// fakeSink takes group records, failing the first fail sends.
type fakeSink struct {
	mu   sync.Mutex
	fail int
	got  []string // record ids
}

func (s *fakeSink) Wait(context.Context) (int, error) { return 3, nil }

func (s *fakeSink) Send(_ context.Context, g *rollout.GroupRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail > 0 {
		s.fail--
		return errors.New("the API is away")
	}
	s.got = append(s.got, g.ID)
	return nil
}

func (s *fakeSink) sent() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// TestGatewayPushResumes checks the sender. A failed send is tried again
// and the length sent is kept in PushedFile. A restart sends only what was
// not sent, and the record carries the sink's step.
func TestGatewayPushResumes(t *testing.T) {
	dir := t.TempDir()
	open := func(sink *fakeSink) (*gateway.Gateway, *httptest.Server) {
		cfg := gateway.DefaultConfig()
		cfg.Dir, cfg.Token, cfg.GroupSize, cfg.Tokenizers, cfg.Sink = dir, "admin-token", 2, map[string]gateway.Tokenizer{"remote": byteTemplate{}}, sink
		gw, err := gateway.Open(context.Background(), cfg, nil, fakeBackend{})
		if err != nil {
			t.Fatal(err)
		}
		return gw, httptest.NewServer(gw)
	}
	await := func(sink *fakeSink, n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); len(sink.sent()) < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d records sent, want %d", len(sink.sent()), n)
			}
		}
	}
	sink := &fakeSink{fail: 1}
	gw, srv := open(sink)
	h := &harness{t: t, srv: srv}
	for range 2 {
		id, c := h.session(`{"group":"g"}`)
		if _, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "remote",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("ids")}}); err != nil {
			t.Fatal(err)
		}
		h.reward(id, `{"reward":1}`)
	}
	await(sink, 1) // after a retry
	srv.Close()
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readGroups(t, dir)
	if len(recs) != 1 {
		t.Fatalf("%d group records, want 1", len(recs))
	}
	if sink.sent()[0] != recs[0].ID || recs[0].PolicyVersion != 3 {
		t.Fatalf("sent %v of record %s (policy version %d), want it, at the sink's step 3", sink.sent(), recs[0].ID, recs[0].PolicyVersion)
	}
	st, err := os.Stat(filepath.Join(dir, gateway.GroupsFile))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, gateway.PushedFile))
	if err != nil || strings.TrimSpace(string(b)) != strconv.FormatInt(st.Size(), 10) {
		t.Fatalf("%s holds %q (%v), want %d", gateway.PushedFile, b, err, st.Size())
	}

	// A restart sends nothing again.
	again := &fakeSink{}
	gw, srv = open(again)
	time.Sleep(200 * time.Millisecond)
	srv.Close()
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	if len(again.sent()) != 0 {
		t.Errorf("a restart sent %v again", again.sent())
	}
	// One whose sent length was lost sends the record again.
	if err := os.WriteFile(filepath.Join(dir, gateway.PushedFile), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	third := &fakeSink{}
	gw, srv = open(third)
	await(third, 1)
	srv.Close()
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
}
