package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// TestGatewayLogsOneLinePerRequest checks that an agent's call is one
// access line, the gateway's, and that it names the route, not the path.
func TestGatewayLogsOneLinePerRequest(t *testing.T) {
	var logs syncBuffer
	cfg := gateway.DefaultConfig()
	cfg.Dir = t.TempDir()
	m := modeltest.New("m", func(context.Context, *delegate.Request) (*delegate.Response, error) { return modeltest.Text("ok"), nil })
	gw, err := gateway.Open(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)), m)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	srv := httptest.NewServer(gw)
	defer srv.Close()

	post := func(path, key, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %s %v", path, resp.StatusCode, out, err)
		}
		return out
	}
	created := post("/sessions", "", `{"group":"g"}`)
	id, _, _ := strings.Cut(strings.TrimPrefix(string(created), `{"session_id":"`), `"`)
	post("/v1/chat/completions", id, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	post("/s/"+id+"/v1/chat/completions", "", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)

	var got []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "msg=request ") {
			_, route, _ := strings.Cut(line, "route=")
			route, _, _ = strings.Cut(route, " ")
			got = append(got, route)
		}
	}
	want := []string{"/sessions", "/v1/chat/completions", "/s/{id}/v1/chat/completions"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("access lines by route %q, want %q:\n%s", got, want, logs.String())
	}
	if strings.Contains(logs.String(), strings.TrimPrefix(id, "sess-")) {
		t.Errorf("a session id is in the log:\n%s", logs.String())
	}
}
