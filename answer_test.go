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
