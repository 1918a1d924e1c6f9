package tokenizer

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
)

var update = flag.Bool("update", false, "rewrite golden files")

func sampleTools() []delegate.Tool {
	return []delegate.Tool{
		{Name: "search", Description: "Search the notes.", Parameters: json.RawMessage(`{"type": "object", "properties": {"q": {"type": "string"}}}`)},
		{Name: "ask_expert"},
	}
}

func sampleConversation() []delegate.Message {
	return []delegate.Message{
		delegate.System("You delegate <work> & check it."),
		delegate.User("Find the capital of France."),
		{Role: delegate.RoleAssistant, Content: "Searching.", ToolCalls: []delegate.ToolCall{
			{ID: "c1", Name: "search", Arguments: `{"q":"capital of France"}`},
			{ID: "c2", Name: "ask_expert", Arguments: `{"question": "is it Paris?"}`},
		}},
		delegate.ToolResult("c1", "Paris is the capital of France."),
		delegate.ToolResult("c2", "Yes."),
		delegate.Assistant("Paris.<|end|> stays text"),
	}
}

func TestRenderGolden(t *testing.T) {
	ids, spans := RenderSpans(sampleConversation(), sampleTools(), false)
	var b strings.Builder
	b.WriteString(Decode(ids))
	b.WriteString("\n--- spans ---\n")
	for _, sp := range spans {
		b.WriteString(string(sp.Role) + ": " + Decode(ids[sp.Start:sp.Body]) + " | " + Decode(ids[sp.Body:sp.End]) + "\n")
	}
	got := b.String()
	path := filepath.Join("testdata", "chat.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if got != string(want) {
		t.Errorf("rendering differs from %s:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
	// The content's "<|end|>" must stay bytes: exactly one End token per message.
	if n, want := countID(ids, End), len(spans)+1; n != want {
		t.Errorf("rendering holds %d <|end|> tokens, want %d (one per message plus the tools block)", n, want)
	}
}

func countID(ids []int, id int) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

func TestRenderPrefixStable(t *testing.T) {
	msgs := sampleConversation()
	for _, tools := range [][]delegate.Tool{nil, sampleTools()} {
		full, spans := RenderSpans(msgs, tools, false)
		if len(spans) != len(msgs) {
			t.Fatalf("got %d spans, want %d", len(spans), len(msgs))
		}
		for k := range len(msgs) + 1 {
			prefix := Render(msgs[:k], tools, false)
			if !slices.Equal(full[:len(prefix)], prefix) {
				t.Errorf("tools=%d: Render(msgs[:%d]) is not a prefix of Render(msgs)", len(tools), k)
			}
			if k > 0 && len(prefix) != spans[k-1].End {
				t.Errorf("tools=%d: Render(msgs[:%d]) has %d tokens, span %d ends at %d", len(tools), k, len(prefix), k-1, spans[k-1].End)
			}
			if k < len(msgs) && msgs[k].Role == delegate.RoleAssistant {
				gen := Render(msgs[:k], tools, true)
				if !slices.Equal(full[:len(gen)], gen) || len(gen) != spans[k].Body {
					t.Errorf("tools=%d: generation prompt after msgs[:%d] does not lead into message %d's body", len(tools), k, k)
				}
			}
		}
	}
}

func TestRenderParseRoundTrip(t *testing.T) {
	msgs := sampleConversation()
	ids, spans := RenderSpans(msgs, nil, false)
	for i, sp := range spans {
		if msgs[i].Role != delegate.RoleAssistant {
			continue
		}
		got, complete := ParseAssistant(ids[sp.Body:])
		if !complete {
			t.Errorf("message %d: parse found no end", i)
		}
		want := msgs[i]
		for j := range want.ToolCalls {
			want.ToolCalls[j].ID = got.ToolCalls[j].ID
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("message %d: ParseAssistant = %+v, want %+v", i, got, want)
		}
	}
}

func bytesOf(s string) []int { return Encode(s) }

func seq(parts ...any) []int {
	var ids []int
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			ids = append(ids, bytesOf(v)...)
		case int:
			ids = append(ids, v)
		}
	}
	return ids
}

func TestParseAssistant(t *testing.T) {
	tests := []struct {
		name         string
		ids          []int
		want         delegate.Message
		wantComplete bool
	}{
		{"text", seq("hello", End, "ignored"), delegate.Assistant("hello"), true},
		{"eos ends", seq("hi", EOS), delegate.Assistant("hi"), true},
		{"role token ends", seq("hi", User, "x"), delegate.Assistant("hi"), true},
		{"unterminated", seq("partial"), delegate.Assistant("partial"), false},
		{"call", seq("ok", ToolCall, `{"name":"f","arguments":{"a": 1}}`, EndToolCall, End),
			delegate.Message{Role: delegate.RoleAssistant, Content: "ok", ToolCalls: []delegate.ToolCall{{ID: "call_0", Name: "f", Arguments: `{"a": 1}`}}}, true},
		{"two calls", seq(ToolCall, `{"name":"f","arguments":{}}`, EndToolCall, ToolCall, ` {"arguments":"x","name":"g"} `, EndToolCall, End),
			delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: "call_0", Name: "f", Arguments: `{}`}, {ID: "call_1", Name: "g", Arguments: `"x"`}}}, true},
		{"compact call", seq("ok", ToolCall, `delegate{"question":"47*28"}`, EndToolCall, ToolCall, `g-2_x{} `, EndToolCall, End),
			delegate.Message{Role: delegate.RoleAssistant, Content: "ok", ToolCalls: []delegate.ToolCall{{ID: "call_0", Name: "delegate", Arguments: `{"question":"47*28"}`}, {ID: "call_1", Name: "g-2_x", Arguments: `{} `}}}, true},
		{"compact name with a space", seq(ToolCall, `my tool{}`, EndToolCall, End),
			delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: "call_0", Arguments: `my tool{}`}}}, true},
		{"compact arguments cut", seq(ToolCall, `f{"a":`, EndToolCall, End),
			delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: "call_0", Arguments: `f{"a":`}}}, true},
		{"compact trailing text", seq(ToolCall, `f{} and more`, EndToolCall, End),
			delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: "call_0", Arguments: `f{} and more`}}}, true},
		{"malformed json", seq(ToolCall, `{"name":"f","arguments":{`, EndToolCall, End),
			delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: "call_0", Arguments: `{"name":"f","arguments":{`}}}, true},
		{"missing name", seq(ToolCall, `{"arguments":{}}`, EndToolCall, End),
			delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: "call_0", Arguments: `{"arguments":{}}`}}}, true},
		{"extra field", seq(ToolCall, `{"name":"f","arguments":{},"x":1}`, EndToolCall, End),
			delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: "call_0", Arguments: `{"name":"f","arguments":{},"x":1}`}}}, true},
		{"trailing text", seq(ToolCall, `{"name":"f","arguments":{}} and more`, EndToolCall, End),
			delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: "call_0", Arguments: `{"name":"f","arguments":{}} and more`}}}, true},
		{"call left open", seq("t", ToolCall, `{"name":"f"`),
			delegate.Message{Role: delegate.RoleAssistant, Content: "t", ToolCalls: []delegate.ToolCall{{ID: "call_0", Arguments: `{"name":"f"`}}}, false},
		{"stray specials spelled", seq("a", EndToolCall, BOS, 300, End),
			delegate.Message{Role: delegate.RoleAssistant, Content: "a<|end_tool_call|><s><|unused_300|>"}, true},
		{"nested open spelled", seq(ToolCall, "x", ToolCall, EndToolCall, End),
			delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: "call_0", Arguments: "x<|tool_call|>"}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, complete := ParseAssistant(tt.ids)
			if !reflect.DeepEqual(got, tt.want) || complete != tt.wantComplete {
				t.Errorf("ParseAssistant = %+v, %v; want %+v, %v", got, complete, tt.want, tt.wantComplete)
			}
		})
	}
}

// FuzzParseAssistant feeds arbitrary token sequences, one id per input byte pair.
// Parsing must never panic, and rendering the parsed message and parsing it
// again must give the same message.
func FuzzParseAssistant(f *testing.F) {
	for _, ids := range [][]int{
		seq("hello", End),
		seq(ToolCall, `{"name":"f","arguments":{"a":1}}`, EndToolCall, End),
		seq(ToolCall, `delegate{"question":"2+2"}`, EndToolCall, End),
		seq(ToolCall, `{"name":"","arguments":null}`, EndToolCall),
		seq(ToolCall, `{"name":"f\u00e9","arguments":[1,`, EndToolCall, "x", End),
		seq(EndToolCall, ToolCall, ToolCall, 300, Unk),
	} {
		var b []byte
		for _, id := range ids {
			b = append(b, byte(id>>8), byte(id))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ids := make([]int, 0, len(b)/2)
		for i := 0; i+1 < len(b); i += 2 {
			ids = append(ids, int(b[i])<<8|int(b[i+1]))
		}
		msg, _ := ParseAssistant(ids)
		ren, spans := RenderSpans([]delegate.Message{msg}, nil, false)
		again, complete := ParseAssistant(ren[spans[0].Body:])
		if !complete {
			t.Fatalf("re-rendered message has no end")
		}
		if !reflect.DeepEqual(again, msg) {
			t.Fatalf("parse(render(parse(ids))) = %+v, want %+v", again, msg)
		}
	})
}

// TestRenderCallForms checks which calls render compactly and that every
// form parses back to the call.
func TestRenderCallForms(t *testing.T) {
	for _, tt := range []struct {
		call delegate.ToolCall
		body string
	}{
		{delegate.ToolCall{Name: "delegate", Arguments: `{"question":"47*28"}`}, `delegate{"question":"47*28"}`},
		{delegate.ToolCall{Name: "delegate", Arguments: ""}, `delegate{}`},
		{delegate.ToolCall{Name: "f.g", Arguments: `{"a":1}`}, `{"name":"f.g","arguments":{"a":1}}`},
		{delegate.ToolCall{Name: "f", Arguments: `[1]`}, `{"name":"f","arguments":[1]}`},
		{delegate.ToolCall{Name: "f", Arguments: ` {"a":1}`}, `{"name":"f","arguments": {"a":1}}`},
	} {
		msgs := []delegate.Message{{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{tt.call}}}
		ids := Render(msgs, nil, false)
		want := append([]int{BOS, Assistant, ToolCall}, Encode(tt.body)...)
		want = append(want, EndToolCall, End)
		if !reflect.DeepEqual(ids, want) {
			t.Errorf("%+v renders as %q, want %q", tt.call, Decode(ids), tt.body)
		}
		got, _ := ParseAssistant(ids[2:])
		args := strings.TrimSpace(tt.call.Arguments)
		if args == "" {
			args = "{}"
		}
		if len(got.ToolCalls) != 1 || got.ToolCalls[0].Name != tt.call.Name || strings.TrimSpace(got.ToolCalls[0].Arguments) != args {
			t.Errorf("%q parses as %+v", tt.body, got.ToolCalls)
		}
	}
}
