package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/server"
)

// The observer sees every chat completion once answered: streamed or
// not, failed or refused, with its status, request and response.
func TestObserverSeesEveryCompletion(t *testing.T) {
	fake := modeltest.New("m", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		if req.Messages[len(req.Messages)-1].Content == "fail" {
			return nil, &delegate.APIError{Status: http.StatusBadGateway, Message: "upstream down"}
		}
		return modeltest.Text("ok"), nil
	})
	s, err := server.New(nil, fake)
	if err != nil {
		t.Fatal(err)
	}
	// The observer runs once the answer is written: the client may have
	// read it first.
	seen := make(chan server.Completion, 8)
	s.SetObserver(func(c server.Completion) { seen <- c })
	srv := httptest.NewServer(s)
	defer srv.Close()
	tests := []struct {
		name, body   string
		status       int
		model        string
		stream, resp bool
	}{
		{"answered", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 200, "m", false, true},
		{"streamed", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 200, "m", true, true},
		{"failed", `{"model":"m","messages":[{"role":"user","content":"fail"}]}`, 502, "m", false, false},
		{"unknown model", `{"model":"x","messages":[{"role":"user","content":"hi"}]}`, 404, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			// Read to the end: a body closed early cuts a stream (499).
			if _, err := io.ReadAll(resp.Body); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			var c server.Completion
			select {
			case c = <-seen:
			case <-time.After(10 * time.Second):
				t.Fatal("the observer saw no completion")
			}
			if c.Status != tt.status || c.Model != tt.model || c.Stream != tt.stream || (c.Response != nil) != tt.resp {
				t.Errorf("got status %d model %q stream %v response %v, want %d %q %v %v",
					c.Status, c.Model, c.Stream, c.Response != nil, tt.status, tt.model, tt.stream, tt.resp)
			}
			if c.Start.IsZero() || c.Latency <= 0 {
				t.Errorf("start %v latency %v, want both set", c.Start, c.Latency)
			}
			if tt.resp && (c.Request == nil || c.Response.Usage.CompletionTokens == 0) {
				t.Errorf("request %v, usage %+v: want the request and the response's usage", c.Request, c.Response.Usage)
			}
		})
	}
}
