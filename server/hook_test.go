package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/server"
)

// TestHookSeesAndChangesEachCall checks the hook's contract, plain and streamed.
// It gets the HTTP request and the model's request with the default system prompt.
// What it changes in the request reaches the model, and what done changes in the response is sent.
func TestHookSeesAndChangesEachCall(t *testing.T) {
	fake := modeltest.New("m", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		resp := modeltest.Text("ok")
		if req.Logprobs {
			resp.Choices[0].Message.Content = "ok with logprobs"
		}
		return resp, nil
	})
	s, err := server.NewWithConfig(testConfig(func(c *server.Config) { c.System = map[string]string{"m": "Be brief."} }), nil, fake)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	s.SetHook(func(r *http.Request, model string, req *delegate.Request) func(*delegate.Response) {
		req.Logprobs = true
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Test")+" "+model+" "+string(req.Messages[0].Role)+":"+req.Messages[0].Content)
		mu.Unlock()
		return func(resp *delegate.Response) {
			mu.Lock()
			seen = append(seen, "done "+resp.Choices[0].Message.Content)
			mu.Unlock()
			resp.Choices[0].Message.Content += "!"
		}
	})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, stream, want string
	}{
		{"plain", "false", `"content":"ok with logprobs!"`},
		{"streamed", "true", `"content":"ok with logprobs!"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"m","stream":`+tc.stream+`,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("X-Test", tc.name)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(body), tc.want) {
				t.Errorf("got %d %s, want 200 with %s", resp.StatusCode, body, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			want := []string{tc.name + " m system:Be brief.", "done ok with logprobs"}
			if strings.Join(seen, "|") != strings.Join(want, "|") {
				t.Errorf("hook saw %q, want %q", seen, want)
			}
		})
	}
}
