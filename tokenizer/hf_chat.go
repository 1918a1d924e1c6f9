package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/delegatelab/delegate"
)

// ChatFormat names the chat template of a Hugging Face model family, rendered in Go.
// It renders exactly as the model's own Jinja template does under
// transformers' apply_chat_template. docs/tokenizers.md says how that was
// checked byte for byte against @huggingface/jinja running the shipped
// templates.
type ChatFormat int

const (
	// ChatQwen25 is the ChatML template of Qwen2.5 and Qwen2.5-Coder.
	// It has a default system message when none is given, the tools section
	// in the system message, <tool_call> JSON in assistant turns, and
	// <tool_response> blocks in user turns for tool results.
	ChatQwen25 ChatFormat = iota + 1
	// ChatQwen3 is the template of Qwen3: Qwen2.5's without a default system message.
	// It adds <think> blocks for assistant turns after the last user query.
	ChatQwen3
	// ChatLlama3 is the short-form template shipped with Llama 3 and 3.1 tokenizers.
	// Their tokenizer_config carries it: a header per message, content
	// trimmed, <|eot_id|> after each. It has no tools section, so rendering
	// tools or tool calls with it is an error.
	ChatLlama3
)

func (f ChatFormat) String() string {
	switch f {
	case ChatQwen25:
		return "qwen2.5"
	case ChatQwen3:
		return "qwen3"
	case ChatLlama3:
		return "llama3"
	}
	return fmt.Sprintf("ChatFormat(%d)", int(f))
}

// ParseChatFormat reads the name String returns.
func ParseChatFormat(name string) (ChatFormat, error) {
	for _, f := range []ChatFormat{ChatQwen25, ChatQwen3, ChatLlama3} {
		if f.String() == name {
			return f, nil
		}
	}
	return 0, fmt.Errorf("chat format %q: want qwen2.5, qwen3 or llama3", name)
}

// ChatOptions are the template variables besides messages and tools.
type ChatOptions struct {
	AddGenerationPrompt bool // end with the header of an assistant turn
	// DisableThinking is Qwen3's enable_thinking=False: the generation
	// prompt is followed by an empty <think></think> block.
	DisableThinking bool
}

// Tool calls and tools reach the templates as transformers passes them.
// A tool is {"type": "function", "function": {"name", "description",
// "parameters"}}, with description and parameters left out when empty. A
// tool call's Arguments are the JSON value they hold, a dict as the
// templates expect, or a string when they are not valid JSON. Values are
// written as Jinja's tojson writes them with Python's json.dumps: ", " and
// ": " separators, keys in their order, non-ASCII kept. Numbers keep their
// spelling in the JSON text, where Python would rewrite 1e3 as 1000.0.

const qwenDefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

const (
	qwenToolsHead = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
	qwenToolsTail = "\n</tools>\n\nFor each function call, return a json object with function name and arguments " +
		"within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": " +
		"<args-json-object>}\n</tool_call><|im_end|>\n"
)

// RenderChat renders a conversation under a family's chat template.
func RenderChat(f ChatFormat, msgs []delegate.Message, tools []delegate.Tool, opt ChatOptions) (string, error) {
	text, _, err := renderChat(f, msgs, tools, opt)
	return text, err
}

// renderChat also returns marks, the byte offsets where each message's rendering begins.
// marks[i] is where msgs[i] begins in the turns, after any header that
// holds the first system message and the tools. marks[len(msgs)] is where
// the generation prompt begins.
func renderChat(f ChatFormat, msgs []delegate.Message, tools []delegate.Tool, opt ChatOptions) (string, []int, error) {
	var b strings.Builder
	marks := make([]int, len(msgs)+1)
	var err error
	switch f {
	case ChatQwen25:
		err = renderQwen25(&b, marks, msgs, tools, opt)
	case ChatQwen3:
		err = renderQwen3(&b, marks, msgs, tools, opt)
	case ChatLlama3:
		err = renderLlama3(&b, marks, msgs, tools, opt)
	default:
		err = fmt.Errorf("unknown chat format %d", int(f))
	}
	if err != nil {
		return "", nil, fmt.Errorf("render %s chat: %w", f, err)
	}
	return b.String(), marks, nil
}

// EncodeChat renders a conversation and encodes it, control tokens
// recognised, as a server applying the template and tokenizing would.
func (t *HF) EncodeChat(f ChatFormat, msgs []delegate.Message, tools []delegate.Tool, opt ChatOptions) ([]int, error) {
	text, err := RenderChat(f, msgs, tools, opt)
	if err != nil {
		return nil, err
	}
	return t.Encode(text), nil
}

// ChatSpan locates one assistant turn in the ids of EncodeChatSpans, for
// training masks.
type ChatSpan struct {
	Message int // index of the assistant message in msgs
	Start   int // index of the turn's first token (<|im_start|> or <|start_header_id|>)
	// Body is the index of the first token after the assistant header.
	// That is where a model generating the turn began. The header is
	// "<|im_start|>assistant\n" or "<|start_header_id|>assistant<|end_header_id|>\n\n".
	// When the content starts with white space that the encoder joins to the
	// header's last newline, that joint token is the first of the body.
	Body int
	End  int // one past the turn's end token (<|im_end|> or <|eot_id|>)
}

// assistantTurn is the header that opens an assistant turn and the token
// that ends it, per format.
var assistantTurn = map[ChatFormat][2]string{
	ChatQwen25: {"<|im_start|>assistant\n", "<|im_end|>"},
	ChatQwen3:  {"<|im_start|>assistant\n", "<|im_end|>"},
	ChatLlama3: {"<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
}

// EncodeChatSpans is EncodeChat that also locates each assistant turn in
// the ids. It encodes the text between turn boundaries separately, so the
// spans are exact. It fails if that does not give the ids of the whole
// text, as when a turn boundary falls inside a token.
func (t *HF) EncodeChatSpans(f ChatFormat, msgs []delegate.Message, tools []delegate.Tool, opt ChatOptions) ([]int, []ChatSpan, error) {
	text, marks, err := renderChat(f, msgs, tools, opt)
	if err != nil {
		return nil, nil, err
	}
	turn := assistantTurn[f]
	endID, ok := t.TokenID(turn[1])
	if !ok {
		return nil, nil, fmt.Errorf("encode %s chat: the vocabulary has no %q", f, turn[1])
	}
	var ids []int
	var spans []ChatSpan
	done := 0 // bytes of text encoded
	for i, m := range msgs {
		a, b := marks[i], marks[i+1]
		if m.Role != delegate.RoleAssistant || a == b {
			continue
		}
		ids = append(ids, t.Encode(text[done:a])...)
		seg := t.Encode(text[a:b])
		done = b
		sp := ChatSpan{Message: i, Start: len(ids), Body: -1, End: -1}
		if !strings.HasPrefix(text[a:b], turn[0]) {
			return nil, nil, fmt.Errorf("encode %s chat: message %d does not open with %q", f, i, turn[0])
		}
		// The body starts at the first token holding a byte after the header.
		for k, n := 0, 0; k < len(seg); k++ {
			if n += len(t.decoded[seg[k]]); n > len(turn[0]) {
				sp.Body = sp.Start + k
				break
			}
		}
		for k := len(seg) - 1; k >= 0; k-- {
			if seg[k] == endID {
				sp.End = sp.Start + k + 1
				break
			}
		}
		if sp.Body < 0 || sp.End < 0 || sp.Body > sp.End {
			return nil, nil, fmt.Errorf("encode %s chat: message %d: no body or no %q in its turn", f, i, turn[1])
		}
		ids = append(ids, seg...)
		spans = append(spans, sp)
	}
	ids = append(ids, t.Encode(text[done:])...)
	if whole := t.Encode(text); !slices.Equal(whole, ids) {
		return nil, nil, fmt.Errorf("encode %s chat: a turn boundary falls inside a token; the spans would not be exact", f)
	}
	return ids, spans, nil
}

func writeQwenTools(b *strings.Builder, tools []delegate.Tool) error {
	b.WriteString(qwenToolsHead)
	for _, tl := range tools {
		b.WriteString("\n")
		if err := writeToolJSON(b, tl); err != nil {
			return err
		}
	}
	b.WriteString(qwenToolsTail)
	return nil
}

func renderQwen25(b *strings.Builder, marks []int, msgs []delegate.Message, tools []delegate.Tool, opt ChatOptions) error {
	firstSystem := len(msgs) > 0 && msgs[0].Role == delegate.RoleSystem
	if len(tools) > 0 {
		b.WriteString("<|im_start|>system\n")
		if firstSystem {
			b.WriteString(msgs[0].Content)
		} else {
			b.WriteString(qwenDefaultSystem)
		}
		b.WriteString("\n\n")
		if err := writeQwenTools(b, tools); err != nil {
			return err
		}
	} else if firstSystem {
		b.WriteString("<|im_start|>system\n" + msgs[0].Content + "<|im_end|>\n")
	} else {
		b.WriteString("<|im_start|>system\n" + qwenDefaultSystem + "<|im_end|>\n")
	}
	for i, m := range msgs {
		marks[i] = b.Len()
		switch {
		case m.Role == delegate.RoleUser || m.Role == delegate.RoleSystem && i > 0 ||
			m.Role == delegate.RoleAssistant && len(m.ToolCalls) == 0:
			b.WriteString("<|im_start|>" + string(m.Role) + "\n" + m.Content + "<|im_end|>\n")
		case m.Role == delegate.RoleAssistant:
			b.WriteString("<|im_start|>assistant")
			if m.Content != "" {
				b.WriteString("\n" + m.Content)
			}
			for _, c := range m.ToolCalls {
				b.WriteString("\n<tool_call>\n{\"name\": \"" + c.Name + "\", \"arguments\": ")
				if err := writeArgsJSON(b, c.Arguments); err != nil {
					return fmt.Errorf("message %d: tool call %q: %w", i, c.Name, err)
				}
				b.WriteString("}\n</tool_call>")
			}
			b.WriteString("<|im_end|>\n")
		case m.Role == delegate.RoleTool:
			writeToolResponse(b, msgs, i)
		}
	}
	marks[len(msgs)] = b.Len()
	if opt.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return nil
}

// writeToolResponse writes tool message i as the Qwen templates do: runs
// of tool messages share one user turn.
func writeToolResponse(b *strings.Builder, msgs []delegate.Message, i int) {
	if i == 0 || msgs[i-1].Role != delegate.RoleTool {
		b.WriteString("<|im_start|>user")
	}
	b.WriteString("\n<tool_response>\n" + msgs[i].Content + "\n</tool_response>")
	if i == len(msgs)-1 || msgs[i+1].Role != delegate.RoleTool {
		b.WriteString("<|im_end|>\n")
	}
}

func renderQwen3(b *strings.Builder, marks []int, msgs []delegate.Message, tools []delegate.Tool, opt ChatOptions) error {
	firstSystem := len(msgs) > 0 && msgs[0].Role == delegate.RoleSystem
	if len(tools) > 0 {
		b.WriteString("<|im_start|>system\n")
		if firstSystem {
			b.WriteString(msgs[0].Content + "\n\n")
		}
		if err := writeQwenTools(b, tools); err != nil {
			return err
		}
	} else if firstSystem {
		b.WriteString("<|im_start|>system\n" + msgs[0].Content + "<|im_end|>\n")
	}
	// The last user message that is not a wrapped tool response: assistant
	// turns after it show their reasoning.
	lastQuery := len(msgs) - 1
	for i := len(msgs) - 1; i >= 0; i-- {
		c := msgs[i].Content
		if msgs[i].Role == delegate.RoleUser && !(strings.HasPrefix(c, "<tool_response>") && strings.HasSuffix(c, "</tool_response>")) {
			lastQuery = i
			break
		}
	}
	for i, m := range msgs {
		marks[i] = b.Len()
		switch {
		case m.Role == delegate.RoleUser || m.Role == delegate.RoleSystem && i > 0:
			b.WriteString("<|im_start|>" + string(m.Role) + "\n" + m.Content + "<|im_end|>\n")
		case m.Role == delegate.RoleAssistant:
			content, reasoning := m.Content, ""
			if strings.Contains(m.Content, "</think>") {
				parts := strings.Split(m.Content, "</think>")
				content = strings.TrimLeft(parts[len(parts)-1], "\n")
				before := strings.Split(strings.TrimRight(parts[0], "\n"), "<think>")
				reasoning = strings.TrimLeft(before[len(before)-1], "\n")
			}
			if i > lastQuery && (i == len(msgs)-1 || reasoning != "") {
				b.WriteString("<|im_start|>assistant\n<think>\n" + strings.Trim(reasoning, "\n") + "\n</think>\n\n" + strings.TrimLeft(content, "\n"))
			} else {
				b.WriteString("<|im_start|>assistant\n" + content)
			}
			for j, c := range m.ToolCalls {
				if j > 0 || content != "" {
					b.WriteString("\n")
				}
				b.WriteString("<tool_call>\n{\"name\": \"" + c.Name + "\", \"arguments\": ")
				if v, ok := parseJSONValue(c.Arguments); ok && !v.isString {
					b.WriteString(v.text)
				} else if ok {
					b.WriteString(v.str) // a JSON string is passed as a string, written as is
				} else {
					b.WriteString(c.Arguments)
				}
				b.WriteString("}\n</tool_call>")
			}
			b.WriteString("<|im_end|>\n")
		case m.Role == delegate.RoleTool:
			writeToolResponse(b, msgs, i)
		}
	}
	marks[len(msgs)] = b.Len()
	if opt.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
		if opt.DisableThinking {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return nil
}

func renderLlama3(b *strings.Builder, marks []int, msgs []delegate.Message, tools []delegate.Tool, opt ChatOptions) error {
	if len(tools) > 0 {
		return errors.New("the Llama 3 template has no tools section")
	}
	for i, m := range msgs {
		if len(m.ToolCalls) > 0 {
			return fmt.Errorf("message %d: the Llama 3 template renders no tool calls", i)
		}
		if i == 0 {
			b.WriteString("<|begin_of_text|>")
		}
		marks[i] = b.Len()
		b.WriteString("<|start_header_id|>" + string(m.Role) + "<|end_header_id|>\n\n" + pyStrip(m.Content) + "<|eot_id|>")
	}
	marks[len(msgs)] = b.Len()
	if opt.AddGenerationPrompt {
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
	return nil
}

// pyStrip is Jinja's trim filter under Python: str.strip().
// It removes the characters Python counts as white space: Unicode
// White_Space and U+001C..U+001F.
func pyStrip(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f })
}

// writeToolJSON writes a tool as transformers passes it to the template.
func writeToolJSON(b *strings.Builder, tl delegate.Tool) error {
	b.WriteString(`{"type": "function", "function": {"name": `)
	writePyString(b, tl.Name)
	if tl.Description != "" {
		b.WriteString(`, "description": `)
		writePyString(b, tl.Description)
	}
	if len(bytes.TrimSpace(tl.Parameters)) > 0 {
		v, ok := parseJSONValue(string(tl.Parameters))
		if !ok {
			return fmt.Errorf("tool %q: parameters are not valid JSON", tl.Name)
		}
		b.WriteString(`, "parameters": ` + v.text)
	}
	b.WriteString("}}")
	return nil
}

// writeArgsJSON writes a tool call's arguments as tojson does.
// It writes the JSON value they hold, or a JSON string of their text when
// they are not JSON.
func writeArgsJSON(b *strings.Builder, args string) error {
	if v, ok := parseJSONValue(args); ok {
		b.WriteString(v.text)
		return nil
	}
	writePyString(b, args)
	return nil
}

// jsonValue is a JSON value rewritten as Python's json.dumps writes it.
type jsonValue struct {
	text     string // the value in json.dumps form
	isString bool   // the value is a JSON string, whose text is str
	str      string
}

// parseJSONValue parses exactly one JSON value and rewrites it.
func parseJSONValue(s string) (jsonValue, bool) {
	if !json.Valid([]byte(s)) {
		return jsonValue{}, false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var b strings.Builder
	tok, err := dec.Token()
	if err != nil {
		return jsonValue{}, false
	}
	if str, ok := tok.(string); ok {
		writePyString(&b, str)
		return jsonValue{text: b.String(), isString: true, str: str}, true
	}
	if err := writePyValue(&b, dec, tok); err != nil {
		return jsonValue{}, false
	}
	return jsonValue{text: b.String()}, true
}

// writePyValue writes the value that starts with tok, reading the rest
// of it from dec.
func writePyValue(b *strings.Builder, dec *json.Decoder, tok json.Token) error {
	switch v := tok.(type) {
	case json.Delim:
		closing := map[json.Delim]string{'{': "}", '[': "]"}[v]
		b.WriteString(string(v))
		for first := true; ; first = false {
			t, err := dec.Token()
			if err != nil {
				return err
			}
			if d, ok := t.(json.Delim); ok && string(d) == closing {
				b.WriteString(closing)
				return nil
			}
			if !first {
				b.WriteString(", ")
			}
			if v == '{' {
				key, ok := t.(string)
				if !ok {
					return fmt.Errorf("object key %v is not a string", t)
				}
				writePyString(b, key)
				b.WriteString(": ")
				if t, err = dec.Token(); err != nil {
					return err
				}
			}
			if err := writePyValue(b, dec, t); err != nil {
				return err
			}
		}
	case string:
		writePyString(b, v)
	case json.Number:
		b.WriteString(v.String())
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	default:
		return fmt.Errorf("unexpected JSON token %v", tok)
	}
	return nil
}

// writePyString writes s as json.dumps(s, ensure_ascii=False) does:
// quotes, backslashes and control characters escaped, nothing else.
func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		case r == utf8.RuneError && n == 1:
			b.WriteRune(utf8.RuneError) // invalid UTF-8, read as Go's JSON decoder reads it
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	b.WriteByte('"')
}
