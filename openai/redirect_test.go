package openai

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestRedirectDropsKeyAcrossOrigins redirects a chat call with 307 and checks where the API key arrives.
// On the same origin it stays; to the same host at another port it must not follow.
func TestRedirectDropsKeyAcrossOrigins(t *testing.T) {
	var gotAuth chan string
	final := func(w http.ResponseWriter, r *http.Request) {
		gotAuth <- r.Header.Get("Authorization")
		io.WriteString(w, okBody)
	}
	// Both servers listen before either serves, so that each handler
	// knows the other's URL.
	first := httptest.NewUnstartedServer(nil)
	other := httptest.NewUnstartedServer(nil)
	firstURL := "http://" + first.Listener.Addr().String()
	otherURL := "http://" + other.Listener.Addr().String()
	first.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/same/"):
			final(w, r)
		case r.URL.Query().Get("to") == "same":
			http.Redirect(w, r, firstURL+"/same/chat/completions", http.StatusTemporaryRedirect)
		case r.URL.Query().Get("to") == "back":
			// Away and back again: the key stays dropped.
			http.Redirect(w, r, otherURL+"/bounce", http.StatusTemporaryRedirect)
		default:
			http.Redirect(w, r, otherURL+"/v1/chat/completions", http.StatusTemporaryRedirect)
		}
	})
	other.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bounce" {
			http.Redirect(w, r, firstURL+"/same/chat/completions", http.StatusTemporaryRedirect)
			return
		}
		final(w, r)
	})
	first.Start()
	defer first.Close()
	other.Start()
	defer other.Close()

	tests := []struct {
		name, base string
		http       *http.Client // nil: the package's own
		want       string
	}{
		{"same origin keeps the key", firstURL + "/v1?to=same", nil, "Bearer " + testKey},
		{"another port drops it", firstURL + "/v1", nil, ""},
		{"another port, caller's client", firstURL + "/v1", &http.Client{}, ""},
		{"away and back drops it", firstURL + "/v1?to=back", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotAuth = make(chan string, 4)
			// The query rides on the base URL so that the first server
			// knows where to send the call.
			base, query, _ := strings.Cut(tt.base, "?")
			cfg := testConfig(base, func(c *Config) { c.APIKey, c.Timeout = testKey, 5*time.Second })
			var opts []Option
			if tt.http != nil {
				opts = append(opts, WithHTTPClient(tt.http))
			}
			c, err := New(cfg, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if query != "" {
				c.eps[0].url += "?" + query
			}
			if _, err := c.Chat(context.Background(), userReq("x")); err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if got := <-gotAuth; got != tt.want {
				t.Errorf("Authorization after redirect = %q; want %q", got, tt.want)
			}
			if tt.http != nil && tt.http.CheckRedirect != nil {
				t.Error("the caller's client was changed")
			}
		})
	}
}
