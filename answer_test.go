package delegate

import (
	"strings"
	"testing"
)

func TestBoxed(t *testing.T) {
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{"simple", `so $\boxed{18}$.`, "18", true},
		{"last wins", `\boxed{1} then \boxed{2}`, "2", true},
		{"nested", `\boxed{\frac{\sqrt{3}}{2}}`, `\frac{\sqrt{3}}{2}`, true},
		{"deep", `\boxed{a{b{c}}d}`, "a{b{c}}d", true},
		{"interval", `$\boxed{\left[\frac{1}{2}, \frac{4}{3}\right]}$`, `\left[\frac{1}{2}, \frac{4}{3}\right]`, true},
		{"fbox", `\fbox{C}`, "C", true},
		{"braceless", `answer: \boxed 5.`, "5", true},
		{"escaped brace", `\boxed{\{1,2\}}`, `\{1,2\}`, true},
		{"trimmed", `Final answer: \boxed{ 7 }`, "7", true},
		{"negative decimal", `\boxed{-3.5}`, "-3.5", true},
		{"thousands", `\boxed{1,000}`, "1,000", true},
		{"unterminated last falls back", `\boxed{7} and then \boxed{8`, "7", true},
		{"none", "no box here", "", false},
		{"unclosed", `\boxed{unclosed`, "", false},
		{"bare command", `\boxed`, "", false},
		{"empty", ``, "", false},
		{"other command", `\boxedtext{3}`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Boxed(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Boxed(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzBoxed(f *testing.F) {
	for _, s := range []string{
		`\boxed{42}`, `\boxed{\frac{1}{2}}`, `\boxed{`, `\boxed{\}`, `\boxed{a}\boxed{b`, `}{\boxed{{}}}`,
		`\\boxed{x}`, "Final answer: 3", `\fbox `, `\boxed{\boxed{}}`, "{{{{}}", "\\", "\\fbox \r",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got, ok := Boxed(text)
		if !ok {
			if got != "" {
				t.Fatalf("Boxed(%q) = %q, false; want empty content", text, got)
			}
			return
		}
		if !strings.Contains(text, got) {
			t.Fatalf("Boxed(%q) = %q, which is not in the text", text, got)
		}
		if got != strings.TrimSpace(got) {
			t.Fatalf("Boxed(%q) = %q, not trimmed", text, got)
		}
	})
}

func TestBraced(t *testing.T) {
	tests := []struct {
		s, inner, rest string
		ok             bool
	}{
		{`{a}b`, "a", "b", true},
		{`{ \frac{1}{2} } = x`, ` \frac{1}{2} `, " = x", true},
		{`{a\}b}c`, `a\}b`, "c", true},
		{`{a{b}`, "", `{a{b}`, false},
		{`a{b}`, "", `a{b}`, false},
		{``, "", ``, false},
	}
	for _, tt := range tests {
		inner, rest, ok := Braced(tt.s)
		if inner != tt.inner || rest != tt.rest || ok != tt.ok {
			t.Errorf("Braced(%q) = %q, %q, %v; want %q, %q, %v", tt.s, inner, rest, ok, tt.inner, tt.rest, tt.ok)
		}
	}
}

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

func FuzzExtractAnswer(f *testing.F) {
	for _, s := range []string{
		`\boxed{42}`, `\boxed{\frac{1}{2}}`, `\boxed{`, `\boxed{\}`, `\boxed{a}\boxed{b`, `}{\boxed{{}}}`, `\\boxed{x}`, "Final answer: 3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		a, ok := ExtractAnswer(text)
		if b, boxed := Boxed(text); boxed && (a != b || !ok) {
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
