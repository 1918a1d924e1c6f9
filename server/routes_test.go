package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/server"
)

func TestServerRetrieveModel(t *testing.T) {
	srv := serve(t, okModel("m"), okModel("org/model"))
	tests := []struct {
		path   string
		status int
		want   string // the id, or the error code
	}{
		{"/v1/models/m", 200, "m"},
		{"/v1/models/org/model", 200, "org/model"},
		{"/v1/models/nope", 404, "model_not_found"},
		{"/v1/models/", 200, ""}, // the list
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			status, _, body := do(t, "GET", srv.URL+tt.path, "", "")
			if status != tt.status {
				t.Fatalf("status = %d, want %d (%s)", status, tt.status, body)
			}
			switch {
			case status == 404:
				e := checkErrorShape(t, body)
				if e.Error.Code == nil || *e.Error.Code != tt.want || e.Error.Param == nil || *e.Error.Param != "model" {
					t.Errorf("error = %s, want code %q and param model", body, tt.want)
				}
			case tt.want != "":
				var m struct {
					ID, Object string
					Created    int64
				}
				if err := json.Unmarshal([]byte(body), &m); err != nil {
					t.Fatal(err)
				}
				if m.ID != tt.want || m.Object != "model" || m.Created == 0 {
					t.Errorf("model = %s, want id %q, object model, created set", body, tt.want)
				}
			}
		})
	}
	if status, _, _ := do(t, "POST", srv.URL+"/v1/models/m", "", "{}"); status != 405 {
		t.Errorf("POST /v1/models/m: status %d, want 405", status)
	}
}

// TestServerCreatedIsTheResponses checks that created is when a response was made, not when the server started.
// The model answers only once the clock's second has moved on from the server's start.
func TestServerCreatedIsTheResponses(t *testing.T) {
	var started int64
	later := func(context.Context, *delegate.Request) (*delegate.Response, error) {
		for time.Now().Unix() <= started {
			time.Sleep(10 * time.Millisecond)
		}
		return modeltest.Text("ok"), nil
	}
	started = time.Now().Unix()
	srv := serve(t, modeltest.New("m", later))
	for _, stream := range []bool{false, true} {
		body := userX
		if stream {
			body = strings.Replace(userX, `{`, `{"stream":true,`, 1)
		}
		_, _, out := do(t, "POST", srv.URL+"/v1/chat/completions", "", body)
		if stream {
			data, _ := events(t, out)
			out = data[len(data)-1]
		}
		var resp struct{ Created int64 }
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			t.Fatalf("stream %v: %v (%s)", stream, err, out)
		}
		if resp.Created <= started {
			t.Errorf("stream %v: created %d, want after the server's start %d", stream, resp.Created, started)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServerCountsAndLogsEveryRequest(t *testing.T) {
	const key = "sk-access-log-key-0123456789"
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	s, err := server.NewWithConfig(testConfig(func(c *server.Config) { c.APIKey = key }), log, okModel("m"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	secret := `{"model":"m","messages":[{"role":"user","content":"a secret prompt"}]}`
	do(t, "POST", srv.URL+"/v1/chat/completions", key, secret)
	do(t, "POST", srv.URL+"/v1/chat/completions", "wrong", secret)
	do(t, "GET", srv.URL+"/v1/models", key, "")
	do(t, "GET", srv.URL+"/v1/models/m", key, "")
	do(t, "GET", srv.URL+"/health", "", "")
	do(t, "GET", srv.URL+"/no/such/path", key, "")
	do(t, "GET", srv.URL+"/another/path", key, "")
	_, _, text := do(t, "GET", srv.URL+"/metrics", key, "")
	for _, want := range []string{
		`delegate_serve_http_requests_total{path="/v1/chat/completions",status="200"} 1`,
		`delegate_serve_http_requests_total{path="/v1/chat/completions",status="401"} 1`,
		`delegate_serve_http_requests_total{path="/v1/models",status="200"} 1`,
		`delegate_serve_http_requests_total{path="/v1/models/{model}",status="200"} 1`,
		`delegate_serve_http_requests_total{path="/health",status="200"} 1`,
		`delegate_serve_http_requests_total{path="other",status="404"} 2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}

	type entry struct {
		Level, Msg, Method, Path string
		Status                   int
		Duration                 int64
		Bytes                    int64
	}
	var got []entry
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var e entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if e.Msg == "request" {
			got = append(got, e)
		}
	}
	if len(got) < 7 {
		t.Fatalf("%d access log entries, want one per request (7 before /metrics):\n%s", len(got), logs.String())
	}
	first := got[0]
	if first.Level != "INFO" || first.Method != "POST" || first.Path != "/v1/chat/completions" || first.Status != 200 || first.Duration <= 0 || first.Bytes <= 0 {
		t.Errorf("first entry = %+v, want INFO POST /v1/chat/completions 200 with a duration and bytes", first)
	}
	if got[1].Status != 401 || got[5].Status != 404 {
		t.Errorf("statuses = %d, %d; want 401 and 404", got[1].Status, got[5].Status)
	}
	for _, never := range []string{key, "wrong", "a secret prompt", "Authorization", "Bearer"} {
		if strings.Contains(logs.String(), never) {
			t.Errorf("logs contain %q:\n%s", never, logs.String())
		}
	}
}

// TestServerAccessLogElsewhere checks that SetAccessLog moves the access
// lines off the server's log, or drops them, and that requests are still
// counted either way.
func TestServerAccessLogElsewhere(t *testing.T) {
	for _, tc := range []struct {
		name       string
		toAccess   bool // SetAccessLog gets a logger; otherwise nil
		wantAccess int
	}{
		{"to another logger", true, 1},
		{"dropped", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs, access syncBuffer
			s, err := server.New(slog.New(slog.NewJSONHandler(&logs, nil)), okModel("m"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.toAccess {
				s.SetAccessLog(slog.New(slog.NewJSONHandler(&access, nil)))
			} else {
				s.SetAccessLog(nil)
			}
			srv := httptest.NewServer(s)
			defer srv.Close()
			do(t, "POST", srv.URL+"/v1/chat/completions", "", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			if got := strings.Count(logs.String(), `"msg":"request"`); got != 0 {
				t.Errorf("the server's log has %d access lines, want 0:\n%s", got, logs.String())
			}
			if got := strings.Count(access.String(), `"msg":"request"`); got != tc.wantAccess {
				t.Errorf("the access log has %d lines, want %d:\n%s", got, tc.wantAccess, access.String())
			}
			_, _, text := do(t, "GET", srv.URL+"/metrics", "", "")
			if want := `delegate_serve_http_requests_total{path="/v1/chat/completions",status="200"} 1`; !strings.Contains(text, want) {
				t.Errorf("metrics lack %q:\n%s", want, text)
			}
		})
	}
}
