package server

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/delegatelab/delegate/openai/wire"
)

// FuzzDecodeRequest checks that the checks on a body's bytes agree with what decoding builds.
// A body decodeRequest accepts holds lists within their bounds and only valid UTF-8, whatever the bytes.
// Any other body is a 400 or 413.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"stop":["a","b,]"]}`,
		`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":[1,2]}"}}]},{"role":"tool","tool_call_id":"c","content":"5"}]}`,
		`{"model":"m","st\u006fp":["a","b","c","d","e"],"messages":[]}`,
		`{"model":"m","messages":[{"role":"user","content":"a\ud800"}]}`,
		`{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"a":[[[]]]}}}],"messages":[{"role":"user"}]}`,
		`{"model":"m","max_tokens":0,"presence_penalty":3,"user":"u","metadata":{"a":"b"}}`,
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := decodeRequest(bytes.NewReader(body), int64(len(body)), 1<<20)
		if e != nil {
			if e.Status != 400 && e.Status != 413 {
				t.Fatalf("status %d for %q", e.Status, body)
			}
			return
		}
		if !utf8.Valid(body) {
			t.Fatalf("accepted invalid UTF-8: %q", body)
		}
		if len(req.Stop) > wire.MaxStop || len(req.Tools) > wire.MaxTools || len(req.Messages) > MaxMessages {
			t.Fatalf("accepted %d stops, %d tools, %d messages: %q", len(req.Stop), len(req.Tools), len(req.Messages), body)
		}
		texts := []string{req.Model}
		texts = append(texts, req.Stop...)
		for _, m := range req.Messages {
			if len(m.ToolCalls) > MaxToolCalls || len(m.Content.Parts) > MaxContentParts {
				t.Fatalf("accepted a message of %d calls and %d parts: %q", len(m.ToolCalls), len(m.Content.Parts), body)
			}
			text, _ := m.Content.Text() // only its UTF-8 is checked here
			texts = append(texts, m.Role, text, m.Name, m.ToolCallID)
		}
		for _, s := range texts {
			// Decoding replaces what is not UTF-8 with U+FFFD: one that
			// the body never spelled was made by decoding.
			if strings.ContainsRune(s, utf8.RuneError) && !bytes.Contains(body, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`)) {
				t.Fatalf("decoding replaced invalid text in %q", body)
			}
		}
	})
}
