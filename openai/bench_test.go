package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/delegatelab/delegate"
)

// benchServer answers every request with the tool-call response after
// reading the request body.
func benchServer(b *testing.B) *httptest.Server {
	b.Helper()
	body := []byte(toolCallResponse)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchRequest() *delegate.Request {
	return &delegate.Request{
		Messages: []delegate.Message{
			delegate.System("You can delegate questions to a cheaper model with the delegate tool."),
			delegate.User("What is the capital of Australia, and what is 17 * 23?"),
		},
		Tools: []delegate.Tool{{Name: "delegate", Description: "Ask the helper.", Parameters: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"]}`)}},
	}
}

// BenchmarkChat measures one full Chat call (encode, HTTP round trip on
// loopback, decode) through the client, server time included.
func BenchmarkChat(b *testing.B) {
	srv := benchServer(b)
	c, err := New(testConfig(srv.URL+"/v1", func(c *Config) { c.APIKey = "k" }))
	if err != nil {
		b.Fatal(err)
	}
	req := benchRequest()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Chat(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareHTTP is the reference for BenchmarkChat: a plain net/http client on a transport like ours.
// It marshals the same request, posts it and decodes the same response into a minimal struct.
// It has no retries, limits or conversion.
func BenchmarkBareHTTP(b *testing.B) {
	srv := benchServer(b)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	req := benchRequest()
	type bareReq struct {
		Model    string             `json:"model"`
		Messages []delegate.Message `json:"messages"`
		Tools    []delegate.Tool    `json:"tools"`
	}
	var out struct {
		ID      string `json:"id"`
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	url := srv.URL + "/v1/chat/completions"
	b.ReportAllocs()
	for b.Loop() {
		body, err := json.Marshal(bareReq{Model: "m", Messages: req.Messages, Tools: req.Tools})
		if err != nil {
			b.Fatal(err)
		}
		hreq, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		hreq.Header.Set("Content-Type", "application/json")
		hreq.Header.Set("Authorization", "Bearer k")
		resp, err := hc.Do(hreq)
		if err != nil {
			b.Fatal(err)
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkDecodeResponse measures decoding alone.
func BenchmarkDecodeResponse(b *testing.B) {
	body := []byte(toolCallResponse)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := decodeResponse(bytes.NewReader(body), "m", false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChatParallel runs Chat from many goroutines through the shared
// transport's connection pool.
func BenchmarkChatParallel(b *testing.B) {
	srv := benchServer(b)
	c, err := New(testConfig(srv.URL+"/v1", func(c *Config) { c.APIKey = "k" }))
	if err != nil {
		b.Fatal(err)
	}
	req := benchRequest()
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Chat(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
