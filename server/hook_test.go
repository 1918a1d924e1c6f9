package server_test

import (
	"context"
	"errors"
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
	s.SetHook(func(r *http.Request, model string, req *delegate.Request) (func(*delegate.Response, error), error) {
		req.Logprobs = true
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Test")+" "+model+" "+string(req.Messages[0].Role)+":"+req.Messages[0].Content)
		mu.Unlock()
		return func(resp *delegate.Response, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				seen = append(seen, "failed "+err.Error())
				return
			}
			seen = append(seen, "done "+resp.Choices[0].Message.Content)
			resp.Choices[0].Message.Content += "!"
		}, nil
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

// TestHookRefusesAndSeesFailures checks that a hook's refusal is answered
// before the model is called, and that done sees a failed generation's
// status and message, plain and streamed.
func TestHookRefusesAndSeesFailures(t *testing.T) {
	var calls sync.Map // prompt -> true, for the model's calls
	fake := modeltest.New("m", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		calls.Store(req.Messages[len(req.Messages)-1].Content, true)
		return nil, &delegate.APIError{Status: http.StatusBadGateway, Type: "server_error", Message: "the backend is down"}
	})
	s, err := server.NewWithConfig(server.DefaultConfig(), nil, fake)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := make(chan error, 4)
	s.SetHook(func(r *http.Request, _ string, req *delegate.Request) (func(*delegate.Response, error), error) {
		if req.Messages[0].Content == "refuse" {
			return nil, &delegate.APIError{Status: http.StatusRequestEntityTooLarge, Code: "too_big", Message: "over the bound of 3"}
		}
		return func(_ *delegate.Response, err error) { outcomes <- err }, nil
	})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, prompt, stream string
		wantStatus           int
		wantBody             string
		wantOutcome          int // the status done sees; 0: done is not called
	}{
		{"refused", "refuse", "false", 413, `"message":"over the bound of 3","type":"invalid_request_error","param":null,"code":"too_big"`, 0},
		{"refused streamed", "refuse", "true", 413, `"code":"too_big"`, 0},
		{"failed", "fail", "false", 502, `"message":"the backend is down"`, 502},
		{"failed streamed", "fail streamed", "true", 502, `"message":"the backend is down"`, 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"m","stream":`+tc.stream+`,"messages":[{"role":"user","content":"`+tc.prompt+`"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus || !strings.Contains(string(body), tc.wantBody) {
				t.Errorf("got %d %s, want %d with %s", resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
			_, called := calls.Load(tc.prompt)
			if got, want := called, tc.wantOutcome != 0; got != want {
				t.Errorf("model called: %v, want %v", got, want)
			}
			if tc.wantOutcome == 0 {
				return
			}
			var ae *delegate.APIError
			if err := <-outcomes; !errors.As(err, &ae) || ae.Status != tc.wantOutcome || ae.Message != "the backend is down" {
				t.Errorf("done got %v, want status %d and the backend's message", err, tc.wantOutcome)
			}
		})
	}
	select {
	case err := <-outcomes:
		t.Errorf("done called once more, with %v", err)
	default:
	}
}
