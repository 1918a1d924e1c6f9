package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/tokenizer"
)

// TestProcessTemperature checks that --temperature samples the trained
// turns. The shipped config samples route's strong turns greedily, so its
// G rollouts tie and every group is dropped. With --temperature the groups
// carry a signal.
func TestProcessTemperature(t *testing.T) {
	run := func(extra ...string) string {
		t.Helper()
		args := append([]string{"process", "--config", "../../examples/world.yaml", "--dataset", "world", "--strategy", "route",
			"-n", "3", "-g", "4", "--out", filepath.Join(t.TempDir(), "run"), "--progress", "none"}, extra...)
		got, err := execute(t, testEnv, args...)
		if err != nil {
			t.Fatalf("process %v: %v\n%s", extra, err, got)
		}
		return got
	}
	if got := run(); !strings.Contains(got, "groups 3: written 0") {
		t.Errorf("greedy rollouts: want every group tied and dropped:\n%s", got)
	}
	if got := run("--temperature", "1"); strings.Contains(got, "written 0") || !strings.Contains(got, "groups 3: written") {
		t.Errorf("sampled rollouts: want groups written:\n%s", got)
	}
	if _, err := execute(t, testEnv, "process", "--config", "../../examples/world.yaml", "--dataset", "world", "-n", "2", "--temperature", "3",
		"--out", t.TempDir()); err == nil || !strings.Contains(err.Error(), "--temperature 3") {
		t.Errorf("--temperature 3: %v, want a refusal naming it", err)
	}
}

// TestRunTokenizerForIdlessServer uses a server that returns logprobs as
// text pieces but no token ids. The remote model gets its ids from the
// tokenizer.json the config names, so its trace holds what a trainer
// needs.
func TestRunTokenizerForIdlessServer(t *testing.T) {
	raceCovered(t, "tokenizer's TestHFConcurrentEncode and openai's TestFillIDsOverHTTP")
	tokPath, err := filepath.Abs("../../tokenizer/testdata/hf/qwen2.5.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.LoadHF(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	const reply = "Final answer: \\boxed{42}"
	var sampled []int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var lps []map[string]any
		for _, id := range sampled {
			p, _ := tok.Decode([]int{id})
			var bs []int
			for _, c := range []byte(p) {
				bs = append(bs, int(c))
			}
			lps = append(lps, map[string]any{"token": p, "logprob": -0.25, "bytes": bs, "top_logprobs": []any{}})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "x", "object": "chat.completion", "model": "qwen",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message":  map[string]any{"role": "assistant", "content": reply},
				"logprobs": map[string]any{"content": lps}}},
			"usage": map[string]any{"prompt_tokens": 20, "completion_tokens": len(sampled), "total_tokens": 20 + len(sampled)},
		})
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	doc := "models:\n  qwen:\n    base_url: " + srv.URL + "/v1\n    model: qwen\n    tokenizer: " + tokPath +
		"\n    chat_template: qwen2.5\n    price: {input: 1, output: 1}\nroles:\n  default: qwen\n"
	cfg := filepath.Join(dir, "qwen.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	// The policy's reply as the tokenizer writes it: its tokens and <|im_end|>.
	msgs := []delegate.Message{delegate.User("What is 6*7?")} // the reply's ids do not depend on the prompt
	prompt, err := tok.EncodeChat(tokenizer.ChatQwen25, msgs, nil, tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	full, err := tok.EncodeChat(tokenizer.ChatQwen25, append(msgs, delegate.Assistant(reply)), nil, tokenizer.ChatOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sampled = full[len(prompt) : len(prompt)+len(tok.EncodePlain(reply))+1]

	// process asks for logprobs; run's single strategy does not, so go
	// through process's path: the trained role's calls with --logprobs.
	out := filepath.Join(dir, "run")
	data := filepath.Join(dir, "q.jsonl")
	if err := os.WriteFile(data, []byte(`{"question":"What is 6*7?","answer":"#### 42"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := execute(t, testEnv, "process", "--config", cfg, "--dataset", "gsm8k", "--data", data, "-g", "2",
		"--strategy", "single", "--logprobs", "--keep-ties", "--out", out, "--progress", "none")
	if err != nil {
		t.Fatalf("process: %v\n%s", err, got)
	}
	b, err := os.ReadFile(filepath.Join(out, "groups.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var g rollout.GroupRecord
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("groups.jsonl: %v\n%s", err, got)
	}
	if len(g.Tokens) != 2 || len(g.Messages[0]) < 2 {
		t.Fatalf("group: %d sequences (no_tokens %q)", len(g.Tokens), g.NoTokens)
	}
	var conv []delegate.Message
	for _, m := range g.Messages[0][:len(g.Messages[0])-1] {
		conv = append(conv, m.Message)
	}
	seqPrompt, err := tok.EncodeChat(tokenizer.ChatQwen25, conv, nil, tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := append(seqPrompt, sampled...); !slices.Equal(g.Tokens[0], want) || !slices.Equal(g.Masks[0][len(seqPrompt):], sampled) {
		t.Fatalf("tokens %v, masks %v; want the rendered prompt's ids then the sampled reply's, trained", g.Tokens[0], g.Masks[0])
	}

	bad := strings.Replace(doc, "\n    chat_template: qwen2.5", "", 1)
	if err := os.WriteFile(cfg, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := execute(t, testEnv, "config", "check", cfg); err == nil || !strings.Contains(err.Error(), "tokenizer and chat_template go together") {
		t.Errorf("tokenizer without chat_template: %v", err)
	}
}
