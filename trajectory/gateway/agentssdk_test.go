package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/delegatelab/delegate/store"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// TestGatewayAgentsSDKTurnBack sends a request the OpenAI Agents SDK for
// JavaScript wrote (testdata). It has an assistant turn with text and tool
// calls, sent back with the role and tool_calls copied into its text
// part. The gateway answers it and records the call with the
// turn's text and tool call, as it was before the SDK copied them.
func TestGatewayAgentsSDKTurnBack(t *testing.T) {
	body, err := os.ReadFile("testdata/agents-sdk-text-and-tool-calls.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	h := newHarness(t, dir, shipped(t))
	id, _ := h.session(`{"group":"sdk"}`)
	resp, err := http.Post(h.srv.URL+"/s/"+id+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s; want 200", resp.StatusCode, answer)
	}
	if rr := h.reward(id, `{"reward":0}`); rr.Calls != 1 || rr.Samples["delegator"] != 1 {
		t.Fatalf("reward answer %+v: want one call, one delegator sample", rr)
	}
	h.srv.Close()
	if err := h.gw.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(context.Background(), filepath.Join(dir, gateway.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fins, err := db.FinishedSessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(fins) != 1 {
		t.Fatalf("%d finished sessions, want 1", len(fins))
	}
	var f gateway.Finished
	if err := json.Unmarshal(fins[0].Data, &f); err != nil {
		t.Fatal(err)
	}
	msgs := f.Calls[0].Request.Messages
	if len(msgs) != 7 {
		t.Fatalf("the recorded request has %d messages, want 7", len(msgs))
	}
	turn := msgs[5]
	if got, want := turn.Content, "4814+0088\n4+8+0=12\n1+8+1=10\n8+0+1=09\n4+0+0=04\n=4902"; got != want {
		t.Errorf("turn 5's text %q, want %q", got, want)
	}
	if len(turn.ToolCalls) != 1 || turn.ToolCalls[0].Arguments != `{"question":"4902-2960"}` {
		t.Errorf("turn 5's tool calls %+v, want the one delegate call", turn.ToolCalls)
	}
}
