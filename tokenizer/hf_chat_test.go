package tokenizer

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/delegatelab/delegate"
)

type chatCase struct {
	Messages       []delegate.Message `json:"messages"`
	Tools          []delegate.Tool    `json:"tools"`
	AddGeneration  bool               `json:"add_generation_prompt"`
	EnableThinking *bool              `json:"enable_thinking"`
	Qwen25         string             `json:"qwen2.5"`
	Qwen3          string             `json:"qwen3"`
	Llama3         string             `json:"llama3"`
	Qwen25IDs      []int              `json:"qwen2.5_ids"`
	Qwen3IDs       []int              `json:"qwen3_ids"`
	Llama3IDs      []int              `json:"llama3_ids"`
}

// TestRenderChatMatchesJinja compares RenderChat with the models' own Jinja templates.
// testdata/hf/gen.mjs rendered them with @huggingface/jinja; they must match
// byte for byte. The ids of the Qwen2.5 and Qwen3 renderings must match the
// tokenizers library's.
func TestRenderChatMatchesJinja(t *testing.T) {
	cases := readLines[chatCase](t, "chat.jsonl.gz")
	if len(cases) < 100 {
		t.Fatalf("%d chat cases, want at least 100", len(cases))
	}
	tok := hfTokenizer(t, "qwen2.5")
	var tok3 *HF
	if !raceEnabled {
		tok3 = hfTokenizer(t, "qwen3")
	}
	counts := map[ChatFormat]int{}
	for i, c := range cases {
		opt := ChatOptions{AddGenerationPrompt: c.AddGeneration, DisableThinking: c.EnableThinking != nil && !*c.EnableThinking}
		hasCalls := slices.ContainsFunc(c.Messages, func(m delegate.Message) bool { return len(m.ToolCalls) > 0 })
		for _, f := range []ChatFormat{ChatQwen25, ChatQwen3, ChatLlama3} {
			want := map[ChatFormat]string{ChatQwen25: c.Qwen25, ChatQwen3: c.Qwen3, ChatLlama3: c.Llama3}[f]
			got, err := RenderChat(f, c.Messages, c.Tools, opt)
			if f == ChatLlama3 && (len(c.Tools) > 0 || hasCalls) {
				if err == nil {
					t.Errorf("case %d: %s rendered tools or tool calls without an error", i, f)
				}
				continue
			}
			if err != nil {
				t.Errorf("case %d: %s: %v", i, f, err)
				continue
			}
			if got != want {
				t.Errorf("case %d: %s differs at byte %d\n got %q\nwant %q", i, f, firstDiff(got, want), got, want)
				continue
			}
			counts[f]++
		}
		ids, err := tok.EncodeChat(ChatQwen25, c.Messages, c.Tools, opt)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, c.Qwen25IDs) {
			t.Errorf("case %d: qwen2.5 ids\n got %v\nwant %v", i, ids, c.Qwen25IDs)
		}
		if tok3 == nil {
			continue
		}
		ids, err = tok3.EncodeChat(ChatQwen3, c.Messages, c.Tools, opt)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, c.Qwen3IDs) {
			t.Errorf("case %d: qwen3 ids\n got %v\nwant %v", i, ids, c.Qwen3IDs)
		}
	}
	t.Logf("identical renderings: %v of %d cases", counts, len(cases))
}

// TestEncodeChatSpans checks the assistant spans of every fixture conversation.
// The ids are the reference's. Each span runs from the turn's first token
// to its end token and decodes to the turn's rendering, and its body starts
// right after the assistant header. Llama 3 is checked with -llama3=PATH.
func TestEncodeChatSpans(t *testing.T) {
	cases := readLines[chatCase](t, "chat.jsonl.gz")
	type format struct {
		f     ChatFormat
		tok   func() *HF
		ids   func(chatCase) []int
		start string
	}
	formats := []format{{ChatQwen25, func() *HF { return hfTokenizer(t, "qwen2.5") }, func(c chatCase) []int { return c.Qwen25IDs }, "<|im_start|>"}}
	if !raceEnabled {
		formats = append(formats, format{ChatQwen3, func() *HF { return hfTokenizer(t, "qwen3") }, func(c chatCase) []int { return c.Qwen3IDs }, "<|im_start|>"})
	}
	if *llama3Path != "" {
		formats = append(formats, format{ChatLlama3, func() *HF {
			tok, err := LoadHF(*llama3Path)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}, func(c chatCase) []int { return c.Llama3IDs }, "<|start_header_id|>"})
	}
	for _, ft := range formats {
		t.Run(ft.f.String(), func(t *testing.T) {
			tok := ft.tok()
			header, endTok := assistantTurn[ft.f][0], assistantTurn[ft.f][1]
			start, _ := tok.TokenID(ft.start)
			end, _ := tok.TokenID(endTok)
			joint, spans := 0, 0
			for i, c := range cases {
				opt := ChatOptions{AddGenerationPrompt: c.AddGeneration, DisableThinking: c.EnableThinking != nil && !*c.EnableThinking}
				ids, got, err := tok.EncodeChatSpans(ft.f, c.Messages, c.Tools, opt)
				if ft.f == ChatLlama3 && err != nil && (len(c.Tools) > 0 || slices.ContainsFunc(c.Messages, func(m delegate.Message) bool { return len(m.ToolCalls) > 0 })) {
					continue // rejected, as TestRenderChatMatchesJinja checks
				}
				if err != nil {
					t.Fatalf("case %d: %v", i, err)
				}
				if !slices.Equal(ids, ft.ids(c)) {
					t.Fatalf("case %d: ids differ from the reference", i)
				}
				text, marks, _ := renderChat(ft.f, c.Messages, c.Tools, opt)
				var assistants []int
				for k, m := range c.Messages {
					if m.Role == delegate.RoleAssistant {
						assistants = append(assistants, k)
					}
				}
				if len(got) != len(assistants) {
					t.Fatalf("case %d: %d spans for %d assistant messages", i, len(got), len(assistants))
				}
				for k, sp := range got {
					spans++
					seg := text[marks[sp.Message]:marks[sp.Message+1]]
					seg = seg[:strings.LastIndex(seg, endTok)+len(endTok)]
					if sp.Message != assistants[k] || ids[sp.Start] != start || ids[sp.End-1] != end {
						t.Fatalf("case %d: span %+v does not run from %s to %s of message %d", i, sp, ft.start, endTok, assistants[k])
					}
					if tok.nfc {
						seg = norm.NFC.String(seg)
					}
					if dec, _ := tok.Decode(ids[sp.Start:sp.End]); dec != seg {
						t.Fatalf("case %d: span %+v decodes to %q, want %q", i, sp, dec, seg)
					}
					before, _ := tok.Decode(ids[sp.Start:sp.Body])
					through, _ := tok.Decode(ids[sp.Start : sp.Body+1])
					if !strings.HasPrefix(header, before) || len(through) <= len(header) || !strings.HasPrefix(through, header) {
						t.Fatalf("case %d: body of %+v starts badly: %q then %q", i, sp, before, through)
					}
					if before != header {
						joint++
					}
				}
			}
			if spans == 0 {
				t.Fatal("no span checked")
			}
			t.Logf("%d spans checked; in %d the content's leading white space joins the header's last newline", spans, joint)
		})
	}
}

func TestEncodeChatSpansNeedsEndToken(t *testing.T) {
	tok := hfTokenizer(t, "gpt2")
	_, _, err := tok.EncodeChatSpans(ChatQwen25, []delegate.Message{delegate.User("hi"), delegate.Assistant("hello")}, nil, ChatOptions{})
	if err == nil || !strings.Contains(err.Error(), `no "<|im_end|>"`) {
		t.Errorf("error = %v, want one naming <|im_end|>", err)
	}
}

func firstDiff(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestRenderChatQwen25Example(t *testing.T) {
	msgs := []delegate.Message{
		delegate.User("What is 47*28?"),
		{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: "c1", Name: "calc", Arguments: `{"expr":"47*28","exact":true}`}}},
		delegate.ToolResult("c1", "1316"),
	}
	tools := []delegate.Tool{{Name: "calc", Description: "Evaluate.", Parameters: json.RawMessage(`{"type":"object","properties":{"expr":{"type":"string"}}}`)}}
	got, err := RenderChat(ChatQwen25, msgs, tools, ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n" + qwenToolsHead +
		"\n" + `{"type": "function", "function": {"name": "calc", "description": "Evaluate.", "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}}}}` +
		qwenToolsTail +
		"<|im_start|>user\nWhat is 47*28?<|im_end|>\n" +
		"<|im_start|>assistant\n<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"47*28\", \"exact\": true}}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\n<tool_response>\n1316\n</tool_response><|im_end|>\n" +
		"<|im_start|>assistant\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestRenderChatErrors(t *testing.T) {
	call := []delegate.Message{{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{Name: "f", Arguments: "{}"}}}}
	tests := []struct {
		name  string
		f     ChatFormat
		msgs  []delegate.Message
		tools []delegate.Tool
		want  string
	}{
		{"llama3 tools", ChatLlama3, nil, []delegate.Tool{{Name: "f"}}, "no tools section"},
		{"llama3 calls", ChatLlama3, call, nil, "message 0"},
		{"bad parameters", ChatQwen25, nil, []delegate.Tool{{Name: "f", Parameters: json.RawMessage(`{"a":`)}}, `tool "f": parameters`},
		{"unknown format", ChatFormat(9), nil, nil, "unknown chat format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RenderChat(tt.f, tt.msgs, tt.tools, ChatOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestParseChatFormat(t *testing.T) {
	for _, f := range []ChatFormat{ChatQwen25, ChatQwen3, ChatLlama3} {
		got, err := ParseChatFormat(f.String())
		if err != nil || got != f {
			t.Errorf("ParseChatFormat(%q) = %v, %v", f.String(), got, err)
		}
	}
	if _, err := ParseChatFormat("chatml"); err == nil {
		t.Error("ParseChatFormat(chatml) gave no error")
	}
}
