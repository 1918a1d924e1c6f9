package local_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/tokenizer"
)

// hfModel serves a tiny Hugging Face fixture of package nn (made by
// nn/infer/testdata/hf/make_fixtures.py, with its own tiny tokenizer.json).
func hfModel(t *testing.T, fixture string) (*local.Model, *infer.Weights, *tokenizer.HF, tokenizer.ChatFormat) {
	t.Helper()
	dir := filepath.Join("..", "nn", "infer", "testdata", "hf", fixture)
	w, info, err := infer.LoadHF(dir, infer.HFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.LoadHF(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := tokenizer.ParseChatFormat(infer.HFChatTemplate(info.ModelType))
	if err != nil {
		t.Fatal(err)
	}
	m, err := local.NewHF(w, tok, f, info.EOS, local.Config{Name: fixture, MaxNew: 16, MaxBatch: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m, w, tok, f
}

func TestHFConformance(t *testing.T) {
	m, _, _, _ := hfModel(t, "qwen3-qknorm")
	modeltest.Conformance(t, m)
}

// TestHFChatIsTheEngineGreedy checks that a chat reply is the engine's own greedy generation.
// The request must reach the engine as the chat template's ids, and the
// reply be the engine's greedy ids, decoded. The streamed content must be a
// prefix of the reply's.
func TestHFChatIsTheEngineGreedy(t *testing.T) {
	for _, fixture := range []string{"qwen2-bias", "qwen3-qknorm", "llama3-scaled"} {
		t.Run(fixture, func(t *testing.T) {
			m, w, tok, f := hfModel(t, fixture)
			zero := 0.0
			msgs := []delegate.Message{delegate.User("hello there")}
			req := &delegate.Request{Messages: msgs, Temperature: &zero, MaxTokens: 12, Logprobs: true}
			resp, err := m.Chat(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			prompt, err := tok.EncodeChat(f, msgs, nil, tokenizer.ChatOptions{AddGenerationPrompt: true})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(resp.PromptTokenIDs, prompt) {
				t.Errorf("prompt ids = %v, the template gives %v", resp.PromptTokenIDs, prompt)
			}
			ec := infer.DefaultEngineConfig()
			ec.MaxBatch = 1
			e, err := infer.NewEngineWeights(w, ec)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			gen, err := e.Generate(context.Background(), infer.GenRequest{Prompt: prompt, MaxNew: 12})
			if err != nil {
				t.Fatal(err)
			}
			var ids []int
			for _, lp := range resp.Choices[0].Logprobs {
				ids = append(ids, lp.TokenID)
			}
			if !slices.Equal(ids, gen.Tokens) {
				t.Errorf("reply ids = %v, the engine's greedy %v", ids, gen.Tokens)
			}
			if resp.Usage.CompletionTokens != len(gen.Tokens) || resp.Usage.PromptTokens != len(prompt) {
				t.Errorf("usage = %+v, want %d prompt and %d completion tokens", resp.Usage, len(prompt), len(gen.Tokens))
			}
			var streamed strings.Builder
			sresp, err := m.ChatStream(context.Background(), req, func(_ int, text string) { streamed.WriteString(text) })
			if err != nil {
				t.Fatal(err)
			}
			content := sresp.Choices[0].Message.Content
			if content != resp.Choices[0].Message.Content {
				t.Errorf("streamed call content %q, plain call %q", content, resp.Choices[0].Message.Content)
			}
			if !strings.HasPrefix(content, streamed.String()) {
				t.Errorf("streamed %q is not a prefix of the content %q", streamed.String(), content)
			}
			t.Logf("reply %q (%d tokens, finish %s), streamed %d bytes", content, len(ids), resp.Choices[0].FinishReason, streamed.Len())
		})
	}
}

// TestHFContextLimit checks that a prompt over the context is a 400.
func TestHFContextLimit(t *testing.T) {
	m, _, _, _ := hfModel(t, "qwen3-qknorm")
	_, err := m.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User(strings.Repeat("q", 600))}})
	var apiErr *delegate.APIError
	if !asAPIError(err, &apiErr) || apiErr.Status != 400 || apiErr.Code != "context_length_exceeded" {
		t.Errorf("long prompt: err = %v, want a 400 context_length_exceeded", err)
	}
	if mem := m.Memory(); mem.KVCache <= 0 || mem.Weights <= 0 {
		t.Errorf("memory = %+v", mem)
	}
}

func asAPIError(err error, target **delegate.APIError) bool {
	e, ok := err.(*delegate.APIError)
	if ok {
		*target = e
	}
	return ok
}

// TestHFToolCallsParsed checks the Qwen templates' tool-call blocks come
// back as tool calls, through the model's own tokenizer.
func TestHFToolCallsParsed(t *testing.T) {
	_, _, tok, f := hfModel(t, "qwen3-qknorm")
	codec, err := local.NewHFCodecForTest(tok, f)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text    string
		content string
		calls   []delegate.ToolCall
	}{
		{"just text", "just text", nil},
		{"let me ask\n<tool_call>\n{\"name\": \"delegate\", \"arguments\": {\"q\": \"2+2\"}}\n</tool_call>", "let me ask\n",
			[]delegate.ToolCall{{ID: "call_0", Name: "delegate", Arguments: `{"q": "2+2"}`}}},
		{"<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\"}\n</tool_call>", "\n",
			[]delegate.ToolCall{{ID: "call_0", Name: "a", Arguments: "{}"}, {ID: "call_1", Name: "b", Arguments: "{}"}}},
		{"<tool_call>\nnot json\n</tool_call>", "", []delegate.ToolCall{{ID: "call_0", Arguments: "not json"}}},
		{"<tool_call>\n{\"name\": \"a\", \"arguments\": {}}", "", []delegate.ToolCall{{ID: "call_0", Arguments: `{"name": "a", "arguments": {}}`}}},
	} {
		msg := codec(tok.Encode(tc.text))
		if msg.Content != tc.content || !slices.Equal(msg.ToolCalls, tc.calls) {
			t.Errorf("parse(%q) = content %q, calls %+v; want %q, %+v", tc.text, msg.Content, msg.ToolCalls, tc.content, tc.calls)
		}
	}
}

// TestHFLlama3NoTools checks that tools offered to a model whose template
// has no tools section are a 400 naming the template.
func TestHFLlama3NoTools(t *testing.T) {
	m, _, _, _ := hfModel(t, "llama3-scaled")
	_, err := m.Chat(context.Background(), &delegate.Request{
		Messages: []delegate.Message{delegate.User("hi")},
		Tools:    []delegate.Tool{{Name: "delegate", Description: "ask"}},
	})
	var apiErr *delegate.APIError
	if !asAPIError(err, &apiErr) || apiErr.Status != 400 || !strings.Contains(apiErr.Message, "Llama 3") {
		t.Errorf("tools with llama3: err = %v, want a 400 naming the template", err)
	}
}
