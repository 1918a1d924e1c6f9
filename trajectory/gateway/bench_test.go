package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/server"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// BenchmarkCall measures one chat completion over loopback HTTP. It goes
// through package server alone, then through the gateway, which checks
// the session and records the call. The model answers at once, so the
// difference is the gateway's cost per call.
func BenchmarkCall(b *testing.B) {
	fake := func() delegate.Model {
		return modeltest.New("m", func(context.Context, *delegate.Request) (*delegate.Response, error) {
			r := modeltest.Text("ok")
			r.PromptTokenIDs = []int{1, 2, 3}
			r.Choices[0].Logprobs = []delegate.TokenLogprob{{Token: "ok", TokenID: 4, Logprob: -0.1}}
			return r, nil
		})
	}
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	run := func(b *testing.B, url, key string) {
		for b.Loop() {
			req, _ := http.NewRequest("POST", url, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	b.Run("server", func(b *testing.B) {
		s, err := server.New(nil, fake())
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(s)
		defer srv.Close()
		run(b, srv.URL+"/v1/chat/completions", "")
	})
	b.Run("gateway", func(b *testing.B) {
		cfg := gateway.DefaultConfig()
		cfg.Dir, cfg.TTL = b.TempDir(), 1<<40
		gw, err := gateway.Open(context.Background(), cfg, nil, fake())
		if err != nil {
			b.Fatal(err)
		}
		defer gw.Close()
		srv := httptest.NewServer(gw)
		defer srv.Close()
		resp, err := http.Post(srv.URL+"/sessions", "application/json", strings.NewReader(`{"group":"g"}`))
		if err != nil {
			b.Fatal(err)
		}
		var cr struct {
			SessionID string `json:"session_id"`
		}
		decode(b, resp, &cr)
		run(b, srv.URL+"/v1/chat/completions", cr.SessionID)
	})
}

func decode(b *testing.B, resp *http.Response, v any) {
	b.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		b.Fatal(err)
	}
}
