package strategy

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/delegatelab/delegate"
)

func TestExtractAnswer(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   string
		wantOK bool
	}{
		{"boxed", "Work...\nSo \\boxed{18}.", "18", true},
		{"boxed wins over marker", "Final answer: \\boxed{ 7 }", "7", true},
		{"marker", "Reasoning.\nFinal answer: Paris", "Paris", true},
		{"last marker", "Final answer: 1\nWait.\nFinal answer: 2", "2", true},
		{"marker any case", "FINAL ANSWER:  yes \n", "yes", true},
		{"marker multi-line", "Final answer:\nline one\nline two", "line one\nline two", true},
		{"empty after marker", "Final answer:   ", "Final answer:", false},
		{"neither", "  just text  ", "just text", false},
		{"non-ascii before marker", "Ünïcödé İ Final answer: ok", "ok", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ExtractAnswer(tt.in)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ExtractAnswer(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestFinalOutput(t *testing.T) {
	tests := []struct {
		in     string
		want   string
		wantOK bool
	}{
		{"thinking\nFinal Output:\nThe answer.", "The answer.", true},
		{"Final Output: a\nFinal Output: b", "b", true},
		{"no marker at all", "no marker at all", false},
		{"final output: lower case is not the marker", "final output: lower case is not the marker", false},
	}
	for _, tt := range tests {
		got, ok := FinalOutput(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("FinalOutput(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestAnswerTag(t *testing.T) {
	tests := []struct {
		in     string
		want   string
		wantOK bool
	}{
		{"because <answer> 12 </answer>", "12", true},
		{"<answer>1</answer> then <answer>2</answer>", "2", true},
		{"<answer></answer>", "", false},
		{"<answer>unclosed", "", false},
		{"</answer> stray", "", false},
		{"none", "", false},
	}
	for _, tt := range tests {
		got, ok := AnswerTag(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("AnswerTag(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

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

func FuzzExtractAnswer(f *testing.F) {
	for _, s := range []string{
		`\boxed{42}`, `\boxed{\frac{1}{2}}`, `\boxed{`, `\boxed{\}`, `\boxed{a}\boxed{b`, `}{\boxed{{}}}`, `\\boxed{x}`, "Final answer: 3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		a, ok := ExtractAnswer(text)
		if b, boxed := delegate.Boxed(text); boxed && (a != b || !ok) {
			t.Fatalf("ExtractAnswer(%q) = %q, %v; want the boxed %q", text, a, ok, b)
		}
		if !ok && a != strings.TrimSpace(text) {
			t.Fatalf("ExtractAnswer(%q) = %q, false; want the whole text trimmed", text, a)
		}
	})
}

func TestMarkedAnswer(t *testing.T) {
	nonEmpty := func(a string) bool { return a != "" }
	tests := []struct {
		name, text     string
		accept         func(string) bool
		answer, marker string
		ok             bool
	}{
		{"boxed first", `<answer>1</answer> \boxed{2}`, nil, "2", `\boxed{}`, true},
		{"answer tag", "Final Output: 3 <answer>4</answer>", nil, "4", "<answer>", true},
		{"final output", "final answer: 5\nFinal Output: 6", nil, "6", FinalOutputMarker, true},
		{"final answer, any case", "FINAL ANSWER: 7", nil, "7", FinalAnswerMarker, true},
		{"none", "just 8", nil, "", "", false},
		{"empty box taken", `\boxed{} <answer>9</answer>`, nil, "", `\boxed{}`, true},
		{"empty box passed over", `\boxed{} <answer>9</answer>`, nonEmpty, "9", "<answer>", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer, marker, ok := MarkedAnswer(tt.text, tt.accept)
			if answer != tt.answer || marker != tt.marker || ok != tt.ok {
				t.Errorf("got %q, %q, %v; want %q, %q, %v", answer, marker, ok, tt.answer, tt.marker, tt.ok)
			}
		})
	}
}
