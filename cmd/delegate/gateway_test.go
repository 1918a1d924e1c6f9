package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/trajectory/atropos"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

func TestGatewayExposure(t *testing.T) {
	_, err := execute(t, func(string) string { return "" }, "gateway", "--config", "../../examples/world.yaml", "--addr", "0.0.0.0:0", "--out", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), gatewayTokenEnv) {
		t.Errorf("off loopback without a token: got %v, want an error naming $%s", err, gatewayTokenEnv)
	}
	_, err = execute(t, func(string) string { return "" }, "gateway", "--config", "../../examples/world.yaml")
	if err == nil || !strings.Contains(err.Error(), "--out") {
		t.Errorf("no --out: got %v, want an error naming --out", err)
	}
}

// TestGatewayCommand starts delegate gateway on examples/world.yaml. It
// runs two sessions of one group of 3 through the official client, the
// solver playing role calc (--role), one rewarded by the world's
// verifier. A second call in a session passes --max-session-calls and is
// refused. The group times out (--group-timeout) and is written with its
// two sessions; then it reads that record.
func TestGatewayCommand(t *testing.T) {
	const token = "gateway-command-test-token"
	getenv := func(name string) string {
		if name == gatewayTokenEnv {
			return token
		}
		return ""
	}
	dir := t.TempDir()
	var out, logs syncBuffer
	cmd := newRootCmd(getenv, slog.New(slog.NewTextHandler(&logs, nil)))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"gateway", "--config", "../../examples/world.yaml", "--addr", "127.0.0.1:0", "--out", dir, "--group", "3", "--train", "calc", "--role", "solver=calc",
		"--group-timeout", "5s", "--max-session-calls", "1"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	addr := regexp.MustCompile(`gateway on (http://\S+):`)
	base := awaitListening(t, &out, done, addr, "gateway")
	if !strings.Contains(out.String(), `model "solver" (config key solver), chat template sha256:`) {
		t.Errorf("startup output lacks the solver's template hash:\n%s", out.String())
	}
	post := func(path, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d %s", strings.SplitN(path, "sess-", 2)[0], resp.StatusCode, b)
		}
		return b
	}
	var ids []string
	for i, reward := range []string{`{}`, `{"reward":0}`} {
		var cr gateway.CreateResponse
		if err := json.Unmarshal(post("/sessions", `{"task":{"id":"p1","dataset":"world","answer":"1288"}}`), &cr); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cr.SessionID)
		c := openai.NewClient(option.WithBaseURL(cr.BaseURL), option.WithAPIKey("unused"), option.WithMaxRetries(0))
		resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "solver",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("56*23")}, Temperature: openai.Float(0)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(resp.Choices[0].Message.Content, `\boxed{1288}`) {
			t.Errorf("session %d: the solver answered %q", i, resp.Choices[0].Message.Content)
		}
		_, err = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "solver",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("1+1")}})
		var ae *openai.Error
		if !errors.As(err, &ae) || ae.StatusCode != 429 || !strings.Contains(ae.Message, "bound of 1 recorded calls") {
			t.Errorf("session %d: a call past --max-session-calls 1 got %v, want 429 naming the bound", i, err)
		}
		var rr gateway.RewardResponse
		if err := json.Unmarshal(post("/sessions/"+cr.SessionID+"/reward", reward), &rr); err != nil {
			t.Fatal(err)
		}
		if i == 0 && (rr.Correct == nil || !*rr.Correct || rr.Reward != 1) {
			t.Errorf("verified reward %+v, want correct and 1", rr)
		}
	}
	// The group of 3 times out with its 2 sessions.
	var b []byte
	for deadline := time.Now().Add(30 * time.Second); len(b) == 0; time.Sleep(50 * time.Millisecond) {
		var err error
		if b, err = os.ReadFile(filepath.Join(dir, gateway.GroupsFile)); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no group record 25 s after the group's time-out")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("gateway: %v", err)
	}
	g, err := rollout.DecodeGroup(b)
	if err != nil {
		t.Fatal(err)
	}
	if g.ID[:3] != "p1#" || !strings.HasSuffix(g.ID, ".calc") || len(g.Tokens) != 2 || len(g.Tokens[0]) == 0 || g.Scores[0] != 1 || g.Scores[1] != 0 || g.Advantages[0] <= 0 {
		t.Errorf("group record %s: %d sequences, scores %v, advantages %v", g.ID, len(g.Tokens), g.Scores, g.Advantages)
	}
	if g.GroupOverrides.GroupSize != 2 || len(g.Missing) != 1 || !strings.Contains(g.Missing[0].Error, "timed out") {
		t.Errorf("group record of size %d, missing %+v: want 2, and the third session timed out", g.GroupOverrides.GroupSize, g.Missing)
	}
	// process --push's consumer reads it as one of its own.
	if sd, err := atropos.ScoredDataOf(g); err != nil || len(sd.Tokens) != 2 || g.Run == "" {
		t.Errorf("ScoredDataOf the gateway's record: %v (run %q)", err, g.Run)
	}
	for _, id := range ids {
		if strings.Contains(logs.String(), id) || strings.Contains(out.String(), id) {
			t.Errorf("a session id is in the output or the log")
		}
	}
}

// TestGatewayTemplateHash checks each kind of model's chat-template hash.
// It is the project's own for its checkpoints, the Hugging Face tokenizer and
// template for an imported checkpoint or a GGUF file, none for a remote
// model without a tokenizer.
func TestGatewayTemplateHash(t *testing.T) {
	dir := hfFixture(t)
	tok, err := tokenizer.LoadHF(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	qwen, err := gateway.TemplateHash(func(msgs []delegate.Message, tools []delegate.Tool) ([]int, error) {
		return tok.EncodeChat(tokenizer.ChatQwen3, msgs, tools, tokenizer.ChatOptions{AddGenerationPrompt: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	llama, err := gateway.TemplateHash(func(msgs []delegate.Message, tools []delegate.Tool) ([]int, error) {
		return tok.EncodeChat(tokenizer.ChatLlama3, msgs, tools, tokenizer.ChatOptions{AddGenerationPrompt: true})
	})
	if err != nil || llama == qwen {
		t.Fatalf("two templates, one hash %q (%v)", qwen, err)
	}
	// A GGUF file's embedded tokenizer and template: those of the
	// tokenizer.json it was converted from, under qwen2.5.
	q2tok, err := tokenizer.LoadHF(filepath.Join("..", "..", "nn", "infer", "testdata", "hf", "qwen2-bias", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	qwen25, err := gateway.TemplateHash(func(msgs []delegate.Message, tools []delegate.Tool) ([]int, error) {
		return q2tok.EncodeChat(tokenizer.ChatQwen25, msgs, tools, tokenizer.ChatOptions{AddGenerationPrompt: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mc   ModelConfig
		want string
	}{
		{"GGUF, its embedded tokenizer and template", ModelConfig{Kind: "local", Checkpoint: ggufFixture(t, "qwen2-bias-q8_0.gguf")}, qwen25},
		{"shipped", ModelConfig{Kind: "local", Checkpoint: "shipped:solver"}, gateway.BuiltinTemplateHash()},
		{"own checkpoint", ModelConfig{Kind: "local", Checkpoint: "../../models/solver"}, gateway.BuiltinTemplateHash()},
		{"Hugging Face, its model_type's template", ModelConfig{Kind: "local", Checkpoint: dir}, qwen},
		{"Hugging Face, another template", ModelConfig{Kind: "local", Checkpoint: dir, ChatTemplate: "llama3"}, llama},
		{"remote with a tokenizer", ModelConfig{Kind: "openai", Tokenizer: filepath.Join(dir, "tokenizer.json"), ChatTemplate: "qwen3"}, qwen},
		{"remote without one", ModelConfig{Kind: "openai"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := templateHash(tc.mc)
			if err != nil || got != tc.want {
				t.Errorf("templateHash = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestGatewayPush runs delegate gateway with --push against a real
// delegate api and its trainer. Each group record reaches the trainer's
// batch as process --push sends it. A session waits for room in the API's
// queue, and gets 503 when none comes in time.
func TestGatewayPush(t *testing.T) {
	const token = "gateway-push-test-token"
	getenv := func(name string) string {
		if name == gatewayTokenEnv {
			return token
		}
		return ""
	}
	url := startAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	trainer := atropos.DefaultTrainerClient()
	trainer.URL, trainer.Poll = url, 20*time.Millisecond
	// One group of two sessions, the solver's samples, is a batch.
	if err := trainer.Register(ctx, atropos.Registration{BatchSize: 2, MaxTokenLen: 512, NumSteps: 10}); err != nil {
		t.Fatal(err)
	}
	batches := make(chan atropos.Batch, 2)
	next := func() {
		go func() {
			if b, err := trainer.Next(ctx); err == nil {
				batches <- b
			}
		}()
	}
	next() // the trainer starts: the gateway registers only then
	dir := t.TempDir()
	var out syncBuffer
	cmd := newRootCmd(getenv, slog.New(slog.DiscardHandler))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"gateway", "--config", "../../examples/world.yaml", "--addr", "127.0.0.1:0", "--out", dir, "--group", "2",
		"--train", "solver", "--push", url, "--push-offpolicy", "1", "--push-wait", "300ms"})
	gctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(gctx) }()
	base := awaitListening(t, &out, done, regexp.MustCompile(`gateway on (http://\S+):`), "gateway")
	post := func(path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	session := func(question string) {
		t.Helper()
		code, b := post("/sessions", `{"task":{"id":"p","dataset":"world","answer":"1288"}}`)
		if code != http.StatusOK {
			t.Fatalf("POST /sessions: %d %s", code, b)
		}
		var cr gateway.CreateResponse
		if err := json.Unmarshal(b, &cr); err != nil {
			t.Fatal(err)
		}
		c := openai.NewClient(option.WithBaseURL(cr.BaseURL), option.WithAPIKey("unused"), option.WithMaxRetries(0))
		if _, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "solver",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)}, Temperature: openai.Float(0)}); err != nil {
			t.Fatal(err)
		}
		if code, b := post("/sessions/"+cr.SessionID+"/reward", `{}`); code != http.StatusOK {
			t.Fatalf("reward: %d %s", code, b)
		}
	}
	session("56*23")
	session("57*23") // wrong against 1288: the group's rewards differ
	var b atropos.Batch
	select {
	case b = <-batches:
	case <-ctx.Done():
		t.Fatalf("the trainer got no batch:\n%s", out.String())
	}
	recs := readGroupFile(t, filepath.Join(dir, gateway.GroupsFile))
	if len(recs) != 1 || len(b.Batch) != 1 {
		t.Fatalf("%d records, a batch of %d groups; want one of each", len(recs), len(b.Batch))
	}
	want, err := atropos.ScoredDataOf(recs[0])
	if err != nil {
		t.Fatal(err)
	}
	got := b.Batch[0]
	if !reflect.DeepEqual(got.Tokens, want.Tokens) || !reflect.DeepEqual(got.Masks, want.Masks) || !reflect.DeepEqual(got.Scores, want.Scores) ||
		!reflect.DeepEqual(got.InferenceLogprobs, want.InferenceLogprobs) || got.GroupOverrides["group_id"] != want.GroupOverrides["group_id"] {
		t.Errorf("the trainer's group differs from the record's ScoredData:\n got %v %v\nwant %v %v", got.Scores, got.GroupOverrides, want.Scores, want.GroupOverrides)
	}
	// A second group's batch waits for the trainer: the queue is full,
	// and a session waits, then is refused.
	session("56*23")
	session("57*23")
	for deadline := time.Now().Add(30 * time.Second); ; {
		st, err := trainer.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.QueueSize > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second group did not reach the API's queue")
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	code, body := post("/sessions", `{"task":{"id":"p","dataset":"world","answer":"1288"}}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "trainer_busy") || time.Since(start) < 300*time.Millisecond {
		t.Errorf("session with the queue full: %d %s after %v, want 503 trainer_busy after --push-wait", code, body, time.Since(start))
	}
	next() // the trainer fetches again: room
	var trainerStep int
	for deadline := time.Now().Add(30 * time.Second); ; {
		st, err := trainer.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if trainerStep = st.CurrentStep; trainerStep > 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the trainer's step did not move")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := post("/sessions", `{"task":{"id":"p","dataset":"world","answer":"1288"}}`); code != http.StatusOK {
		t.Errorf("session once the trainer fetched: %d %s", code, body)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("gateway: %v", err)
	}
	b2, err := os.ReadFile(filepath.Join(dir, gateway.PushedFile))
	if err != nil || strings.TrimSpace(string(b2)) != strconv.FormatInt(fileSize(t, filepath.Join(dir, gateway.GroupsFile)), 10) {
		t.Errorf("%s holds %q (%v), want the length of %s", gateway.PushedFile, b2, err, gateway.GroupsFile)
	}
	if !strings.Contains(out.String(), "group records also go to "+url) {
		t.Errorf("the output does not say where records go:\n%s", out.String())
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestChatTokenizer checks the gateway's tokenizer of a remote model. The
// prompt and answer ids, end-of-turn token included, must begin the
// template's rendering of the conversation ending with the answer.
func TestChatTokenizer(t *testing.T) {
	dir := hfFixture(t)
	for _, tmpl := range []string{"qwen3", "qwen2.5"} { // the fixture's vocabulary is Qwen's
		t.Run(tmpl, func(t *testing.T) {
			ct, err := newChatTokenizer(filepath.Join(dir, "tokenizer.json"), tmpl)
			if err != nil {
				t.Fatal(err)
			}
			msgs := []delegate.Message{delegate.System("Compute."), delegate.User("56*23")}
			out := delegate.Message{Role: delegate.RoleAssistant, Content: `\boxed{1288}`}
			p, err := ct.Prompt(msgs, nil)
			if err != nil {
				t.Fatal(err)
			}
			c, err := ct.Completion(msgs, nil, out)
			if err != nil {
				t.Fatal(err)
			}
			whole, err := ct.tok.EncodeChat(ct.f, append(msgs, out), nil, tokenizer.ChatOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := append(slices.Clone(p), c...)
			if len(c) < 2 || len(got) > len(whole) || !slices.Equal(whole[:len(got)], got) {
				t.Errorf("prompt and answer %v are not the start of the conversation's ids %v", got, whole)
			}
		})
	}
}
