package gateway

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/tokenizer"
)

// The conversations a chat template renders for its hash. One has every
// role with a tool declaration, call and answer. For a template without
// tools, such as Llama 3's, one has plain turns.
var (
	probeTools = []delegate.Tool{{Name: "delegate", Description: "Ask another model.", Parameters: []byte(`{"type":"object","properties":{"question":{"type":"string"}}}`)}}
	probe      = []delegate.Message{
		delegate.System("You are a probe."),
		delegate.User("What is 2+3?"),
		{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: "call_0", Name: "delegate", Arguments: `{"question":"2+3"}`}}},
		delegate.ToolResult("call_0", "5"),
		delegate.Assistant("The answer is 5."),
		delegate.User("And 4*6?"),
	}
	plainProbe = []delegate.Message{
		delegate.System("You are a probe."),
		delegate.User("What is 2+3?"),
		delegate.Assistant("The answer is 5."),
		delegate.User("And 4*6?"),
	}
)

// TemplateHash is the hash of a chat template as it behaves. It is the
// SHA-256 of the ids render gives a fixed conversation, with the generation
// prompt. The conversation has every role and a tool call, or plain turns for
// a template that renders no tools. Two templates that tokenize it alike
// share a hash; a trainer compares it with its own to know that it may trust
// the recorded ids.
func TemplateHash(render func(msgs []delegate.Message, tools []delegate.Tool) ([]int, error)) (string, error) {
	ids, err := render(probe, probeTools)
	kind := "tools"
	if err != nil {
		var perr error
		if ids, perr = render(plainProbe, nil); perr != nil {
			return "", fmt.Errorf("chat template hash: %w", err)
		}
		kind = "plain"
	}
	h := sha256.New()
	h.Write([]byte(kind))
	var b [8]byte
	for _, id := range ids {
		binary.LittleEndian.PutUint64(b[:], uint64(id))
		h.Write(b[:])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// BuiltinTemplateHash is the TemplateHash of package tokenizer's own
// template, which the project's checkpoints use.
func BuiltinTemplateHash() string {
	h, _ := TemplateHash(func(msgs []delegate.Message, tools []delegate.Tool) ([]int, error) { // this render never fails
		return tokenizer.Render(msgs, tools, true), nil
	})
	return h
}
