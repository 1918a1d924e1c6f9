package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/delegatelab/delegate/trajectory/gateway"
)

// metrics reads the gateway's /metrics with the admin token.
func (h *harness) metrics() string {
	h.t.Helper()
	req, _ := http.NewRequest("GET", h.srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer admin-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		h.t.Fatalf("GET /metrics: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// TestGatewayBounds fills a session's calls, a session's bytes and the
// gateway's bytes. Each call past a bound is refused before the backend
// with OpenAI's error, naming the bound and never the session. The first
// refusal of each bound is recorded, all are counted, and the sessions
// still end with their rewards. Once a group is written, its bytes are
// free again.
func TestGatewayBounds(t *testing.T) {
	ctx := context.Background()
	h, backend, ends := openFake(t, func(c *gateway.Config) {
		c.MaxSessionCalls, c.MaxSessionBytes, c.MaxTotalBytes = 3, 8192, 8192
	})
	ask := func(c openai.Client, text string) (*http.Response, error) {
		var raw *http.Response
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "remote",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}}, option.WithResponseInto(&raw))
		return raw, err
	}
	refused := func(name string, c openai.Client, text string, status int, code, says string) *http.Response {
		t.Helper()
		before := backend.calls.Load()
		raw, err := ask(c, text)
		e := apiError(t, err)
		if e.StatusCode != status || e.Code != code || !strings.Contains(e.Message, says) {
			t.Errorf("%s: %d %s %q, want %d %s saying %q", name, e.StatusCode, e.Code, e.Message, status, code, says)
		}
		for _, id := range h.ids {
			if strings.Contains(e.Message, id) || strings.Contains(e.Message, strings.TrimPrefix(id, "sess-")) {
				t.Errorf("%s: the refusal names a session id", name)
			}
		}
		if backend.calls.Load() != before {
			t.Errorf("%s: the backend saw a refused call", name)
		}
		return raw
	}

	idA, a := h.session(`{"group":"g"}`)
	for range 3 {
		if _, err := ask(a, "ids"); err != nil {
			t.Fatal(err)
		}
	}
	raw := refused("the fourth call", a, "ids", 429, "session_calls_exceeded", "bound of 3 recorded calls")
	if got := raw.Header.Get("X-Should-Retry"); got != "false" {
		t.Errorf("X-Should-Retry %q, want false: retrying cannot help", got)
	}
	refused("the fifth call", a, "ids", 429, "session_calls_exceeded", "bound of 3 recorded calls")

	idB, b := h.session(`{"group":"b"}`)
	refused("a request over the session's bytes", b, strings.Repeat("x", 9000), 413, "session_bytes_exceeded", "bound of 8192 recorded bytes")

	// C fills the gateway's bytes: A and B hold some, so the total bound
	// comes before C's own.
	idC, c := h.session(`{"group":"g"}`)
	var last error
	for range 3 {
		if _, last = ask(c, strings.Repeat("y", 1500)); last != nil {
			break
		}
	}
	if e := apiError(t, last); e.StatusCode != 429 || e.Code != "gateway_bytes_exceeded" || !strings.Contains(e.Message, "bound of 8192 bytes") {
		t.Errorf("C past the total: %d %s %q, want 429 gateway_bytes_exceeded", e.StatusCode, e.Code, e.Message)
	}
	idD, d := h.session(`{"group":"d"}`)
	raw = refused("a new session past the total", d, "ids", 429, "gateway_bytes_exceeded", "bound of 8192 bytes")
	if raw.Header.Get("Retry-After") == "" || raw.Header.Get("X-Should-Retry") != "" {
		t.Errorf("a refusal at the total bound has headers %v, want Retry-After and no X-Should-Retry: it passes", raw.Header)
	}

	// The sessions end with their rewards; A and C make a group, whose
	// bytes are then free.
	if rr := h.reward(idA, `{"reward":1}`); rr.Calls != 4 || rr.Samples["remote"] != 3 {
		t.Errorf("A: %+v, want 3 calls and the refusal recorded, 3 samples", rr)
	}
	h.reward(idB, `{"reward":0}`)
	if rr := h.reward(idC, `{"reward":0}`); rr.GroupsWritten != 1 {
		t.Errorf("C: %+v, want its group written", rr)
	}
	if _, err := ask(d, "ids"); err != nil {
		t.Errorf("a call once the group freed its bytes: %v", err)
	}
	h.reward(idD, `{"reward":1}`)

	for _, tc := range []struct {
		group          string
		calls, refused int
		status         int
		says           string
	}{
		{"g", 4, 2, 429, "bound of 3 recorded calls"},
		{"b", 1, 1, 413, "bound of 8192 recorded bytes"},
	} {
		t.Run(tc.group, func(t *testing.T) {
			f := ends.of(tc.group)[0]
			if len(f.Calls) != tc.calls || f.Refused != tc.refused {
				t.Fatalf("%d calls, %d refused, want %d and %d", len(f.Calls), f.Refused, tc.calls, tc.refused)
			}
			k := f.Calls[tc.calls-1]
			if !k.Failed || k.Status != tc.status || !strings.Contains(k.Error, tc.says) || len(k.Request.Messages) != 0 {
				t.Errorf("refused call %+v, want failed, %d, saying %q, its request not kept", k, tc.status, tc.says)
			}
		})
	}
	m := h.metrics()
	for _, want := range []string{
		`delegate_gateway_refused_calls_total{bound="session_calls"} 2`,
		`delegate_gateway_refused_calls_total{bound="session_bytes"} 1`,
		`delegate_gateway_refused_calls_total{bound="total_bytes"} 2`,
		`delegate_gateway_held_bytes `,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
