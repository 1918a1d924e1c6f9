package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/tokenizer"
)

// hfFixture is a tiny Qwen3 checkpoint in Hugging Face's layout with its
// own tokenizer.json (made by nn/infer/testdata/hf/make_fixtures.py).
func hfFixture(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "nn", "infer", "testdata", "hf", "qwen3-qknorm"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeHFConfig(t *testing.T, roles string) string {
	t.Helper()
	cfg := fmt.Sprintf(`preset: world
models:
  delegator:
    kind: local
    checkpoint: shipped:delegator
  qwen:
    kind: local
    checkpoint: %s
    context: 256
    max_batch: 4
roles:
%s
strategy:
  single: {temperature: 0}
  strong: {temperature: 0}
`, hfFixture(t), roles)
	path := filepath.Join(t.TempDir(), "delegate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServeHFCheckpoint runs `delegate serve` on a Hugging Face
// checkpoint and asks it over loopback HTTP. The reply must be what the
// same checkpoint answers in-process, greedy. The startup log must name
// the type the weights are held in and the KV cache.
func TestServeHFCheckpoint(t *testing.T) {
	path := writeHFConfig(t, "  default: qwen")
	var out, logs syncBuffer
	cmd := newRootCmd(testEnv, slog.New(slog.NewTextHandler(&logs, nil)))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"serve", "--config", path, "--addr", "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	addr := regexp.MustCompile(`serving \[[a-z ]*\] on (http://\S+/v1)`)
	var base string
	for deadline := time.Now().Add(20 * time.Second); base == ""; {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v\n%s\n%s", err, out.String(), logs.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", out.String())
		}
	}
	for _, want := range []string{"local model loaded", "model_type=qwen3", "dtype=bf16", "chat_template=qwen3", "KV cache"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("startup log lacks %q:\n%s", want, logs.String())
		}
	}
	const ask = `{"model":"qwen","temperature":0,"max_tokens":10,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hello"}]}`
	resp, err := http.Post(base+"/chat/completions", "application/json", strings.NewReader(ask))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Choices []struct {
			Message      struct{ Role, Content string } `json:"message"`
			FinishReason string                         `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &got); resp.StatusCode != 200 || err != nil || len(got.Choices) != 1 {
		t.Fatalf("chat over HTTP: %d %s (%v)", resp.StatusCode, body, err)
	}

	// The same request in-process.
	dir := hfFixture(t)
	w, info, err := infer.LoadHF(dir, infer.HFOptions{Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.LoadHF(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	lcfg := local.DefaultConfig()
	lcfg.Name = "qwen"
	m, err := local.NewHF(w, tok, tokenizer.ChatQwen3, info.EOS, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	zero := 0.0
	want, err := m.Chat(context.Background(), &delegate.Request{
		Messages: []delegate.Message{delegate.System("Be brief."), delegate.User("hello")}, Temperature: &zero, MaxTokens: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Through JSON, as the server sends it (invalid UTF-8 becomes U+FFFD).
	wantJSON, err := json.Marshal(want.Choices[0].Message.Content)
	if err != nil {
		t.Fatal(err)
	}
	var wantContent string
	if err := json.Unmarshal(wantJSON, &wantContent); err != nil {
		t.Fatal(err)
	}
	c := got.Choices[0]
	if c.Message.Role != "assistant" || c.Message.Content != wantContent || c.FinishReason != want.Choices[0].FinishReason {
		t.Errorf("served reply %+v, in-process %q (finish %s)", c, wantContent, want.Choices[0].FinishReason)
	}
	if got.Usage.PromptTokens != want.Usage.PromptTokens || got.Usage.CompletionTokens != want.Usage.CompletionTokens {
		t.Errorf("served usage %+v, in-process %+v", got.Usage, want.Usage)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve after interrupt: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after interrupt")
	}
}

// TestRunRouteHFWeak runs route with a Hugging Face checkpoint as the weak
// model beside a shipped delegator. The weak role's calls go to it and
// succeed (the tiny random model answers garbage, so the run as a whole
// may not find an answer; the exit code is not what is checked here).
func TestRunRouteHFWeak(t *testing.T) {
	path := writeHFConfig(t, "  default: delegator\n  subagent: qwen\n  weak: qwen")
	out, _ := execute(t, testEnv, "run", "--config", path, "--strategy", "route", "Ann has 56 boxes of 23 pens. How many pens?")
	row := regexp.MustCompile(`(?m)^\s+weak\s+(\d+)\s+(\d+)\s`).FindStringSubmatch(out)
	if row == nil || row[1] == "0" || row[2] != "0" {
		t.Errorf("weak role row %q, want calls and no errors:\n%s", row, out)
	}
}

// TestConfigHFKeys checks the keys that belong to Hugging Face checkpoints.
func TestConfigHFKeys(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, model, want string
	}{
		{"tokenizer on our own checkpoint", "checkpoint: " + filepath.Join("..", "..", "models", "solver") + "\n    tokenizer: x.json\n    chat_template: qwen3", "belong to a Hugging Face checkpoint"},
		{"bad template", "checkpoint: " + hfFixture(t) + "\n    chat_template: chatml", "chat_template"},
		{"negative context", "checkpoint: " + hfFixture(t) + "\n    context: -1", "context"},
		{"follow", "checkpoint: " + hfFixture(t) + "\n    follow: " + dir, "follow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := tc.model
			if strings.Contains(model, filepath.Join("..", "..", "models")) {
				abs, err := filepath.Abs(filepath.Join("..", "..", "models", "solver"))
				if err != nil {
					t.Fatal(err)
				}
				model = strings.Replace(model, filepath.Join("..", "..", "models", "solver"), abs, 1)
			}
			path := filepath.Join(t.TempDir(), "c.yaml")
			cfg := "models:\n  m:\n    kind: local\n    " + model + "\nroles:\n  default: m\n"
			if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadConfig(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadConfig = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// A good one loads, and config check opens the model.
	path := writeHFConfig(t, "  default: qwen")
	out, err := execute(t, testEnv, "config", "check", "--ping", path)
	if err != nil {
		t.Errorf("config check: %v\n%s", err, out)
	}
}
