package tokenizer

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Llama2CPiece is the piece that WriteLlama2C stores for id in llama2.c's
// tokenizer.bin. It differs from Piece only for bytes. Printable ASCII,
// 0x20 through 0x7E, is stored as its one-character string, and every other
// byte as "<0xXX>" with two upper-case hex digits.
//
// Why: run.c's encoder looks up " " for its dummy prefix. Then it looks up
// each UTF-8 code point and falls back to id byte+3 when the code point is
// not a piece. Its decoder turns "<0xXX>" back into the byte and prints
// other pieces as they are. With literal printable ASCII, the dummy prefix
// finds id ' '+3. Every byte of a prompt, looked up or fallen back, encodes
// to id byte+3, exactly as Encode does. No piece is the concatenation of
// two others, so run.c's merge loop never merges. Pieces are 1 character,
// or 3 or more characters starting with '<' that no two pieces spell.
func Llama2CPiece(id int) string {
	if IsByte(id) {
		b := byte(id - ByteOffset)
		if b >= 0x20 && b <= 0x7e {
			return string([]byte{b})
		}
		return fmt.Sprintf("<0x%02X>", b)
	}
	return Piece(id)
}

// WriteLlama2C writes the vocabulary as llama2.c's tokenizer.bin for vocabSize ids.
// vocabSize is at least VocabSize; the ids beyond are stored as
// <|unused_N|>. The file holds the longest piece's length as an int32,
// then per id a float32 score, an int32 length and the piece's bytes, all
// little-endian. Every score is 0.
func WriteLlama2C(w io.Writer, vocabSize int) error {
	if vocabSize < VocabSize {
		return fmt.Errorf("write llama2.c tokenizer: vocab size %d is below the tokenizer's %d", vocabSize, VocabSize)
	}
	maxLen := 0
	for id := 0; id < vocabSize; id++ {
		maxLen = max(maxLen, len(Llama2CPiece(id)))
	}
	bw := bufio.NewWriter(w)
	var buf [4]byte
	putU32 := func(v uint32) {
		binary.LittleEndian.PutUint32(buf[:], v)
		bw.Write(buf[:]) // errors are sticky in bufio.Writer and surface at Flush
	}
	putU32(uint32(maxLen))
	for id := 0; id < vocabSize; id++ {
		p := Llama2CPiece(id)
		putU32(math.Float32bits(0))
		putU32(uint32(len(p)))
		bw.WriteString(p)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write llama2.c tokenizer: %w", err)
	}
	return nil
}
