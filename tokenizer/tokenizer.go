// Package tokenizer holds the in-process model's byte-level tokenizer and chat template.
// It also reads Hugging Face tokenizer.json files and their chat templates.
// Our vocabulary is laid out like llama2.c's byte-fallback ones, so that
// WriteLlama2C can export a model for llama2.c's run program; the constants
// below give its ids. Text is encoded byte by byte, so every byte string
// round-trips, valid UTF-8 or not. Encode never produces special ids, even
// for text that spells them: only the chat template emits them. Everything
// here is stateless and safe for concurrent use.
package tokenizer

import (
	"fmt"
	"strings"
)

// Token ids of the control and special tokens.
// Ids 267..271 are <|reserved_0|> .. <|reserved_4|>, kept free for later
// use. A model's vocabulary must be at least VocabSize; Piece and Decode
// render ids at or above it as <|unused_N|>.
const (
	Unk          = 0   // unknown token; never produced by Encode
	BOS          = 1   // <s>, begins every rendered conversation
	EOS          = 2   // </s>
	ByteOffset   = 3   // byte b is token ByteOffset+b
	System       = 259 // <|system|>
	User         = 260 // <|user|>
	Assistant    = 261 // <|assistant|>
	Tool         = 262 // <|tool|>: a tool result follows
	ToolCall     = 263 // <|tool_call|>: a tool call's JSON follows
	EndToolCall  = 264 // <|end_tool_call|>
	End          = 265 // <|end|>: end of a turn
	Tools        = 266 // <|tools|>: the declarations of the tools offered follow
	FirstReserve = 267 // first of the reserved ids <|reserved_0|> ..
	VocabSize    = 272 // ids 0..VocabSize-1 are this tokenizer's vocabulary
)

// specialPieces are the spellings of ids 0..2 and System..VocabSize-1.
var specialPieces = map[int]string{
	Unk:         "<unk>",
	BOS:         "<s>",
	EOS:         "</s>",
	System:      "<|system|>",
	User:        "<|user|>",
	Assistant:   "<|assistant|>",
	Tool:        "<|tool|>",
	ToolCall:    "<|tool_call|>",
	EndToolCall: "<|end_tool_call|>",
	End:         "<|end|>",
	Tools:       "<|tools|>",
}

func init() {
	for id := FirstReserve; id < VocabSize; id++ {
		specialPieces[id] = fmt.Sprintf("<|reserved_%d|>", id-FirstReserve)
	}
}

// IsByte reports whether id stands for a single byte.
func IsByte(id int) bool { return id >= ByteOffset && id < ByteOffset+256 }

// IsSpecial reports whether id is a control or special token of this
// vocabulary (not a byte).
func IsSpecial(id int) bool { return id >= 0 && id < VocabSize && !IsByte(id) }

// Piece returns the text of one token.
// A byte token gives its single byte, which may not be valid UTF-8 on its
// own; a special token gives its spelling. An id at or above VocabSize gives
// <|unused_N|>, and a negative id <|invalid_N|>.
func Piece(id int) string {
	switch {
	case IsByte(id):
		return string([]byte{byte(id - ByteOffset)})
	case id < 0:
		return fmt.Sprintf("<|invalid_%d|>", id)
	case id >= VocabSize:
		return fmt.Sprintf("<|unused_%d|>", id)
	}
	return specialPieces[id]
}

// Encode returns the byte tokens of text, one per byte. Special-token
// spellings in text stay plain bytes.
func Encode(text string) []int {
	ids := make([]int, len(text))
	for i := 0; i < len(text); i++ {
		ids[i] = int(text[i]) + ByteOffset
	}
	return ids
}

// appendEncode appends the byte tokens of text to ids.
func appendEncode(ids []int, text string) []int {
	for i := 0; i < len(text); i++ {
		ids = append(ids, int(text[i])+ByteOffset)
	}
	return ids
}

// Decode concatenates the pieces of ids. Byte tokens give back their bytes
// exactly, invalid UTF-8 included, so Decode(Encode(s)) == s for every s.
func Decode(ids []int) string {
	var b strings.Builder
	b.Grow(len(ids))
	for _, id := range ids {
		if IsByte(id) {
			b.WriteByte(byte(id - ByteOffset))
			continue
		}
		b.WriteString(Piece(id))
	}
	return b.String()
}
