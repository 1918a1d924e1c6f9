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
)

// ggufFixture is a tiny qwen2 GGUF file (nn/infer/testdata/gguf).
func ggufFixture(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "nn", "infer", "testdata", "gguf", name))
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServeGGUFAndQuantize runs `delegate serve` on a GGUF file and a
// Hugging Face checkpoint quantised at load. The startup log must name
// their types and templates, and the GGUF model's reply over
// loopback HTTP is what the same file answers in-process.
func TestServeGGUFAndQuantize(t *testing.T) {
	cfg := fmt.Sprintf(`models:
  gguf:
    kind: local
    checkpoint: %s
    context: 128
    max_batch: 2
  qeight:
    kind: local
    checkpoint: %s
    quantize: q8_0
    context: 128
    max_batch: 2
roles:
  default: gguf
`, ggufFixture(t, "qwen2-bias-f16.gguf"), hfFixture(t))
	path := filepath.Join(t.TempDir(), "delegate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
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
	for _, want := range []string{"architecture=qwen2 dtype=f16 chat_template=qwen2.5", "model_type=qwen3 dtype=q8_0"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("startup log lacks %q:\n%s", want, logs.String())
		}
	}
	const ask = `{"model":"gguf","temperature":0,"max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`
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
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &got); resp.StatusCode != 200 || err != nil || len(got.Choices) != 1 {
		t.Fatalf("chat over HTTP: %d %s (%v)", resp.StatusCode, body, err)
	}

	w, info, err := infer.LoadGGUF(ggufFixture(t, "qwen2-bias-f16.gguf"), infer.HFOptions{Context: 128})
	if err != nil {
		t.Fatal(err)
	}
	tok, f, err := ggufTokenizer(info.Tokenizer, ModelConfig{})
	if err != nil {
		t.Fatal(err)
	}
	lcfg := local.DefaultConfig()
	lcfg.Name = "gguf"
	m, err := local.NewHF(w, tok, f, info.EOS, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	zero := 0.0
	want, err := m.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User("hello")}, Temperature: &zero, MaxTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, err := json.Marshal(want.Choices[0].Message.Content) // invalid UTF-8 becomes U+FFFD, as the server sends it
	if err != nil {
		t.Fatal(err)
	}
	var wantContent string
	if err := json.Unmarshal(wantJSON, &wantContent); err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content != wantContent {
		t.Errorf("served reply %q, in-process %q", got.Choices[0].Message.Content, wantContent)
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

// TestConfigQuantizeKeys checks where quantize may go.
func TestConfigQuantizeKeys(t *testing.T) {
	solver, err := filepath.Abs(filepath.Join("..", "..", "models", "solver"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, model, want string
	}{
		{"unknown type", "checkpoint: " + hfFixture(t) + "\n    quantize: q4_0", `unknown quantisation "q4_0"`},
		{"our own checkpoint", "checkpoint: " + solver + "\n    quantize: q8_0", "quantize belong to a Hugging Face checkpoint or a GGUF file"},
		{"shipped model", "checkpoint: shipped:solver\n    quantize: q8_0", "not to the shipped models"},
		{"gguf follow", "checkpoint: " + ggufFixture(t, "qwen2-bias-q8_0.gguf") + "\n    follow: " + t.TempDir(), "is a GGUF file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "delegate.yaml")
			doc := "models:\n  m:\n    kind: local\n    " + tc.model + "\nroles:\n  default: m\n"
			if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadConfig(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadConfig = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
