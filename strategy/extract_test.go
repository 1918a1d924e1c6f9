package strategy

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseDelegateArgs(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string
	}{
		{"plain", `{"question":"What is 2+2?"}`, "What is 2+2?", ""},
		{"white space", " \n {\"question\": \"q\"} \n", "q", ""},
		{"json fence", "```json\n{\"question\": \"q\"}\n```", "q", ""},
		{"bare fence", "```\n{\"question\": \"q\"}\n```", "q", ""},
		{"one-line fence", "```json {\"question\": \"q\"}```", "q", ""},
		{"extra keys ignored", `{"question":"q","why":"because"}`, "q", ""},
		{"encoded twice", `"{\"question\": \"q\"}"`, "q", ""},
		{"unicode", `{"question":"Wie viel ist 3·4?"}`, "Wie viel ist 3·4?", ""},
		{"empty", "  ", "", "empty arguments"},
		{"invalid json", `{"question": "q"`, "", "not JSON"},
		{"single quotes", `{'question': 'q'}`, "", "not JSON"},
		{"trailing text", `{"question":"q"} and more`, "", "text after"},
		{"array", `["q"]`, "", "an array, want a JSON object"},
		{"missing question", `{"query":"q"}`, "", `missing "question"`},
		{"number question", `{"question": 4}`, "", `"question" is a number`},
		{"null question", `{"question": null}`, "", `"question" is null`},
		{"empty question", `{"question": "  "}`, "", `"question" is empty`},
		{"string not object", `"just a question"`, "", "a JSON string, not an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDelegateArgs(tt.in)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Errorf("ParseDelegateArgs(%q) = %q, %v; want %q, nil", tt.in, got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrDelegateArgs) {
				t.Errorf("ParseDelegateArgs(%q) = %q, %v; want an ErrDelegateArgs containing %q", tt.in, got, err, tt.wantErr)
			}
		})
	}
}

// TestPlainQuestion checks which arguments skip encoding/json, and that
// those read as encoding/json reads them.
func TestPlainQuestion(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{`{"question":"What is 2+2?"}`, true},
		{" {\n\t\"question\" :\r \"Wie viel ist 3·4?\" }\n", true},
		{`{"question":"  q  "}`, true},
		{`{"question":"a \"quoted\" word"}`, true},
		{`{"question":"\u00e9t\u00e9 \ud83d\ude00 \ud800 \/\\"}`, true},
		{`{"question":"bad \x escape"}`, false},
		{`{"question":"\"}`, false},
		{`{"question":"q","why":"because"}`, false},
		{`{"why":"because","question":"q"}`, false},
		{`{"question":"q"} x`, false},
		{`{"question":"q"`, false},
		{`{"question":"  "}`, false},
		{`{"question":4}`, false},
		{`{"Question":"q"}`, false},
		{"{\"question\":\"bad \xff byte\"}", true},
		{"{\"question\":\"tab\tinside\"}", false},
	} {
		got, ok := plainQuestion(tt.in)
		if ok != tt.want {
			t.Errorf("plainQuestion(%q) ok = %v, want %v", tt.in, ok, tt.want)
			continue
		}
		if !ok {
			continue
		}
		if want, err := parseDelegateJSON(tt.in); err != nil || got != want {
			t.Errorf("plainQuestion(%q) = %q, encoding/json's reading %q, %v", tt.in, got, want, err)
		}
	}
}

func TestCutToBudget(t *testing.T) {
	tests := []struct {
		name       string
		text       string
		completion int
		budget     int
		want       string
		wantCut    bool
	}{
		{"within budget", "short answer", 2, 10, "short answer", false},
		{"at budget", "two words", 2, 2, "two words", false},
		{"half", "aaaa bbbb", 10, 5, "aaaa", true},
		{"rune boundary", "ééééé", 10, 5, "éé", true}, // 10 bytes * 5/10 = 5 bytes, backed up to 4
		{"zero budget keeps nothing", "abc", 3, 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := CutToBudget(tt.text, tt.completion, tt.budget)
			if got != tt.want || cut != tt.wantCut {
				t.Errorf("CutToBudget(%q, %d, %d) = %q, %v; want %q, %v", tt.text, tt.completion, tt.budget, got, cut, tt.want, tt.wantCut)
			}
			if !utf8.ValidString(got) {
				t.Errorf("cut text %q is not valid UTF-8", got)
			}
		})
	}
}

func FuzzParseDelegateArgs(f *testing.F) {
	for _, s := range []string{
		`{"question":"What is 2+2?"}`, "```json\n{\"question\":\"q\"}\n```", `"{\"question\":\"q\"}"`,
		`{"question":""}`, `{"question":1}`, `[]`, `null`, "```", "``````", "```json```", `{"question":"q"}{}`, "\"\\\"\"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		s := stripFence(strings.TrimSpace(raw))
		if pq, ok := plainQuestion(s); ok {
			if want, err := parseDelegateJSON(s); err != nil || pq != want {
				t.Fatalf("plainQuestion(%q) = %q, encoding/json's reading %q, %v", s, pq, want, err)
			}
		}
		q, err := ParseDelegateArgs(raw)
		if err != nil {
			if !errors.Is(err, ErrDelegateArgs) {
				t.Fatalf("error %v does not wrap ErrDelegateArgs", err)
			}
			if q != "" {
				t.Fatalf("question %q returned beside error %v", q, err)
			}
			return
		}
		if strings.TrimSpace(q) == "" {
			t.Fatalf("accepted an empty question from %q", raw)
		}
	})
}
