package tokenizer

import (
	"slices"
	"testing"
	"unicode/utf8"
)

func TestEncodeDecode(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []int
	}{
		{"empty", "", []int{}},
		{"ascii", "Hi!", []int{'H' + 3, 'i' + 3, '!' + 3}},
		{"utf8", "é", []int{0xc3 + 3, 0xa9 + 3}},
		{"invalid utf8", "\xff\x00", []int{0xff + 3, 0 + 3}},
		{"special spelling stays bytes", "<|end|>", []int{'<' + 3, '|' + 3, 'e' + 3, 'n' + 3, 'd' + 3, '|' + 3, '>' + 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Encode(tt.text)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Encode(%q) = %v, want %v", tt.text, got, tt.want)
			}
			if back := Decode(got); back != tt.text {
				t.Errorf("Decode(Encode(%q)) = %q", tt.text, back)
			}
		})
	}
}

func TestPiece(t *testing.T) {
	tests := []struct {
		id   int
		want string
	}{
		{Unk, "<unk>"},
		{BOS, "<s>"},
		{EOS, "</s>"},
		{3, "\x00"},
		{'a' + 3, "a"},
		{258, "\xff"},
		{System, "<|system|>"},
		{User, "<|user|>"},
		{Assistant, "<|assistant|>"},
		{Tool, "<|tool|>"},
		{ToolCall, "<|tool_call|>"},
		{EndToolCall, "<|end_tool_call|>"},
		{End, "<|end|>"},
		{Tools, "<|tools|>"},
		{FirstReserve, "<|reserved_0|>"},
		{VocabSize - 1, "<|reserved_4|>"},
		{VocabSize, "<|unused_272|>"},
		{-1, "<|invalid_-1|>"},
	}
	for _, tt := range tests {
		if got := Piece(tt.id); got != tt.want {
			t.Errorf("Piece(%d) = %q, want %q", tt.id, got, tt.want)
		}
	}
	seen := map[string]int{}
	for id := range VocabSize {
		p := Piece(id)
		if prev, ok := seen[p]; ok {
			t.Errorf("ids %d and %d share piece %q", prev, id, p)
		}
		seen[p] = id
	}
}

func TestDecodeSpecials(t *testing.T) {
	got := Decode([]int{BOS, User, 'o' + 3, 'k' + 3, End, 300})
	want := "<s><|user|>ok<|end|><|unused_300|>"
	if got != want {
		t.Errorf("Decode = %q, want %q", got, want)
	}
}

func FuzzEncodeDecode(f *testing.F) {
	for _, s := range []string{"", "hello", "<|end|>", "\xff\xfe\x00", "日本語", "a\nb\tc", string([]byte{0xc3})} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := string(b)
		ids := Encode(s)
		if len(ids) != len(b) {
			t.Fatalf("Encode gave %d ids for %d bytes", len(ids), len(b))
		}
		for _, id := range ids {
			if !IsByte(id) {
				t.Fatalf("Encode produced non-byte id %d", id)
			}
		}
		if got := Decode(ids); got != s {
			t.Fatalf("Decode(Encode(%q)) = %q", s, got)
		}
		if utf8.ValidString(s) != utf8.ValidString(Decode(ids)) {
			t.Fatalf("validity changed")
		}
	})
}
