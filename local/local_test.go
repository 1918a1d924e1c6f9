package local_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/train"
	"github.com/delegatelab/delegate/tokenizer"
)

func tinyModel(t *testing.T, context int) *local.Model {
	t.Helper()
	cfg := nn.Config{Vocab: tokenizer.VocabSize, Dim: 32, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 64, Context: context}.WithDefaults()
	p, err := nn.Alloc(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Init(7)
	m, err := local.New(p, local.Config{Name: "tiny", MaxNew: 24, MaxBatch: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m
}

func TestConformance(t *testing.T) {
	modeltest.Conformance(t, tinyModel(t, 256))
}

func TestChatUsageAndLogprobsMatchTheTrainer(t *testing.T) {
	m := tinyModel(t, 256)
	temp := 1.0
	seed := int64(42)
	req := &delegate.Request{
		Messages:    []delegate.Message{delegate.System("be brief"), delegate.User("What is 2+2?")},
		Temperature: &temp, Seed: &seed, Logprobs: true, N: 3, MaxTokens: 16,
	}
	resp, err := m.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	prompt := tokenizer.Render(req.Messages, nil, true)
	if got, want := resp.Usage.PromptTokens, len(prompt); got != want {
		t.Errorf("prompt tokens = %d, want %d", got, want)
	}
	if len(resp.Choices) != 3 {
		t.Fatalf("choices = %d, want 3", len(resp.Choices))
	}
	completion := 0
	ws, err := train.NewWorkspace(m.Params().Config)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range resp.Choices {
		completion += len(c.Logprobs)
		if len(c.Logprobs) == 0 || len(c.Logprobs) > 16 {
			t.Fatalf("choice %d: %d logprobs", i, len(c.Logprobs))
		}
		// The logprob the sampler reports must be what the trainer computes
		// for the same tokens: the importance ratio of a fresh policy is 1.
		seq := append([]int(nil), prompt...)
		for _, lp := range c.Logprobs {
			seq = append(seq, lp.TokenID)
		}
		b := train.Batch{B: 1, T: len(seq) - 1, Inputs: seq[:len(seq)-1], Targets: seq[1:]}
		got, err := ws.TokenLogprobs(context.Background(), m.Params(), b)
		if err != nil {
			t.Fatal(err)
		}
		for j, lp := range c.Logprobs {
			train := float64(got[len(prompt)-1+j])
			if math.Abs(train-lp.Logprob) > 2e-4 {
				t.Fatalf("choice %d token %d: sampler logprob %v, trainer %v", i, j, lp.Logprob, train)
			}
		}
	}
	if resp.Usage.CompletionTokens != completion {
		t.Errorf("completion tokens = %d, want %d", resp.Usage.CompletionTokens, completion)
	}
	again, err := m.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for i := range again.Choices {
		if again.Choices[i].Message.Content != resp.Choices[i].Message.Content {
			t.Errorf("choice %d differs with the same seed", i)
		}
	}
}

func TestChatRejectsPromptLongerThanContext(t *testing.T) {
	m := tinyModel(t, 32)
	_, err := m.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User(strings.Repeat("x", 100))}})
	var ae *delegate.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Retryable() {
		t.Fatalf("err = %v, want a non-retryable 400 APIError", err)
	}
	if !strings.Contains(ae.Message, "context") {
		t.Errorf("message %q does not name the context", ae.Message)
	}
}

func TestChatCancelled(t *testing.T) {
	m := tinyModel(t, 256)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.Chat(ctx, &delegate.Request{Messages: []delegate.Message{delegate.User("hi")}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestConfigToolsReplaceOfferedDeclarations checks that Config.Tools replace offered tools by name.
// The prompt is then that of a request declaring the tool directly. Other
// tools and the caller's request are left alone.
func TestConfigToolsReplaceOfferedDeclarations(t *testing.T) {
	cfg := nn.Config{Vocab: tokenizer.VocabSize, Dim: 32, Layers: 1, Heads: 4, KVHeads: 2, Hidden: 64, Context: 512}.WithDefaults()
	p, err := nn.Alloc(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Init(7)
	compact := delegate.Tool{Name: "delegate"}
	tcfg := local.DefaultConfig()
	tcfg.Name, tcfg.MaxNew, tcfg.Seed, tcfg.Tools = "tiny", 4, 1, map[string]delegate.Tool{"delegate": compact}
	m, err := local.New(p, tcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pcfg := local.DefaultConfig()
	pcfg.Name, pcfg.MaxNew, pcfg.Seed = "plain", 4, 1
	plain, err := local.New(p, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	other := delegate.Tool{Name: "lookup", Description: "Look a word up.", Parameters: []byte(`{"type":"object"}`)}
	verbose := delegate.Tool{Name: "delegate", Description: "Hand a self-contained question to a sub-agent and get its answer back.",
		Parameters: []byte(`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"]}`)}
	temp := 0.0
	ask := func(m *local.Model, tools ...delegate.Tool) int {
		t.Helper()
		req := &delegate.Request{Messages: []delegate.Message{{Role: delegate.RoleUser, Content: "47*28"}}, Tools: tools, Temperature: &temp}
		resp, err := m.Chat(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if tools != nil && req.Tools[len(tools)-1].Description != tools[len(tools)-1].Description {
			t.Fatal("the caller's request was modified")
		}
		return resp.Usage.PromptTokens
	}
	if got, want := ask(m, other, verbose), ask(plain, other, compact); got != want {
		t.Errorf("prompt with the verbose declaration replaced: %d tokens, want %d (the compact one's)", got, want)
	}
	if got, want := ask(plain, other, verbose), ask(plain, other, compact); got <= want {
		t.Errorf("without Tools the verbose declaration is rendered: %d tokens, want more than %d", got, want)
	}
	if got, want := ask(m, other), ask(plain, other); got != want {
		t.Errorf("a request without the tool: %d tokens, want %d", got, want)
	}
}
