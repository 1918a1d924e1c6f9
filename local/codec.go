package local

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/tokenizer"
)

// codec is a model's tokenizer and chat template.
// It turns a request into prompt ids, and generated ids into an assistant
// message.
type codec interface {
	// prompt renders msgs and tools, ending with the assistant header.
	prompt(msgs []delegate.Message, tools []delegate.Tool) ([]int, error)
	// minTokens is a lower bound of the prompt's tokens, computed without tokenizing.
	// A request far over the context is then refused before work
	// proportional to its size. It is 0 when there is no bound.
	minTokens(req *delegate.Request) int
	stops() []int             // ids that end a turn
	encode(text string) []int // plain text, for stop sequences
	piece(id int) string      // the text of one id, for logprobs
	// parse turns the generated ids, the stop removed, into a message.
	parse(body []int) delegate.Message
	// token is one generated id as the streaming decoder sees it.
	// It holds the id's bytes, or closes when content ends there, at a control
	// token or a call.
	token(id int) (text string, closes bool)
	// callStart is text that opens a tool call inside content.
	// Content streams up to it. It is "" when calls are control tokens.
	callStart() string
}

// builtin is package tokenizer's own byte-level tokenizer and template.
type builtin struct{}

func (builtin) prompt(msgs []delegate.Message, tools []delegate.Tool) ([]int, error) {
	return tokenizer.Render(msgs, tools, true), nil
}

// The tokenizer spends one token per byte of text.
// So the text's bytes, with the control tokens the template adds around
// them, are a lower bound of the prompt's tokens. Those tokens are BOS, a
// role and an end per message, two per call, the tools' block and the
// generation prompt.
func (builtin) minTokens(req *delegate.Request) int {
	n := textBytes(req) + 2 + 2*len(req.Messages)
	for _, m := range req.Messages {
		if m.Role == delegate.RoleAssistant {
			n += 2 * len(m.ToolCalls)
		}
	}
	if len(req.Tools) > 0 {
		n += 2 + len(req.Tools)
	}
	return n
}
func (builtin) stops() []int             { return []int{tokenizer.End, tokenizer.EOS} }
func (builtin) encode(text string) []int { return tokenizer.Encode(text) }
func (builtin) piece(id int) string      { return tokenizer.Piece(id) }
func (builtin) callStart() string        { return "" }

func (builtin) parse(body []int) delegate.Message {
	msg, _ := tokenizer.ParseAssistant(body)
	return msg
}

func (builtin) token(id int) (string, bool) {
	switch {
	case id == tokenizer.ToolCall || id == tokenizer.End || id == tokenizer.EOS ||
		id == tokenizer.System || id == tokenizer.User || id == tokenizer.Assistant || id == tokenizer.Tool || id == tokenizer.Tools:
		return "", true
	case tokenizer.IsByte(id):
		return string([]byte{byte(id - tokenizer.ByteOffset)}), false
	}
	return tokenizer.Piece(id), false
}

// hfCodec is a Hugging Face tokenizer with its family's chat template.
type hfCodec struct {
	t      *tokenizer.HF
	f      tokenizer.ChatFormat
	stopID []int
}

// newHFCodec checks that t has the template's turn-end token, which ends
// a generation with the ids in eos.
func newHFCodec(t *tokenizer.HF, f tokenizer.ChatFormat, eos []int) (*hfCodec, error) {
	end := map[tokenizer.ChatFormat]string{tokenizer.ChatQwen25: "<|im_end|>", tokenizer.ChatQwen3: "<|im_end|>", tokenizer.ChatLlama3: "<|eot_id|>"}[f]
	id, ok := t.TokenID(end)
	if !ok {
		return nil, fmt.Errorf("chat template %s: the tokenizer has no %s token", f, end)
	}
	c := &hfCodec{t: t, f: f, stopID: []int{id}}
	for _, e := range eos {
		if e != id {
			c.stopID = append(c.stopID, e)
		}
	}
	return c, nil
}

func (c *hfCodec) prompt(msgs []delegate.Message, tools []delegate.Tool) ([]int, error) {
	return c.t.EncodeChat(c.f, msgs, tools, tokenizer.ChatOptions{AddGenerationPrompt: true})
}

// A byte-level BPE token may hold many bytes, so text bounds nothing cheaply.
// The templates also change text: Llama 3 trims it, and Qwen 3 drops earlier
// reasoning. But every message renders at least one token, and so does the
// generation prompt. That token is the turn's opening special token or a
// line break between tool answers.
func (c *hfCodec) minTokens(req *delegate.Request) int { return len(req.Messages) + 1 }
func (c *hfCodec) stops() []int                        { return c.stopID }
func (c *hfCodec) encode(text string) []int            { return c.t.EncodePlain(text) }

func (c *hfCodec) piece(id int) string {
	s, err := c.t.Decode([]int{id})
	if err != nil {
		return ""
	}
	return s
}

func (c *hfCodec) token(id int) (string, bool) {
	if c.t.Special(id) {
		return "", true
	}
	return c.piece(id), false
}

func (c *hfCodec) callStart() string {
	if c.f == tokenizer.ChatLlama3 {
		return ""
	}
	return qwenCallOpen
}

const (
	qwenCallOpen  = "<tool_call>"
	qwenCallClose = "</tool_call>"
)

// parse decodes body and takes out the Qwen templates' tool-call blocks as calls.
// Control tokens are dropped. A block is
// <tool_call>{"name": ..., "arguments": ...}</tool_call>. The rest is the
// content as generated, untrimmed, so that what ChatStream handed out is a
// prefix of it. A block that is not such an object becomes a call with an
// empty name and the block's text as arguments. The caller reports it to
// the model.
func (c *hfCodec) parse(body []int) delegate.Message {
	msg := delegate.Message{Role: delegate.RoleAssistant}
	text, err := c.t.DecodeSkipSpecial(body)
	if err != nil {
		text = ""
		for _, id := range body {
			if s, closes := c.token(id); !closes {
				text += s
			}
		}
	}
	if c.callStart() == "" {
		msg.Content = text
		return msg
	}
	var content strings.Builder
	for {
		i := strings.Index(text, qwenCallOpen)
		if i < 0 {
			content.WriteString(text)
			break
		}
		content.WriteString(text[:i])
		rest := text[i+len(qwenCallOpen):]
		j := strings.Index(rest, qwenCallClose)
		block := rest
		if j >= 0 {
			block, text = rest[:j], rest[j+len(qwenCallClose):]
		} else {
			text = ""
		}
		msg.ToolCalls = append(msg.ToolCalls, parseQwenCall(len(msg.ToolCalls), strings.TrimSpace(block), j >= 0))
	}
	msg.Content = content.String()
	return msg
}

func parseQwenCall(i int, block string, closed bool) delegate.ToolCall {
	var call struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	bad := delegate.ToolCall{ID: fmt.Sprintf("call_%d", i), Arguments: block}
	if !closed || json.Unmarshal([]byte(block), &call) != nil || call.Name == "" {
		return bad
	}
	args := strings.TrimSpace(string(call.Arguments))
	if args == "" || args == "null" {
		args = "{}"
	}
	return delegate.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: call.Name, Arguments: args}
}
