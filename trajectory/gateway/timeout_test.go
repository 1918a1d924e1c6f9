package gateway_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/delegatelab/delegate/store"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// TestGatewayGroupTimeout closes groups of 3 that wait an hour on a
// settable clock, across a restart. A group of two finished sessions is
// written and sent as a group of 2 that says it timed out; a group of
// one is dropped and counted. The wait survives the restart: a group
// whose hour has not passed keeps waiting.
func TestGatewayGroupTimeout(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := &clock{}
	sink := &fakeSink{}
	open := func() *harness {
		cfg := gateway.DefaultConfig()
		cfg.Dir, cfg.Token, cfg.GroupSize, cfg.GroupTimeout, cfg.Now = dir, "admin-token", 3, time.Hour, clk.now
		cfg.Tokenizers, cfg.Sink = map[string]gateway.Tokenizer{"remote": byteTemplate{}}, sink
		gw, err := gateway.Open(ctx, cfg, nil, fakeBackend{})
		if err != nil {
			t.Fatal(err)
		}
		return &harness{t: t, srv: httptest.NewServer(gw), gw: gw, cfg: cfg}
	}
	finish := func(h *harness, group, reward string) {
		id, c := h.session(`{"group":"` + group + `"}`)
		if _, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "remote",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("ids")}}); err != nil {
			t.Fatal(err)
		}
		h.reward(id, `{"reward":`+reward+`}`)
	}
	closeGateway := func(h *harness) {
		h.srv.Close()
		if err := h.gw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	groupsLen := func() int64 {
		st, err := os.Stat(filepath.Join(dir, gateway.GroupsFile))
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}

	h := open()
	finish(h, "two", "1")
	finish(h, "two", "0")
	finish(h, "one", "1")
	clk.advance(30 * time.Minute)
	closeGateway(h) // as a SIGKILL leaves it: the sessions wait in the store

	h = open()
	defer closeGateway(h)
	finish(h, "later", "1")
	time.Sleep(1500 * time.Millisecond) // more than the timer's second
	if n := groupsLen(); n != 0 {
		t.Fatalf("groups.jsonl holds %d bytes half an hour in, want none", n)
	}
	clk.advance(40 * time.Minute) // 70 minutes after the first sessions, 40 after "later"
	var counts map[string]int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if counts, err = h.gw.Counts(ctx); err != nil {
			t.Fatal(err)
		}
		if counts[store.SessionDropped] == 1 && groupsLen() > 0 && len(sink.sent()) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions %v, %d bytes of groups, sent %v: want one group written and sent, one session dropped", counts, groupsLen(), sink.sent())
		}
	}
	recs := readGroups(t, dir)
	if len(recs) != 1 {
		t.Fatalf("%d group records, want 1", len(recs))
	}
	r := recs[0]
	if !strings.HasPrefix(r.ID, "two#") || len(r.Rollouts) != 2 || r.GroupOverrides.GroupSize != 2 || sink.sent()[0] != r.ID {
		t.Errorf("record %s of %d rollouts, group size %d, sent %v: want group two's 2 sessions, sent", r.ID, len(r.Rollouts), r.GroupOverrides.GroupSize, sink.sent())
	}
	if len(r.Advantages) != 2 || r.Advantages[0] <= 0 || r.Advantages[0]+r.Advantages[1] != 0 {
		t.Errorf("advantages %v, want opposite ones over the 2 sessions", r.Advantages)
	}
	if len(r.Missing) != 1 || r.Missing[0].Index != 2 || !strings.Contains(r.Missing[0].Error, "timed out after 1h0m0s with 2 of its 3 sessions") {
		t.Errorf("missing %+v, want the third session, timed out", r.Missing)
	}
	if want := map[string]int{store.SessionFinished: 3, store.SessionDropped: 1}; !mapsEqual(counts, want) {
		t.Errorf("stored sessions %v, want %v: two grouped, later waiting, one dropped", counts, want)
	}
	m := h.metrics()
	for _, want := range []string{
		`delegate_gateway_groups_timed_out_total{outcome="written"} 1`,
		`delegate_gateway_groups_timed_out_total{outcome="dropped"} 1`,
		`delegate_gateway_dropped_sessions_total 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
