package atropos

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestClientRedirectDropsToken redirects a call with 307 and checks where
// the token arrives. On the same origin it stays. To another port on the
// same host it must not follow.
func TestClientRedirectDropsToken(t *testing.T) {
	got := make(chan string, 1)
	// Both servers listen before either serves, so that each handler
	// knows the other's URL.
	first := httptest.NewUnstartedServer(nil)
	other := httptest.NewUnstartedServer(nil)
	firstURL := "http://" + first.Listener.Addr().String()
	otherURL := "http://" + other.Listener.Addr().String()
	final := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		w.Write([]byte(`{}`))
	})
	first.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, firstURL+"/final", http.StatusTemporaryRedirect)
		case "/final":
			final(w, r)
		default:
			http.Redirect(w, r, otherURL+"/final", http.StatusTemporaryRedirect)
		}
	})
	other.Config.Handler = final
	first.Start()
	defer first.Close()
	other.Start()
	defer other.Close()

	tests := []struct {
		name, path string
		http       *http.Client
		want       string
	}{
		{"same origin keeps the token", "/same", nil, "Bearer tok"},
		{"another port drops it", "/away", nil, ""},
		{"another port, caller's client", "/away", &http.Client{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultClient()
			c.URL, c.Token, c.HTTP, c.Retries = firstURL, "tok", tt.http, 1
			var out map[string]any
			if err := c.do(context.Background(), http.MethodPost, tt.path, map[string]int{"a": 1}, &out); err != nil {
				t.Fatalf("do: %v", err)
			}
			if g := <-got; g != tt.want {
				t.Errorf("Authorization after redirect = %q; want %q", g, tt.want)
			}
			if tt.http != nil && tt.http.CheckRedirect != nil {
				t.Error("the caller's client was changed")
			}
		})
	}
}
