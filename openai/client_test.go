package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/delegatelab/delegate"
)

const testKey = "sk-test-SECRET-0123456789"

const okBody = `{"id":"chatcmpl-ok","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"5"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`

// newClient returns a client for srv with tiny backoffs; mod adjusts cfg.
func newClient(t *testing.T, srv *httptest.Server, mod func(*Config), opts ...Option) *Client {
	t.Helper()
	cfg := testConfig(srv.URL+"/v1", func(c *Config) {
		c.APIKey, c.MinBackoff, c.MaxBackoff, c.Timeout = testKey, time.Millisecond, 5*time.Millisecond, 5*time.Second
	})
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg, append([]Option{WithHTTPClient(srv.Client())}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func userReq(text string) *delegate.Request {
	return &delegate.Request{Messages: []delegate.Message{delegate.User(text)}}
}

// apiError asserts that err carries an *APIError and returns it.
func apiError(t *testing.T, err error) *delegate.APIError {
	t.Helper()
	var ae *delegate.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v (%T), want one carrying *delegate.APIError", err, err)
	}
	return ae
}

func TestChatSendsRequest(t *testing.T) {
	var got struct {
		method, path, auth, ctype string
		body                      map[string]any
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.method, got.path, got.auth, got.ctype = r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type")
		if err := json.NewDecoder(r.Body).Decode(&got.body); err != nil {
			t.Errorf("server: decode request: %v", err)
		}
		io.WriteString(w, okBody)
	}))
	defer srv.Close()
	c := newClient(t, srv, nil)
	resp, err := c.Chat(context.Background(), userReq("2+3?"))
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if got.method != http.MethodPost || got.path != "/v1/chat/completions" {
		t.Errorf("request line = %s %s, want POST /v1/chat/completions", got.method, got.path)
	}
	if want := "Bearer " + testKey; got.auth != want {
		t.Errorf("Authorization = %q, want %q", got.auth, want)
	}
	if got.ctype != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got.ctype)
	}
	if got.body["model"] != "m" {
		t.Errorf("body model = %v, want m", got.body["model"])
	}
	if resp.Text() != "5" || resp.Usage != (delegate.Usage{PromptTokens: 9, CompletionTokens: 1}) || resp.Retries != 0 || resp.Latency <= 0 {
		t.Errorf("response = %+v, want text 5, usage 9/1, no retries, positive latency", resp)
	}
}

func TestChatWithoutKeySendsNoAuthorization(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Header["Authorization"]; ok {
			t.Errorf("Authorization header sent without a key")
		}
		io.WriteString(w, okBody)
	}))
	defer srv.Close()
	c := newClient(t, srv, func(c *Config) { c.APIKey = "" })
	if _, err := c.Chat(context.Background(), userReq("x")); err != nil {
		t.Fatalf("Chat: %v", err)
	}
}

// script is a handler that answers the n-th request (0-based) with steps[n],
// repeating the last step, and counts requests.
type script struct {
	steps []http.HandlerFunc
	n     atomic.Int32
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := int(s.n.Add(1)) - 1
	s.steps[min(i, len(s.steps)-1)](w, r)
}

func respond(status int, hdr map[string]string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// resetMidBody sends the headers and part of a body, then closes the
// connection.
func resetMidBody(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(okBody), okBody[:40])
		buf.Flush()
	}
}

// slow waits for d or for the client to go away, then answers okBody.
func slow(d time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// The server notices a closed connection only once the body is read.
		io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(d):
			io.WriteString(w, okBody)
		case <-r.Context().Done():
		}
	}
}

func TestChatFaults(t *testing.T) {
	var ok http.HandlerFunc = respond(200, nil, okBody)
	tests := []struct {
		name  string
		steps func(t *testing.T) []http.HandlerFunc
		cfg   func(*Config)
		// on success
		wantRetries int
		wantWaits   []time.Duration // exact waits, when the server dictates them
		// on failure
		wantErr      bool
		wantStatus   int
		wantType     string
		wantCode     string
		wantAttempts int
		wantRequests int32
	}{
		{
			name: "429 with Retry-After then success",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{respond(429, map[string]string{"Retry-After": "2"}, `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`), ok}
			},
			wantRetries: 1, wantWaits: []time.Duration{2 * time.Second}, wantRequests: 2,
		},
		{
			name: "retry-after-ms honoured and long Retry-After capped",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{
					respond(429, map[string]string{"retry-after-ms": "1500"}, `{}`),
					respond(503, map[string]string{"Retry-After": "86400"}, `{}`),
					ok,
				}
			},
			wantRetries: 2, wantWaits: []time.Duration{1500 * time.Millisecond, time.Minute}, wantRequests: 3,
		},
		{
			name: "429 for a spent quota not retried",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{respond(429, nil, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`), ok}
			},
			wantErr: true, wantStatus: 429, wantType: "insufficient_quota", wantCode: "insufficient_quota", wantAttempts: 1, wantRequests: 1,
		},
		{
			name: "500 then success",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{respond(500, nil, "internal error"), ok}
			},
			wantRetries: 1, wantRequests: 2,
		},
		{
			name: "malformed JSON then success",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{respond(200, nil, `{"choices":[{"message":`), ok}
			},
			wantRetries: 1, wantRequests: 2,
		},
		{
			name: "malformed JSON every time",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{respond(200, nil, `not json`)}
			},
			cfg:     func(c *Config) { c.MaxRetries = 2 },
			wantErr: true, wantStatus: 200, wantType: delegate.ErrKindDecode, wantAttempts: 3, wantRequests: 3,
		},
		{
			name: "error object in a 200 body, retried by its code",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{respond(200, nil, `{"error":{"message":"upstream overloaded","type":"server_error","code":502}}`), ok}
			},
			wantRetries: 1, wantRequests: 2,
		},
		{
			name: "connection reset mid-body then success",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{resetMidBody(t), ok}
			},
			wantRetries: 1, wantRequests: 2,
		},
		{
			name: "connection reset every time",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{resetMidBody(t)}
			},
			cfg:     func(c *Config) { c.MaxRetries = 1 },
			wantErr: true, wantStatus: 200, wantType: delegate.ErrKindConnection, wantAttempts: 2, wantRequests: 2,
		},
		{
			name: "slower than the timeout then success",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{slow(10 * time.Second), ok}
			},
			cfg:         func(c *Config) { c.Timeout = 300 * time.Millisecond },
			wantRetries: 1, wantRequests: 2,
		},
		{
			name: "always slower than the timeout",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{slow(10 * time.Second)}
			},
			cfg:     func(c *Config) { c.Timeout = 50 * time.Millisecond; c.MaxRetries = 1 },
			wantErr: true, wantType: delegate.ErrKindTimeout, wantAttempts: 2, wantRequests: 2,
		},
		{
			name: "400 not retried",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{respond(400, nil, `{"object":"error","message":"max_tokens too large","type":"BadRequestError","param":null,"code":400}`), ok}
			},
			wantErr: true, wantStatus: 400, wantType: "BadRequestError", wantCode: "400", wantAttempts: 1, wantRequests: 1,
		},
		{
			name: "404 unknown model not retried",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{respond(404, nil, `{"error":{"message":"The model does not exist","type":"invalid_request_error","code":"model_not_found"}}`), ok}
			},
			wantErr: true, wantStatus: 404, wantType: "invalid_request_error", wantCode: "model_not_found", wantAttempts: 1, wantRequests: 1,
		},
		{
			name: "503 until retries run out",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{respond(503, nil, `{"error":{"message":"overloaded","type":"server_error","code":null}}`)}
			},
			wantErr: true, wantStatus: 503, wantType: "server_error", wantAttempts: 5, wantRequests: 5,
		},
		{
			name: "retries disabled",
			steps: func(t *testing.T) []http.HandlerFunc {
				return []http.HandlerFunc{respond(502, nil, `bad gateway`), ok}
			},
			cfg:     func(c *Config) { c.MaxRetries = 0 },
			wantErr: true, wantStatus: 502, wantAttempts: 1, wantRequests: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &script{steps: tt.steps(t)}
			srv := httptest.NewServer(s)
			defer srv.Close()
			var mu sync.Mutex
			var waits []time.Duration
			rec := WithSleep(func(ctx context.Context, d time.Duration) error {
				mu.Lock()
				waits = append(waits, d)
				mu.Unlock()
				return ctx.Err()
			})
			c := newClient(t, srv, tt.cfg, rec)
			resp, err := c.Chat(context.Background(), userReq("q"))
			if got := s.n.Load(); got != tt.wantRequests {
				t.Errorf("server saw %d requests, want %d", got, tt.wantRequests)
			}
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Chat succeeded, want an error")
				}
				ae := apiError(t, err)
				if ae.Status != tt.wantStatus || ae.Type != tt.wantType || ae.Code != tt.wantCode || ae.Attempts != tt.wantAttempts || ae.Model != "m" {
					t.Errorf("error = %+v, want status %d type %q code %q attempts %d model m", ae, tt.wantStatus, tt.wantType, tt.wantCode, tt.wantAttempts)
				}
				if strings.Contains(err.Error(), testKey) {
					t.Errorf("error %q contains the API key", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if resp.Text() != "5" || resp.Retries != tt.wantRetries {
				t.Errorf("response text %q retries %d, want 5 and %d", resp.Text(), resp.Retries, tt.wantRetries)
			}
			if len(waits) != tt.wantRetries {
				t.Errorf("waited %d times, want %d", len(waits), tt.wantRetries)
			}
			for i, w := range tt.wantWaits {
				if i < len(waits) && waits[i] != w {
					t.Errorf("wait %d = %v, want %v", i, waits[i], w)
				}
			}
		})
	}
}

func TestBackoffBounds(t *testing.T) {
	c := &Client{cfg: Config{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}}
	for n, ceil := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		ceil *= time.Millisecond
		for range 50 {
			if d := c.backoff(n+1, 0); d < 0 || d > ceil {
				t.Fatalf("backoff(%d) = %v, want within [0, %v]", n+1, d, ceil)
			}
		}
	}
	if got, want := c.backoff(1, 3*time.Second), 3*time.Second; got != want {
		t.Errorf("backoff with Retry-After 3s = %v, want %v", got, want)
	}
}

func TestUnauthorizedNeverShowsKey(t *testing.T) {
	// The server echoes the key, as some do; the client must redact it.
	srv := httptest.NewServer(respond(401, nil, `{"error":{"message":"Incorrect API key provided: `+testKey+`.","type":"invalid_request_error","code":"invalid_api_key"}}`))
	defer srv.Close()
	var logs bytes.Buffer
	c := newClient(t, srv, nil, WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	_, err := c.Chat(context.Background(), userReq("q"))
	ae := apiError(t, err)
	if ae.Status != 401 || ae.Attempts != 1 || ae.Code != "invalid_api_key" {
		t.Errorf("error = %+v, want status 401, one attempt, code invalid_api_key", ae)
	}
	for name, s := range map[string]string{
		"error": err.Error(), "message": ae.Message, "logs": logs.String(),
		"client": fmt.Sprint(c), "config %v": fmt.Sprintf("%v", c.cfg), "config %#v": fmt.Sprintf("%#v", c.cfg), "config %+v": fmt.Sprintf("%+v", c.cfg),
	} {
		if strings.Contains(s, testKey) {
			t.Errorf("%s contains the API key: %s", name, s)
		}
	}
	if !strings.Contains(ae.Message, "[redacted]") {
		t.Errorf("message = %q, want the echoed key replaced by [redacted]", ae.Message)
	}
}

func TestUnauthorizedIsAnAuthenticationFailure(t *testing.T) {
	srv := httptest.NewServer(respond(401, nil, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`))
	defer srv.Close()
	tests := []struct {
		name, base, key string
		want            string
	}{
		{"key refused", srv.URL + "/v1", testKey, "authentication failed at " + srv.URL + "/v1/chat/completions (model m): the endpoint refused the API key configured for it: Incorrect API key provided."},
		{"no key", srv.URL + "/v1", "", "authentication failed at " + srv.URL + "/v1/chat/completions (model m): the endpoint wants an API key and none is configured: Incorrect API key provided."},
		{"credentials not shown", strings.Replace(srv.URL, "http://", "http://user:pw@", 1) + "/v1", testKey, "authentication failed at " + srv.URL + "/v1/chat/completions (model m)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(testConfig(tt.base, func(c *Config) { c.APIKey, c.MaxRetries = tt.key, 2 }))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Chat(context.Background(), userReq("q"))
			var auth *AuthError
			if !errors.As(err, &auth) {
				t.Fatalf("error = %v (%T), want an *AuthError", err, err)
			}
			if ae := apiError(t, err); ae.Status != 401 || ae.Attempts != 1 {
				t.Errorf("api error = %+v, want status 401 after one attempt", ae)
			}
			got := err.Error()
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("error = %q, want it to start %q", got, tt.want)
			}
			for _, never := range []string{testKey, "pw", "model api error"} {
				if strings.Contains(got, never) {
					t.Errorf("error %q contains %q", got, never)
				}
			}
		})
	}
}

func TestRetryLogsOmitKey(t *testing.T) {
	s := &script{steps: []http.HandlerFunc{respond(500, nil, "key "+testKey+" broke"), respond(200, nil, okBody)}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	var logs bytes.Buffer
	c := newClient(t, srv, nil, WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	if _, err := c.Chat(context.Background(), userReq("q")); err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if !strings.Contains(logs.String(), `"msg":"retrying model call"`) || !strings.Contains(logs.String(), `"status":500`) {
		t.Errorf("logs = %s, want a retry line with status 500", logs.String())
	}
	if strings.Contains(logs.String(), testKey) {
		t.Errorf("logs contain the API key: %s", logs.String())
	}
}

// checkCanceled asserts err is the cancellation error Chat documents.
func checkCanceled(t *testing.T, err error, elapsed time.Duration) {
	t.Helper()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(%v, context.Canceled) = false, want true", err)
	}
	if ae := apiError(t, err); ae.Type != delegate.ErrKindCanceled || ae.Model != "m" {
		t.Errorf("error = %+v, want type canceled for model m", ae)
	}
	// A hang guard, not a speed check: the server would hold for 30s.
	if elapsed > 10*time.Second {
		t.Errorf("Chat returned after %v, want promptly after cancellation", elapsed)
	}
}

func TestCancelDuringSlowResponse(t *testing.T) {
	arrived := make(chan struct{}, 1)
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so that the server notices the client leave
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			close(gone)
		case <-time.After(30 * time.Second):
		}
	}))
	defer srv.Close()
	c := newClient(t, srv, func(c *Config) { c.Timeout = time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	start := time.Now()
	_, err := c.Chat(ctx, userReq("q"))
	checkCanceled(t, err, time.Since(start))
	select {
	case <-gone: // the in-flight request was aborted
	case <-time.After(10 * time.Second):
		t.Errorf("server never saw the request go away")
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	s := &script{steps: []http.HandlerFunc{respond(503, map[string]string{"Retry-After": "30"}, `{}`)}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := newClient(t, srv, func(c *Config) { c.MaxBackoff = time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.Chat(ctx, userReq("q"))
	checkCanceled(t, err, time.Since(start))
	if ae := apiError(t, err); ae.Attempts != 1 || !strings.Contains(ae.Message, "in backoff after status 503") {
		t.Errorf("error = %+v, want 1 attempt and a message naming the 503", ae)
	}
	if got := s.n.Load(); got != 1 {
		t.Errorf("server saw %d requests, want 1", got)
	}
}

func TestDeadlineBeforeRetryAfterGivesLastError(t *testing.T) {
	s := &script{steps: []http.HandlerFunc{respond(429, map[string]string{"Retry-After": "20"}, `{"error":{"message":"slow down","type":"requests"}}`)}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := newClient(t, srv, func(c *Config) { c.MaxBackoff = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.Chat(ctx, userReq("q"))
	ae := apiError(t, err)
	if ae.Status != 429 || ae.RetryAfter != 20*time.Second || ae.Attempts != 1 {
		t.Errorf("error = %+v, want the 429 with RetryAfter 20s after one attempt", ae)
	}
}

func TestCanceledBeforeStart(t *testing.T) {
	srv := httptest.NewServer(respond(200, nil, okBody))
	defer srv.Close()
	c := newClient(t, srv, func(c *Config) { c.MaxConcurrency = 1; c.RequestsPerMinute = 60 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Chat(ctx, userReq("q"))
	checkCanceled(t, err, 0)
}

func TestConcurrencyLimit(t *testing.T) {
	const limit, callers = 3, 12
	var inFlight, peak atomic.Int32
	full := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if n >= limit {
			once.Do(func() { close(full) })
		}
		// Hold every request until the limit has been reached once, so
		// that a broken limit shows as a peak above it.
		select {
		case <-full:
		case <-time.After(5 * time.Second):
		}
		time.Sleep(5 * time.Millisecond)
		io.WriteString(w, okBody)
	}))
	defer srv.Close()
	c := newClient(t, srv, func(c *Config) { c.MaxConcurrency = limit })
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() { _, errs[i] = c.Chat(context.Background(), userReq("q")) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if got := peak.Load(); got != limit {
		t.Errorf("peak in-flight requests = %d, want %d", got, limit)
	}
}

func TestRequestsPerMinute(t *testing.T) {
	srv := httptest.NewServer(respond(200, nil, okBody))
	defer srv.Close()
	// 120 per minute is 2 a second with a burst of 2: after 2 calls the
	// next has to wait about 500ms for the bucket to refill.
	c := newClient(t, srv, func(c *Config) { c.RequestsPerMinute = 120 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 2 {
		if _, err := c.Chat(ctx, userReq("q")); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	// A deadline shorter than the refill makes the limiter refuse at once.
	short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	_, err := c.Chat(short, userReq("q"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want one wrapping context.DeadlineExceeded", err)
	}
	if ae := apiError(t, err); ae.Type != delegate.ErrKindCanceled {
		t.Errorf("type = %q, want canceled", ae.Type)
	}
}

func TestPing(t *testing.T) {
	var body map[string]any
	s := &script{steps: []http.HandlerFunc{
		func(w http.ResponseWriter, r *http.Request) {
			json.NewDecoder(r.Body).Decode(&body)
			io.WriteString(w, okBody)
		},
		respond(500, nil, "down"),
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := newClient(t, srv, nil)
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if body["max_tokens"] != 1.0 || body["model"] != "m" {
		t.Errorf("ping body = %v, want max_tokens 1 and model m", body)
	}
	err := c.Ping(context.Background())
	if ae := apiError(t, err); ae.Status != 500 || ae.Attempts != 1 {
		t.Errorf("Ping error = %+v, want status 500 after a single attempt", ae)
	}
}

func TestChatRejectsBadRequest(t *testing.T) {
	srv := httptest.NewServer(respond(200, nil, okBody))
	defer srv.Close()
	c := newClient(t, srv, nil)
	_, err := c.Chat(context.Background(), &delegate.Request{})
	if ae := apiError(t, err); ae.Type != ErrKindRequest || ae.Retryable() {
		t.Errorf("error = %+v, want a non-retryable request error", ae)
	}
}

func TestConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(respond(200, nil, okBody))
	url := srv.URL
	srv.Close()
	c, err := New(testConfig(url+"/v1", func(c *Config) {
		c.APIKey, c.MaxRetries, c.MinBackoff, c.MaxBackoff = testKey, 1, time.Millisecond, time.Millisecond
	}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = c.Chat(context.Background(), userReq("q"))
	ae := apiError(t, err)
	if ae.Type != delegate.ErrKindConnection || ae.Attempts != 2 || ae.Status != 0 {
		t.Errorf("error = %+v, want a connection error after 2 attempts", ae)
	}
}

// TestComposedTrace replays an OpenAI tool-call exchange composed after
// OpenAI's API reference (testdata/composed_tool_call.http says how).
func TestComposedTrace(t *testing.T) {
	raw, err := readFile("testdata/composed_tool_call.http")
	if err != nil {
		t.Fatal(err)
	}
	if key := regexp.MustCompile(`sk-[A-Za-z0-9_-]{8,}`).FindString(raw); key != "" {
		t.Fatalf("trace holds what looks like an API key (%d characters)", len(key))
	}
	reqPart, respPart, ok := strings.Cut(raw, "\n### response\n")
	if !ok {
		t.Fatalf("trace has no ### response section")
	}
	_, reqPart, _ = strings.Cut(reqPart, "### request\n")
	recReq, err := http.ReadRequest(bufio.NewReader(strings.NewReader(reqPart)))
	if err != nil {
		t.Fatalf("read recorded request: %v", err)
	}
	var wantBody map[string]any
	if err := json.NewDecoder(recReq.Body).Decode(&wantBody); err != nil {
		t.Fatalf("decode recorded request body: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var gotBody map[string]any
		if err := json.NewDecoder(r.Body).Decode(&gotBody); err != nil {
			t.Errorf("server: decode request: %v", err)
		}
		g, _ := json.Marshal(gotBody) // re-marshal sorts keys
		wb, _ := json.Marshal(wantBody)
		if string(g) != string(wb) {
			t.Errorf("request body:\n got %s\nwant %s", g, wb)
		}
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(respPart)), r)
		if err != nil {
			t.Errorf("read recorded response: %v", err)
			return
		}
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	defer srv.Close()
	c := newClient(t, srv, func(c *Config) { c.Model = "gpt-4o-mini" })
	req := &delegate.Request{
		Messages: []delegate.Message{
			delegate.System("You can delegate questions to a cheaper model with the delegate tool."),
			delegate.User("What is the capital of Australia, and what is 17 * 23?"),
		},
		Tools: []delegate.Tool{{
			Name:        "delegate",
			Description: "Send a self-contained question to the helper model and get its answer.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"question":{"type":"string","description":"The full question."}},"required":["question"],"additionalProperties":false}`),
		}},
		ToolChoice:  "auto",
		Temperature: ptr(0.0),
		MaxTokens:   256,
	}
	resp, err := c.Chat(context.Background(), req)
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	want := []delegate.ToolCall{
		{ID: "call_3mQ9b2kXh4WvN8pL1sT7yZcE", Name: "delegate", Arguments: `{"question":"What is the capital city of Australia?"}`},
		{ID: "call_8RfJ5nD2qA6uV0eG4hK9mXoB", Name: "delegate", Arguments: `{"question":"What is 17 multiplied by 23?"}`},
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("choices = %d, want 1", len(resp.Choices))
	}
	ch := resp.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content != "" || ch.Message.Role != delegate.RoleAssistant {
		t.Errorf("choice = %+v, want an assistant tool_calls turn without text", ch)
	}
	if fmt.Sprint(ch.Message.ToolCalls) != fmt.Sprint(want) {
		t.Errorf("tool calls:\n got %+v\nwant %+v", ch.Message.ToolCalls, want)
	}
	if got, wantU := resp.Usage, (delegate.Usage{PromptTokens: 94, CompletionTokens: 51, CachedTokens: 0}); got != wantU {
		t.Errorf("usage = %+v, want %+v", got, wantU)
	}
	if resp.ID != "chatcmpl-AbC123xYz789DeF456gHi012JkL" || resp.Model != "gpt-4o-mini-2024-07-18" {
		t.Errorf("id, model = %q, %q", resp.ID, resp.Model)
	}
}

func readFile(name string) (string, error) {
	b, err := os.ReadFile(name)
	return string(b), err
}

func TestNewValidates(t *testing.T) {
	if _, err := New(testConfig("ftp://x", nil)); err == nil {
		t.Errorf("New accepted an ftp base URL")
	}
}

func TestName(t *testing.T) {
	srv := httptest.NewServer(respond(200, nil, okBody))
	defer srv.Close()
	var _ delegate.Model = (*Client)(nil)
	if got := newClient(t, srv, nil).Name(); got != "m" {
		t.Errorf("Name = %q, want m", got)
	}
}

func TestRetryLogIsRateLimited(t *testing.T) {
	var logs bytes.Buffer
	c := &Client{cfg: Config{Model: "m"}, log: slog.New(slog.NewJSONHandler(&logs, nil)), logLim: rate.NewLimiter(rate.Every(time.Hour), 5)}
	for i := range 8 {
		c.logRetry(context.Background(), &delegate.APIError{Status: 503, Attempts: i + 1}, time.Millisecond)
	}
	if got := strings.Count(logs.String(), "\n"); got != 5 {
		t.Errorf("logged %d lines, want 5:\n%s", got, logs.String())
	}
	if got := c.quiet.Load(); got != 3 {
		t.Errorf("suppressed count = %d, want 3", got)
	}
	c.logLim = rate.NewLimiter(rate.Inf, 1)
	logs.Reset()
	c.logRetry(context.Background(), &delegate.APIError{Status: 503, Attempts: 9}, time.Millisecond)
	if !strings.Contains(logs.String(), `"suppressed":3`) || c.quiet.Load() != 0 {
		t.Errorf("next line = %s, want it to report 3 suppressed and reset the count", logs.String())
	}
}

func TestClientsShareTransport(t *testing.T) {
	a, err := New(testConfig("http://127.0.0.1:1/v1", func(c *Config) { c.Model = "a" }))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(testConfig("http://127.0.0.1:2/v1", func(c *Config) { c.Model = "b" }))
	if err != nil {
		t.Fatal(err)
	}
	if a.http.Transport != b.http.Transport {
		t.Errorf("clients have different transports, want the shared one")
	}
	if tr := sharedTransport(); tr.MaxIdleConnsPerHost < 64 {
		t.Errorf("MaxIdleConnsPerHost = %d, want a generous pool", tr.MaxIdleConnsPerHost)
	}
}

// TestToolLoopRoundTrip sends a decoded tool-call turn back with its tool results, as route does.
// It checks what the server gets.
func TestToolLoopRoundTrip(t *testing.T) {
	var second map[string]any
	s := &script{steps: []http.HandlerFunc{
		respond(200, nil, toolCallResponse),
		func(w http.ResponseWriter, r *http.Request) {
			if err := json.NewDecoder(r.Body).Decode(&second); err != nil {
				t.Errorf("server: decode: %v", err)
			}
			io.WriteString(w, okBody)
		},
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := newClient(t, srv, nil)
	req := &delegate.Request{Messages: []delegate.Message{delegate.User("2+3?")}, Tools: []delegate.Tool{{Name: "delegate"}}}
	resp, err := c.Chat(context.Background(), req)
	if err != nil {
		t.Fatalf("first Chat: %v", err)
	}
	turn := resp.Choices[0].Message
	req.Messages = append(req.Messages, turn)
	for _, tc := range turn.ToolCalls {
		req.Messages = append(req.Messages, delegate.ToolResult(tc.ID, "answer to "+tc.ID))
	}
	if _, err := c.Chat(context.Background(), req); err != nil {
		t.Fatalf("second Chat: %v", err)
	}
	got, _ := json.Marshal(second["messages"])
	want := `[{"content":"2+3?","role":"user"},` +
		`{"content":null,"role":"assistant","tool_calls":[` +
		`{"function":{"arguments":"{\"question\":\"2+3?\"}","name":"delegate"},"id":"call_a","type":"function"},` +
		`{"function":{"arguments":"{\"question\":","name":"delegate"},"id":"call_b","type":"function"}]},` +
		`{"content":"answer to call_a","role":"tool","tool_call_id":"call_a"},` +
		`{"content":"answer to call_b","role":"tool","tool_call_id":"call_b"}]`
	if string(got) != want {
		t.Errorf("second request messages:\n got %s\nwant %s", got, want)
	}
}

func TestVLLMTokenIDsOverHTTP(t *testing.T) {
	var sent map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&sent)
		io.WriteString(w, `{"id":"v","model":"qwen","prompt_token_ids":[1,2,3],"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop",`+
			`"logprobs":{"content":[{"token":"token_id:1521","logprob":-0.125,"bytes":[111,107],"top_logprobs":[{"token":"token_id:1521","logprob":-0.125,"bytes":[111,107]},{"token":"token_id:7","logprob":-2.5,"bytes":[33]}]}]}}],`+
			`"usage":{"prompt_tokens":3,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":2}}}`)
	}))
	defer srv.Close()
	c := newClient(t, srv, func(c *Config) { c.TokenIDs = true })
	resp, err := c.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User("hi")}, Logprobs: true, TopLogprobs: 2})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if sent["logprobs"] != true || sent["top_logprobs"] != 2.0 || sent["return_tokens_as_token_ids"] != true {
		t.Errorf("request = %v, want logprobs, top_logprobs 2 and return_tokens_as_token_ids", sent)
	}
	want := []delegate.TokenLogprob{{Token: "ok", TokenID: 1521, Logprob: -0.125, Top: []delegate.TopLogprob{{Token: "ok", TokenID: 1521, Logprob: -0.125}, {Token: "!", TokenID: 7, Logprob: -2.5}}}}
	if got := resp.Choices[0].Logprobs; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("logprobs = %+v, want %+v", got, want)
	}
	if fmt.Sprint(resp.PromptTokenIDs) != "[1 2 3]" || resp.Usage.CachedTokens != 2 {
		t.Errorf("prompt token ids %v, cached %d, want [1 2 3] and 2", resp.PromptTokenIDs, resp.Usage.CachedTokens)
	}
}

// TestFillIDsOverHTTP checks that FillIDs sees the request and decoded answer of a backend without ids.
// Its error fails the call, naming it.
func TestFillIDsOverHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"id":"v","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`)
	}))
	defer srv.Close()
	var seen string
	c := newClient(t, srv, func(c *Config) {
		c.FillIDs = func(req *delegate.Request, resp *delegate.Response) error {
			seen = req.Messages[0].Content + " " + resp.Choices[0].Message.Content
			resp.PromptTokenIDs = []int{4, 5, 6}
			return nil
		}
	})
	resp, err := c.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User("hi")}})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if seen != "hi ok" || fmt.Sprint(resp.PromptTokenIDs) != "[4 5 6]" {
		t.Errorf("FillIDs saw %q and gave %v; want \"hi ok\" and [4 5 6]", seen, resp.PromptTokenIDs)
	}
	c = newClient(t, srv, func(c *Config) {
		c.FillIDs = func(*delegate.Request, *delegate.Response) error { return errors.New("no template") }
	})
	_, err = c.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User("hi")}})
	var ae *delegate.APIError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "token ids: no template") {
		t.Errorf("Chat with a failing FillIDs: %v, want an APIError naming it", err)
	}
}

func TestLatencyCoversRetries(t *testing.T) {
	s := &script{steps: []http.HandlerFunc{slow(10 * time.Second), respond(200, nil, okBody)}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	const timeout = 250 * time.Millisecond
	c := newClient(t, srv, func(c *Config) { c.Timeout = timeout })
	resp, err := c.Chat(context.Background(), userReq("q"))
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	// The first attempt ran into its timeout, so the call lasted longer.
	if resp.Latency < timeout || resp.Retries != 1 {
		t.Errorf("latency %v retries %d, want at least %v and 1", resp.Latency, resp.Retries, timeout)
	}
}
