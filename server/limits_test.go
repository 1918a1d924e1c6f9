package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/server"
)

// errorBody is OpenAI's error object; every field must be present.
type errorBody struct {
	Error struct {
		Message *string `json:"message"`
		Type    *string `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// do sends a request and returns the status, headers and body.
func do(t *testing.T, method, url, key, body string) (int, http.Header, string) {
	t.Helper()
	status, h, b, err := send(method, url, key, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, h, b
}

// serve serves models with the default config on loopback until the
// test ends.
func serve(t *testing.T, models ...delegate.Model) *httptest.Server {
	t.Helper()
	s, err := server.New(nil, models...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// send is do for goroutines other than the test's.
func send(method, url, key, body string) (int, http.Header, string, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// checkErrorShape fails unless body is OpenAI's error object with every
// key present (param and code may be null).
func checkErrorShape(t *testing.T, body string) errorBody {
	t.Helper()
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := raw["error"][k]; !ok {
			t.Errorf("error body %s lacks error.%s", body, k)
		}
	}
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func okModel(name string) delegate.Model {
	return modeltest.New(name, func(context.Context, *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("ok"), nil
	})
}

const userX = `{"model":"m","messages":[{"role":"user","content":"x"}]}`

func TestServerErrorsAreOpenAIObjects(t *testing.T) {
	s, err := server.NewWithConfig(testConfig(func(c *server.Config) { c.MaxBody = 1000 }), nil, okModel("m"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	big := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", 2000) + `"}]}`
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"unknown path", "GET", "/v1/nothing", "", 404, "unknown_url"},
		{"root", "GET", "/", "", 404, "unknown_url"},
		{"wrong method", "GET", "/v1/chat/completions", "", 405, "method_not_allowed"},
		{"post to models", "POST", "/v1/models", "{}", 405, "method_not_allowed"},
		{"body over the limit", "POST", "/v1/chat/completions", big, 413, "request_too_large"},
		{"unknown model", "POST", "/v1/chat/completions", strings.Replace(userX, `"m"`, `"zz"`, 1), 404, "model_not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, body := do(t, tt.method, srv.URL+tt.path, "", tt.body)
			if status != tt.status {
				t.Errorf("status = %d, want %d (%s)", status, tt.status, body)
			}
			if ct := h.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			e := checkErrorShape(t, body)
			if e.Error.Code == nil || *e.Error.Code != tt.code {
				t.Errorf("code = %v, want %q", e.Error.Code, tt.code)
			}
		})
	}
	// A body over the limit without a Content-Length (chunked) is a 413 too.
	req, err := http.NewRequest("POST", srv.URL+"/v1/chat/completions", io.MultiReader(strings.NewReader(big)))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("chunked body over the limit: status %d, want 413", resp.StatusCode)
	}
}

func TestServerAPIKey(t *testing.T) {
	const key = "sk-test-serve-key-0123456789"
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := server.NewWithConfig(testConfig(func(c *server.Config) { c.APIKey = key }), log, okModel("m"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	tests := []struct {
		name, path, key string
		status          int
	}{
		{"no key", "/v1/chat/completions", "", 401},
		{"wrong key", "/v1/chat/completions", "sk-wrong", 401},
		{"key with a suffix", "/v1/chat/completions", key + "x", 401},
		{"right key", "/v1/chat/completions", key, 200},
		{"models need the key", "/v1/models", "", 401},
		{"metrics need the key", "/metrics", "", 401},
		{"health is open", "/health", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, body := "GET", ""
			if tt.path == "/v1/chat/completions" {
				method, body = "POST", userX
			}
			status, h, got := do(t, method, srv.URL+tt.path, tt.key, body)
			if status != tt.status {
				t.Fatalf("status = %d, want %d (%s)", status, tt.status, got)
			}
			if status == 401 {
				e := checkErrorShape(t, got)
				if *e.Error.Type != "invalid_request_error" || e.Error.Code == nil || *e.Error.Code != "invalid_api_key" {
					t.Errorf("401 body = %s", got)
				}
				if !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("WWW-Authenticate = %q", h.Get("WWW-Authenticate"))
				}
			}
			if strings.Contains(got, key) {
				t.Errorf("the key came back in a body: %s", got)
			}
		})
	}
	// Lower-case scheme is accepted (RFC 7235: the scheme is case-insensitive).
	req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(userX))
	req.Header.Set("Authorization", "bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("lower-case bearer: status %d", resp.StatusCode)
	}
	if strings.Contains(logs.String(), key) {
		t.Errorf("the key reached the logs:\n%s", logs.String())
	}
}

// blocking is a model whose calls wait until release is closed, counting
// the calls that have started.
type blocking struct {
	release chan struct{}
	mu      sync.Mutex
	started int
	cond    chan struct{} // gets a value at each start
}

func (b *blocking) Name() string { return "m" }

func (b *blocking) Chat(ctx context.Context, _ *delegate.Request) (*delegate.Response, error) {
	b.mu.Lock()
	b.started++
	b.mu.Unlock()
	b.cond <- struct{}{}
	select {
	case <-b.release:
		return modeltest.Text("done"), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func TestServerConcurrencyAndQueueBounds(t *testing.T) {
	m := &blocking{release: make(chan struct{}), cond: make(chan struct{}, 16)}
	s, err := server.NewWithConfig(testConfig(func(c *server.Config) { c.MaxConcurrent, c.MaxQueue, c.QueueTimeout = 1, 2, 300*time.Millisecond }), nil, m)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	type result struct {
		status int
		retry  string
		body   string
		err    error
	}
	post := func(out chan<- result) {
		status, h, body, err := send("POST", srv.URL+"/v1/chat/completions", "", userX)
		out <- result{status, h.Get("Retry-After"), body, err}
	}
	first := make(chan result, 1)
	go post(first)
	<-m.cond // the first request is generating
	queued := make(chan result, 2)
	go post(queued)
	go post(queued)
	// Wait until both are admitted and waiting behind the one generating
	// (the metrics show it).
	waitFor(t, func() bool {
		_, _, text := do(t, "GET", srv.URL+"/metrics", "", "")
		return strings.Contains(text, "delegate_serve_queue_depth 2\n") && strings.Contains(text, "delegate_serve_in_flight 1\n")
	})
	// A fourth request is beyond 1 generating + 2 waiting: 503 at once.
	status, h, body := do(t, "POST", srv.URL+"/v1/chat/completions", "", userX)
	if status != 503 || h.Get("Retry-After") == "" {
		t.Errorf("request beyond the bounds: status %d Retry-After %q, want 503 with Retry-After", status, h.Get("Retry-After"))
	}
	if e := checkErrorShape(t, body); e.Error.Code == nil || *e.Error.Code != "server_overloaded" {
		t.Errorf("overload body = %s", body)
	}
	// The waiting ones get 503 when their queue timeout passes.
	for range 2 {
		r := <-queued
		if r.status != 503 || r.retry == "" || !strings.Contains(r.body, "no turn came within") {
			t.Errorf("queued request: %+v, want 503 after the queue timeout", r)
		}
	}
	close(m.release)
	if r := <-first; r.status != 200 {
		t.Errorf("first request: %+v", r)
	}
	// The bounds free up: a new request is served.
	if status, _, body := do(t, "POST", srv.URL+"/v1/chat/completions", "", userX); status != 200 {
		t.Errorf("after the load: %d %s", status, body)
	}
	_, _, text := do(t, "GET", srv.URL+"/metrics", "", "")
	for _, want := range []string{
		`delegate_serve_requests_total{model="m",status="200"} 2`,
		`delegate_serve_requests_total{model="m",status="503"} 3`,
		"delegate_serve_in_flight 0\n",
		"delegate_serve_queue_depth 0\n",
		`delegate_serve_request_duration_seconds_count 5`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestServerIDsUniqueAndTokenIDsOptIn(t *testing.T) {
	m := modeltest.New("m", func(context.Context, *delegate.Request) (*delegate.Response, error) {
		r := modeltest.Text("ok")
		r.ID = "local-7" // a backend's id that repeats
		r.PromptTokenIDs = []int{1, 2, 3}
		return r, nil
	})
	srv := serve(t, m)
	seen := map[string]bool{}
	for range 20 {
		_, _, body := do(t, "POST", srv.URL+"/v1/chat/completions", "", userX)
		var r struct {
			ID             string `json:"id"`
			PromptTokenIDs []int  `json:"prompt_token_ids"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		if seen[r.ID] || !strings.HasPrefix(r.ID, "chatcmpl-") {
			t.Errorf("id %q repeats or is not a chatcmpl- id", r.ID)
		}
		seen[r.ID] = true
		if strings.Contains(body, "prompt_token_ids") {
			t.Errorf("prompt_token_ids returned unasked: %s", body)
		}
	}
	for _, field := range []string{"return_token_ids", "return_tokens_as_token_ids"} {
		body := strings.Replace(userX, `"model"`, `"`+field+`":true,"model"`, 1)
		_, _, got := do(t, "POST", srv.URL+"/v1/chat/completions", "", body)
		if !strings.Contains(got, `"prompt_token_ids":[1,2,3]`) {
			t.Errorf("%s: prompt_token_ids missing: %s", field, got)
		}
	}
}

func TestServerUndeclaredToolCallsComeBackAsText(t *testing.T) {
	calls := map[string]delegate.ToolCall{
		"get_weather": {ID: "c1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
		"malformed":   {ID: "c1", Name: "", Arguments: `deleg{"q":`},
		"not object":  {ID: "c1", Name: "delegate", Arguments: `[1,2]`},
		"declared":    {ID: "c1", Name: "delegate", Arguments: `{"question":"2+2"}`},
	}
	m := modeltest.New("m", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		r := modeltest.ToolCalls(calls[req.Messages[len(req.Messages)-1].Content])
		r.Choices[0].Message.Content = "Let me check. "
		return r, nil
	})
	srv := serve(t, m)
	tools := `"tools":[{"type":"function","function":{"name":"delegate","parameters":{"type":"object"}}}]`
	tests := []struct {
		case_, tools, finish, content string
		calls                         int
	}{
		{"get_weather", tools, "stop", `Let me check. get_weather{"city":"Paris"}`, 0},
		{"malformed", tools, "stop", `Let me check. deleg{"q":`, 0},
		{"not object", tools, "stop", `Let me check. delegate[1,2]`, 0},
		{"declared", `"tools":[]`, "stop", `Let me check. delegate{"question":"2+2"}`, 0},
		{"declared", tools, "tool_calls", "Let me check. ", 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %d tools", tt.case_, strings.Count(tt.tools, "function\"")), func(t *testing.T) {
			body := `{"model":"m",` + tt.tools + `,"messages":[{"role":"user","content":"` + tt.case_ + `"}]}`
			_, _, got := do(t, "POST", srv.URL+"/v1/chat/completions", "", body)
			var r struct {
				Choices []struct {
					Message struct {
						Content   string `json:"content"`
						ToolCalls []struct {
							Function struct{ Name, Arguments string }
						} `json:"tool_calls"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(got), &r); err != nil || len(r.Choices) != 1 {
				t.Fatalf("%s: %v", got, err)
			}
			c := r.Choices[0]
			if c.FinishReason != tt.finish || c.Message.Content != tt.content || len(c.Message.ToolCalls) != tt.calls {
				t.Errorf("got finish %q content %q %d calls; want %q %q %d", c.FinishReason, c.Message.Content, len(c.Message.ToolCalls), tt.finish, tt.content, tt.calls)
			}
		})
	}
}

func TestServerDefaultSystemPrompt(t *testing.T) {
	var mu sync.Mutex
	var got [][]delegate.Message
	m := modeltest.New("m", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		mu.Lock()
		got = append(got, req.Messages)
		mu.Unlock()
		return modeltest.Text("ok"), nil
	})
	s, err := server.NewWithConfig(testConfig(func(c *server.Config) { c.System = map[string]string{"m": "Compute."} }), nil, m)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	do(t, "POST", srv.URL+"/v1/chat/completions", "", userX)
	do(t, "POST", srv.URL+"/v1/chat/completions", "", `{"model":"m","messages":[{"role":"developer","content":"Mine."},{"role":"user","content":"x"}]}`)
	if len(got) != 2 {
		t.Fatalf("%d calls", len(got))
	}
	if len(got[0]) != 2 || got[0][0].Role != delegate.RoleSystem || got[0][0].Content != "Compute." {
		t.Errorf("no system message: the model got %+v, want the default first", got[0])
	}
	if len(got[1]) != 2 || got[1][0].Content != "Mine." {
		t.Errorf("own system message: the model got %+v, want it alone", got[1])
	}
	if _, err := server.NewWithConfig(testConfig(func(c *server.Config) { c.System = map[string]string{"other": "x"} }), nil, m); err == nil {
		t.Error("a system prompt for a model not served was accepted")
	}
}

// TestServerTimeouts runs the handler under an http.Server with the timeouts `delegate serve` sets, short.
// A generation longer than the read timeout still answers: the read deadline is cleared once the body is in.
// A client that sends its body too slowly is cut off.
func TestServerTimeouts(t *testing.T) {
	m := modeltest.New("m", func(ctx context.Context, _ *delegate.Request) (*delegate.Response, error) {
		select {
		case <-time.After(600 * time.Millisecond):
			return modeltest.Text("slow"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	s, err := server.NewWithConfig(testConfig(func(c *server.Config) { c.RequestTimeout = 5 * time.Second }), nil, m)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 10 * time.Second, IdleTimeout: time.Second}
	go hs.Serve(ln) //nolint:errcheck // ends with ErrServerClosed at Close
	defer hs.Close()
	url := "http://" + ln.Addr().String()
	if status, _, body := do(t, "POST", url+"/v1/chat/completions", "", userX); status != 200 || !strings.Contains(body, "slow") {
		t.Errorf("generation longer than the read timeout: %d %s", status, body)
	}

	// A client that sends half its body and stalls.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"model\""); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(c) // until the server closes the connection
	if time.Since(start) > 4*time.Second {
		t.Errorf("a stalled body held the connection %v", time.Since(start))
	}
	if len(reply) > 0 && !strings.Contains(string(reply), " 408 ") {
		t.Errorf("stalled body: reply %q, want a 408 or a closed connection", reply)
	}
}

func TestServerRequestTimeout(t *testing.T) {
	m := modeltest.New("m", func(ctx context.Context, _ *delegate.Request) (*delegate.Response, error) {
		<-ctx.Done()
		return nil, &delegate.APIError{Type: delegate.ErrKindCanceled, Message: ctx.Err().Error()}
	})
	s, err := server.NewWithConfig(testConfig(func(c *server.Config) { c.RequestTimeout = 100 * time.Millisecond }), nil, m)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	status, _, body := do(t, "POST", srv.URL+"/v1/chat/completions", "", userX)
	if status != 504 {
		t.Errorf("status %d, want 504: %s", status, body)
	}
	checkErrorShape(t, body)
}

func TestServerPanicIsA500(t *testing.T) {
	var logs bytes.Buffer
	m := modeltest.New("m", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		if req.Messages[0].Content == "boom" {
			panic("model bug")
		}
		return modeltest.Text("ok"), nil
	})
	s, err := server.NewWithConfig(testConfig(func(c *server.Config) { c.MaxConcurrent = 1 }), slog.New(slog.NewTextHandler(&logs, nil)), m)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	status, _, body := do(t, "POST", srv.URL+"/v1/chat/completions", "", strings.Replace(userX, `"x"`, `"boom"`, 1))
	if status != 500 {
		t.Errorf("panicking model: %d %s, want 500", status, body)
	}
	checkErrorShape(t, body)
	if !strings.Contains(logs.String(), "model bug") {
		t.Errorf("the panic was not logged:\n%s", logs.String())
	}
	// Its turn was given back: the one turn there is serves the next request.
	if status, _, body := do(t, "POST", srv.URL+"/v1/chat/completions", "", userX); status != 200 {
		t.Errorf("after the panic: %d %s", status, body)
	}
}

// TestServerBodyBudget checks that bodies are charged as their bytes arrive.
// Clients trickling bodies hold only what they sent,
// and a request that would pass the budget gets 503 until they go.
func TestServerBodyBudget(t *testing.T) {
	// One turn and one place in the queue: twenty stalled clients must not
	// take them, as they would if a request counted from its headers.
	newServer := func() (*httptest.Server, func(n int) net.Conn) {
		s, err := server.NewWithConfig(testConfig(func(c *server.Config) { c.MaxBody, c.BodyBudget, c.MaxConcurrent, c.MaxQueue = 1000, 2000, 1, 1 }), nil, okModel("m"))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(s)
		// stall opens a connection that sends n bytes of a 1000-byte body.
		stall := func(n int) net.Conn {
			t.Helper()
			c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n%s", strings.Repeat(" ", n)); err != nil {
				t.Fatal(err)
			}
			return c
		}
		return srv, stall
	}
	closeAll := func(cs []net.Conn) {
		for _, c := range cs {
			c.Close()
		}
	}

	// Twenty clients with 10 bytes each in flight: 200 of 2000 bytes.
	srv, stall := newServer()
	var small []net.Conn
	for range 20 {
		small = append(small, stall(10))
	}
	time.Sleep(100 * time.Millisecond) // let the server read what they sent (a fast reader only helps the check)
	if status, _, body := do(t, "POST", srv.URL+"/v1/chat/completions", "", userX); status != 200 {
		t.Errorf("with small stalled bodies: %d %s, want 200", status, body)
	}
	closeAll(small) // before the server's Close, which waits for them
	srv.Close()

	// Two clients with 990 bytes each: 1980 of 2000; a request of 56
	// bytes no longer fits.
	srv, stall = newServer()
	defer srv.Close()
	big := []net.Conn{stall(990), stall(990)}
	defer closeAll(big)
	waitFor(t, func() bool {
		status, _, _ := do(t, "POST", srv.URL+"/v1/chat/completions", "", userX)
		return status == 503
	})
	status, h, body := do(t, "POST", srv.URL+"/v1/chat/completions", "", userX)
	if status != 503 || h.Get("Retry-After") == "" || !strings.Contains(body, "server_overloaded") {
		t.Errorf("over the budget: %d %s", status, body)
	}
	big[0].Close()
	waitFor(t, func() bool {
		status, _, _ := do(t, "POST", srv.URL+"/v1/chat/completions", "", userX)
		return status == 200
	})
	if _, _, text := do(t, "GET", srv.URL+"/metrics", "", ""); !strings.Contains(text, `status="503"`) {
		t.Error("the 503s are not in the metrics")
	}
}

// A client that hangs up while its answer is generated is counted as 499, streamed or not.
// The generation is cancelled.
func TestServerClientGoneIs499(t *testing.T) {
	for _, body := range []string{userX, strings.Replace(userX, `"model"`, `"stream":true,"model"`, 1)} {
		m := &blocking{release: make(chan struct{}), cond: make(chan struct{}, 1)}
		srv := serve(t, m)
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
		<-m.cond // generating
		cancel()
		if err := <-errc; err == nil {
			t.Errorf("%s: the request was answered after its client hung up", body)
		}
		waitFor(t, func() bool {
			_, _, text := do(t, "GET", srv.URL+"/metrics", "", "")
			return strings.Contains(text, `delegate_serve_requests_total{model="m",status="499"} 1`+"\n") &&
				strings.Contains(text, "delegate_serve_in_flight 0\n")
		})
	}
}
