package edge

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"ok": "yes"})
	})
	open := Config{}.Handler(ok)
	locked := Config{Token: "s3cret", Open: []string{"/health"}, Realm: "test"}.Handler(ok)
	named := Config{Hosts: []string{"trainer.internal"}}.Handler(ok)
	basic := Config{Token: "s3cret", Basic: true, Realm: "test"}.Handler(ok)
	tests := []struct {
		name   string
		h      http.Handler
		method string
		path   string
		host   string
		header map[string]string
		body   string
		want   int
		code   string
	}{
		{name: "loopback IP", h: open, host: "127.0.0.1:8000", want: 200},
		{name: "IPv6 loopback", h: open, host: "[::1]:8000", want: 200},
		{name: "IPv6 literal with a zone", h: open, host: "[fe80::1%25eth0]:8000", want: 403, code: "host_not_allowed"},
		{name: "IPv4-mapped IPv6 literal", h: open, host: "[::ffff:127.0.0.1]:8000", want: 200},
		{name: "an IPv4 address with a leading zero", h: open, host: "127.0.0.01:8000", want: 403, code: "host_not_allowed"},
		{name: "localhost", h: open, host: "localhost:8000", want: 200},
		{name: "localhost with a trailing dot", h: open, host: "LOCALHOST.:8000", want: 200},
		{name: "a .localhost name", h: open, host: "app.localhost", want: 200},
		{name: "DNS rebinding name", h: open, host: "attacker.example:8000", want: 403, code: "host_not_allowed"},
		{name: "no Host", h: open, host: "", want: 403, code: "host_not_allowed"},
		{name: "a listed name", h: named, host: "Trainer.Internal:8000", want: 200},
		{name: "an unlisted name", h: named, host: "other.internal:8000", want: 403, code: "host_not_allowed"},
		{name: "any name with a token", h: locked, host: "api.cluster:8000", header: map[string]string{"Authorization": "Bearer s3cret"}, want: 200},
		{name: "cross-site GET", h: open, host: "127.0.0.1:8000", header: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: 403, code: "cross_origin"},
		{name: "same-site GET from another port", h: open, host: "127.0.0.1:8000", header: map[string]string{"Sec-Fetch-Site": "same-site"}, want: 403, code: "cross_origin"},
		{name: "same-origin GET", h: open, host: "127.0.0.1:8000", header: map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:8000"}, want: 200},
		{name: "typed URL", h: open, host: "127.0.0.1:8000", header: map[string]string{"Sec-Fetch-Site": "none"}, want: 200},
		{name: "foreign Origin", h: open, method: "POST", host: "127.0.0.1:8000", header: map[string]string{"Origin": "http://evil.example"}, body: "{}", want: 403, code: "cross_origin"},
		{name: "null Origin", h: open, method: "POST", host: "127.0.0.1:8000", header: map[string]string{"Origin": "null"}, body: "{}", want: 403, code: "cross_origin"},
		{name: "text/plain body", h: open, method: "POST", host: "127.0.0.1:8000", header: map[string]string{"Content-Type": "text/plain"}, body: "{}", want: 415, code: "unsupported_media_type"},
		{name: "form body", h: open, method: "POST", host: "127.0.0.1:8000", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: "a=b", want: 415, code: "unsupported_media_type"},
		{name: "JSON body", h: open, method: "POST", host: "127.0.0.1:8000", header: map[string]string{"Content-Type": "application/json; charset=utf-8"}, body: "{}", want: 200},
		{name: "bare JSON media type", h: open, method: "POST", host: "127.0.0.1:8000", header: map[string]string{"Content-Type": "application/json"}, body: "{}", want: 200},
		{name: "JSON media type in capitals", h: open, method: "POST", host: "127.0.0.1:8000", header: map[string]string{"Content-Type": "Application/JSON"}, body: "{}", want: 200},
		{name: "JSON media type with a bad parameter", h: open, method: "POST", host: "127.0.0.1:8000", header: map[string]string{"Content-Type": "application/json; charset"}, body: "{}", want: 415, code: "unsupported_media_type"},
		{name: "+json body", h: open, method: "POST", host: "127.0.0.1:8000", header: map[string]string{"Content-Type": "application/problem+json"}, body: "{}", want: 200},
		{name: "no media type", h: open, method: "POST", host: "127.0.0.1:8000", body: "{}", want: 200},
		{name: "no token", h: locked, host: "127.0.0.1:8000", want: 401, code: "invalid_api_key"},
		{name: "wrong token", h: locked, host: "127.0.0.1:8000", header: map[string]string{"Authorization": "Bearer s3cre"}, want: 401, code: "invalid_api_key"},
		{name: "token with another scheme", h: locked, host: "127.0.0.1:8000", header: map[string]string{"Authorization": "Basic s3cret"}, want: 401, code: "invalid_api_key"},
		{name: "lower-case scheme", h: locked, host: "127.0.0.1:8000", header: map[string]string{"Authorization": "bearer s3cret"}, want: 200},
		{name: "open path", h: locked, path: "/health", host: "127.0.0.1:8000", want: 200},
		{name: "Basic password refused without Basic", h: locked, host: "127.0.0.1:8000", header: map[string]string{"Authorization": basicAuth("u", "s3cret")}, want: 401, code: "invalid_api_key"},
		{name: "Basic password, any user", h: basic, host: "127.0.0.1:8000", header: map[string]string{"Authorization": basicAuth("trl", "s3cret")}, want: 200},
		{name: "Basic password, empty user", h: basic, host: "127.0.0.1:8000", header: map[string]string{"Authorization": basicAuth("", "s3cret")}, want: 200},
		{name: "Basic with a wrong password", h: basic, host: "127.0.0.1:8000", header: map[string]string{"Authorization": basicAuth("s3cret", "s3cre")}, want: 401, code: "invalid_api_key"},
		{name: "Basic with the token as user", h: basic, host: "127.0.0.1:8000", header: map[string]string{"Authorization": basicAuth("s3cret", "")}, want: 401, code: "invalid_api_key"},
		{name: "bearer still with Basic", h: basic, host: "127.0.0.1:8000", header: map[string]string{"Authorization": "Bearer s3cret"}, want: 200},
		{name: "nothing with Basic", h: basic, host: "127.0.0.1:8000", want: 401, code: "invalid_api_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, path := tt.method, tt.path
			if method == "" {
				method = "GET"
			}
			if path == "" {
				path = "/x"
			}
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			r := httptest.NewRequest(method, path, body)
			r.Host = tt.host
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			tt.h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("status = %d, want %d (body %s)", w.Code, tt.want, w.Body)
			}
			if tt.code != "" && !strings.Contains(w.Body.String(), `"code":"`+tt.code+`"`) {
				t.Errorf("body = %s, want code %q", w.Body, tt.code)
			}
			if tt.want == 401 && w.Header().Get("WWW-Authenticate") != `Bearer realm="test"` {
				t.Errorf("WWW-Authenticate = %q", w.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

func TestRefuseShape(t *testing.T) {
	var got Refusal
	h := Config{Refuse: func(w http.ResponseWriter, rf Refusal) { got = rf; w.WriteHeader(rf.Status) }}.Handler(http.NotFoundHandler())
	r := httptest.NewRequest("GET", "/", nil)
	r.Host = "evil.example"
	h.ServeHTTP(httptest.NewRecorder(), r)
	if got.Status != http.StatusForbidden || got.Code != "host_not_allowed" || !strings.Contains(got.Message, "evil.example") {
		t.Errorf("refusal = %+v, want 403 host_not_allowed naming the host", got)
	}
}

// TestOverRealHTTP sends a browser's cross-site request and a rebound
// Host over a real connection, as a page would.
func TestOverRealHTTP(t *testing.T) {
	srv := httptest.NewServer(Config{}.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	defer srv.Close()
	do := func(host string, header map[string]string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), "POST", srv.URL+"/reset", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if got := do("", map[string]string{"Content-Type": "application/json"}); got != http.StatusNoContent {
		t.Errorf("plain client: %d, want 204", got)
	}
	if got := do("rebound.example:80", map[string]string{"Content-Type": "application/json"}); got != http.StatusForbidden {
		t.Errorf("rebound Host: %d, want 403", got)
	}
	if got := do("", map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}); got != http.StatusForbidden {
		t.Errorf("cross-site page: %d, want 403", got)
	}
}

// basicAuth is an Authorization header of HTTP Basic auth.
func basicAuth(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

func TestAuthorized(t *testing.T) {
	hash := sha256.Sum256([]byte("k"))
	for _, h := range []string{"", "Bearer", "Bearer ", "Bearerk", "Token k", "Bearer kk"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", h)
		if Authorized(r, hash) {
			t.Errorf("Authorization %q accepted", h)
		}
	}
	for _, h := range []string{"Bearer k", "BEARER k", " Bearer  k "} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", h)
		if !Authorized(r, hash) {
			t.Errorf("Authorization %q refused", h)
		}
	}
}

func TestCheckExposure(t *testing.T) {
	tests := []struct {
		addr            string
		token, insecure bool
		wantErr         string
	}{
		{addr: "127.0.0.1:8000"},
		{addr: "[::1]:8000"},
		{addr: "localhost:8000"},
		{addr: "0.0.0.0:8000", wantErr: "beyond loopback"},
		{addr: ":8000", wantErr: "beyond loopback"},
		{addr: "0.0.0.0:8000", token: true},
		{addr: "0.0.0.0:8000", insecure: true},
		{addr: "nonsense", wantErr: "missing port"},
	}
	for _, tt := range tests {
		err := CheckExposure(tt.addr, tt.token, tt.insecure, "--token")
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("CheckExposure(%q, %v, %v) = %v, want nil", tt.addr, tt.token, tt.insecure, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("CheckExposure(%q, %v, %v) = %v, want an error with %q", tt.addr, tt.token, tt.insecure, err, tt.wantErr)
		}
	}
}
