package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegatelab/delegate/trajectory/gateway"
)

// TestAdminPost: Post sends the token, tries a busy gateway again, and
// names a failing path without its session id.
func TestAdminPost(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer admin" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		switch {
		case r.URL.Path == "/sessions" && calls.Add(1) == 1:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case r.URL.Path == "/sessions":
			w.Write([]byte(`{"session_id":"sess-42"}`))
		default:
			http.Error(w, "no such session", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	a := gateway.Admin{Base: srv.URL, Token: "admin"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var cr struct {
		SessionID string `json:"session_id"`
	}
	if err := a.Post(ctx, "/sessions", `{}`, &cr); err != nil || cr.SessionID != "sess-42" || calls.Load() != 2 {
		t.Errorf("Post: err %v, session %q after %d calls; want sess-42 after 2", err, cr.SessionID, calls.Load())
	}
	err := a.Post(ctx, "/sessions/sess-42/reward", `{}`, &cr)
	if err == nil || !strings.Contains(err.Error(), "404") || strings.Contains(err.Error(), "42") {
		t.Errorf("Post to a missing session: %v, want a 404 that does not name the session", err)
	}
	bad := gateway.Admin{Base: srv.URL, Token: "wrong"}
	if err := bad.Post(ctx, "/sessions", `{}`, &cr); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("Post with a wrong token: %v, want 401", err)
	}
}
