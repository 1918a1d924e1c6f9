package local

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/tokenizer"
)

// minTokensCases are requests whose prompt the bound must not pass:
// empty messages, tool calls on every role, tools, blank arguments.
func minTokensCases() map[string]*delegate.Request {
	empty := make([]delegate.Message, 50)
	for i := range empty {
		empty[i] = delegate.Message{Role: delegate.RoleUser}
	}
	call := delegate.ToolCall{ID: "c1", Name: "delegate", Arguments: `{"question": "3*4?"}`}
	tool := delegate.Tool{Name: "delegate", Description: "ask a small model", Parameters: json.RawMessage(`{"type": "object", "properties": {"question": {"type": "string"}}}`)}
	return map[string]*delegate.Request{
		"one user message": {Messages: []delegate.Message{delegate.User("What is 3*4?")}},
		"empty messages":   {Messages: empty},
		"every role": {Messages: []delegate.Message{
			delegate.System("Solve."), delegate.User("3*4?"),
			{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{call, {ID: "c2", Name: "delegate", Arguments: "  "}}},
			{Role: delegate.RoleTool, ToolCallID: "c1", Content: "12"}, {Role: delegate.RoleTool, ToolCallID: "c2", Content: ""},
			delegate.Assistant("12"),
		}},
		"calls on a user message": {Messages: []delegate.Message{{Role: delegate.RoleUser, Content: "x", ToolCalls: []delegate.ToolCall{call}}}},
		"tools":                   {Messages: []delegate.Message{delegate.User("x")}, Tools: []delegate.Tool{tool, {Name: "t2"}}},
	}
}

// TestMinTokensIsALowerBound checks every codec's bound against the
// prompt it renders.
func TestMinTokensIsALowerBound(t *testing.T) {
	codecs := map[string]codec{"builtin": builtin{}}
	for _, fixture := range []string{"qwen3-qknorm", "qwen2-bias", "llama3-scaled"} {
		dir := filepath.Join("..", "nn", "infer", "testdata", "hf", fixture)
		_, info, err := infer.LoadHF(dir, infer.HFOptions{})
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
		c, err := newHFCodec(tok, f, info.EOS)
		if err != nil {
			t.Fatal(err)
		}
		codecs[fixture] = c
	}
	for cname, c := range codecs {
		for name, req := range minTokensCases() {
			t.Run(cname+"/"+name, func(t *testing.T) {
				prompt, err := c.prompt(req.Messages, req.Tools)
				if err != nil {
					t.Skipf("the template refuses it, so there is no prompt to bound: %v", err)
				}
				got := c.minTokens(req)
				if got > len(prompt) {
					t.Errorf("minTokens = %d, more than the prompt's %d tokens", got, len(prompt))
				}
				if got < len(req.Messages) {
					t.Errorf("minTokens = %d, want at least one per message (%d)", got, len(req.Messages))
				}
			})
		}
	}
}

// countingCodec is builtin that counts the prompts it renders.
type countingCodec struct {
	builtin
	rendered int
}

func (c *countingCodec) prompt(msgs []delegate.Message, tools []delegate.Tool) ([]int, error) {
	c.rendered++
	return c.builtin.prompt(msgs, tools)
}

// TestManyEmptyMessagesRefusedBeforeRendering checks that messages
// without text still count against the context before any tokenizing.
func TestManyEmptyMessagesRefusedBeforeRendering(t *testing.T) {
	cfg := nn.Config{Vocab: tokenizer.VocabSize, Dim: 32, Layers: 1, Heads: 2, KVHeads: 1, Hidden: 32, Context: 64}.WithDefaults()
	p, err := nn.Alloc(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Init(1)
	m, err := New(p, named("tiny"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := &countingCodec{}
	m.codec = c
	msgs := make([]delegate.Message, 40) // no text: 82 tokens of template
	for i := range msgs {
		msgs[i] = delegate.Message{Role: delegate.RoleUser}
	}
	_, err = m.Chat(context.Background(), &delegate.Request{Messages: msgs})
	var ae *delegate.APIError
	if !errors.As(err, &ae) || ae.Code != "context_length_exceeded" || !strings.Contains(ae.Message, "at least 82") {
		t.Fatalf("err = %v, want context_length_exceeded at least 82 tokens", err)
	}
	if c.rendered != 0 {
		t.Errorf("the prompt was rendered %d times before the refusal, want 0", c.rendered)
	}
}
