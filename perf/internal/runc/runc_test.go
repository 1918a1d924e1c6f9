package runc

import (
	"testing"

	"github.com/delegatelab/delegate/tokenizer"
)

func TestText(t *testing.T) {
	b := func(c byte) int { return int(c) + tokenizer.ByteOffset }
	tests := []struct {
		name string
		ids  []int
		want string
	}{
		{"dummy prefix dropped after BOS", []int{tokenizer.BOS, b(' '), b('h'), b('i')}, "hi"},
		{"later spaces kept", []int{tokenizer.BOS, b('a'), b(' '), b('b')}, "a b"},
		{"whitespace bytes kept", []int{tokenizer.BOS, b('\n'), b('\t')}, "\n\t"},
		{"unprintable bytes skipped", []int{tokenizer.BOS, b(0), b(0x7f), b(0xc3), b(0xa9), b('x')}, "x"},
		{"specials spelled", []int{tokenizer.BOS, tokenizer.End, tokenizer.EOS, tokenizer.Unk}, "<|end|></s><unk>"},
		{"first token never printed", []int{b('z')}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.ids); got != tt.want {
				t.Errorf("Text(%v) = %q, want %q", tt.ids, got, tt.want)
			}
		})
	}
}
