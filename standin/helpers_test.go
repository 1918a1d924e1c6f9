package standin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
)

// testConfig is DefaultConfig changed by set.
func testConfig(set func(*Config)) Config {
	c := DefaultConfig()
	set(&c)
	return c
}

// start serves a stand-in with cfg on loopback until the test ends.
func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Start(""); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// wire types of a client, written independently of the server's.
type wireReq struct {
	Model     string        `json:"model"`
	Messages  []wireMsg     `json:"messages"`
	Tools     []wireToolDef `json:"tools,omitempty"`
	MaxTokens int           `json:"max_tokens,omitempty"`
	N         int           `json:"n,omitempty"`
}

type wireMsg struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []wireCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type wireCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireToolDef struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

type wireResp struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int     `json:"index"`
		Message      wireMsg `json:"message"`
		FinishReason string  `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func toWire(model string, req *delegate.Request) wireReq {
	w := wireReq{Model: model, MaxTokens: req.MaxTokens, N: req.N}
	for _, m := range req.Messages {
		c := m.Content
		wm := wireMsg{Role: string(m.Role), Content: &c, ToolCallID: m.ToolCallID}
		if m.Role == delegate.RoleAssistant && len(m.ToolCalls) > 0 && c == "" {
			wm.Content = nil
		}
		for _, tc := range m.ToolCalls {
			var wc wireCall
			wc.ID, wc.Type = tc.ID, "function"
			wc.Function.Name, wc.Function.Arguments = tc.Name, tc.Arguments
			wm.ToolCalls = append(wm.ToolCalls, wc)
		}
		w.Messages = append(w.Messages, wm)
	}
	for _, tl := range req.Tools {
		var wt wireToolDef
		wt.Type = "function"
		wt.Function.Name, wt.Function.Description, wt.Function.Parameters = tl.Name, tl.Description, tl.Parameters
		w.Tools = append(w.Tools, wt)
	}
	return w
}

// post sends body to the chat endpoint and returns the status, headers and the whole body.
// err is a transport or body-read failure.
func post(ctx context.Context, c *http.Client, url string, body any) (int, http.Header, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/chat/completions", bytes.NewReader(b))
	if err != nil {
		return 0, nil, nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(hr)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data, err
}

// httpModel is a minimal delegate.Model over the stand-in's HTTP API.
// The strategies run against it with real HTTP in these tests.
type httpModel struct {
	url, name string
	client    *http.Client
}

func (m *httpModel) Name() string { return m.name }

func (m *httpModel) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	start := time.Now()
	status, _, data, err := post(ctx, m.client, m.url, toWire(m.name, req))
	if err != nil {
		return nil, &delegate.APIError{Type: delegate.ErrKindConnection, Message: err.Error(), Model: m.name}
	}
	if status != http.StatusOK {
		return nil, &delegate.APIError{Status: status, Message: string(data), Model: m.name}
	}
	var wr wireResp
	if err := json.Unmarshal(data, &wr); err != nil {
		return nil, &delegate.APIError{Type: delegate.ErrKindDecode, Message: err.Error(), Model: m.name}
	}
	resp := &delegate.Response{ID: wr.ID, Model: wr.Model, Latency: time.Since(start), Usage: delegate.Usage{
		PromptTokens: wr.Usage.PromptTokens, CompletionTokens: wr.Usage.CompletionTokens,
		CachedTokens: wr.Usage.PromptTokensDetails.CachedTokens,
	}}
	for _, c := range wr.Choices {
		msg := delegate.Message{Role: delegate.Role(c.Message.Role)}
		if c.Message.Content != nil {
			msg.Content = *c.Message.Content
		}
		for _, tc := range c.Message.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, delegate.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		resp.Choices = append(resp.Choices, delegate.Choice{Message: msg, FinishReason: c.FinishReason})
	}
	return resp, nil
}

// chatOK posts req and decodes a 200 answer, failing the test otherwise.
func chatOK(t *testing.T, url string, req wireReq) wireResp {
	t.Helper()
	status, _, data, err := post(context.Background(), http.DefaultClient, url, req)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	if status != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", status, data)
	}
	var wr wireResp
	if err := json.Unmarshal(data, &wr); err != nil {
		t.Fatalf("decode answer: %v; body %s", err, data)
	}
	if len(wr.Choices) == 0 {
		t.Fatalf("answer has no choices: %s", data)
	}
	return wr
}

func text(m wireMsg) string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

// inProcess serves s through httptest, for tests that do not need Start.
func inProcess(t *testing.T, s *Server) string {
	t.Helper()
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		ts.Close()
	})
	return ts.URL + "/v1"
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("must: %v", err))
	}
	return v
}
