package tokenizer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
)

// l2cVocab is tokenizer.bin as run.c loads it, read here from the format's
// description rather than through the writer's code.
type l2cVocab struct {
	maxLen int
	pieces []string
	scores []float32
}

func readL2CVocab(t *testing.T, r io.Reader, n int) l2cVocab {
	t.Helper()
	var v l2cVocab
	var u int32
	if err := binary.Read(r, binary.LittleEndian, &u); err != nil {
		t.Fatalf("read max_token_length: %v", err)
	}
	v.maxLen = int(u)
	for i := range n {
		var score float32
		var n int32
		if err := binary.Read(r, binary.LittleEndian, &score); err != nil {
			t.Fatalf("token %d: read score: %v", i, err)
		}
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			t.Fatalf("token %d: read length: %v", i, err)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatalf("token %d: read %d bytes: %v", i, n, err)
		}
		v.pieces = append(v.pieces, string(b))
		v.scores = append(v.scores, score)
	}
	if rest, _ := io.ReadAll(r); len(rest) != 0 {
		t.Fatalf("%d bytes after the last token", len(rest))
	}
	return v
}

// lookup is run.c's str_lookup: exact match or -1.
func (v l2cVocab) lookup(s string) int {
	for i, p := range v.pieces {
		if p == s {
			return i
		}
	}
	return -1
}

// encode follows run.c's encode with bos set.
// It emits BOS and, when text is not empty, the dummy prefix " ". Each
// UTF-8 code point of at most 4 bytes is looked up, with byte fallback to
// byte+3. Then the best-scoring adjacent pair that spells a piece merges,
// greedily.
func (v l2cVocab) encode(text string) []int {
	ids := []int{1}
	if text != "" {
		ids = append(ids, v.lookup(" "))
	}
	var buf []byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c&0xc0 != 0x80 {
			buf = buf[:0]
		}
		buf = append(buf, c)
		if i+1 < len(text) && text[i+1]&0xc0 == 0x80 && len(buf) < 4 {
			continue
		}
		if id := v.lookup(string(buf)); id != -1 {
			ids = append(ids, id)
		} else {
			for _, b := range buf {
				ids = append(ids, int(b)+3)
			}
		}
		buf = buf[:0]
	}
	for {
		best, bestID, bestScore := -1, -1, float32(-1e10)
		for i := 0; i+1 < len(ids); i++ {
			id := v.lookup(v.pieces[ids[i]] + v.pieces[ids[i+1]])
			if id != -1 && v.scores[id] > bestScore {
				best, bestID, bestScore = i, id, v.scores[id]
			}
		}
		if best == -1 {
			return ids
		}
		ids = slices.Replace(ids, best, best+2, bestID)
	}
}

// decode follows run.c's decode: strip a leading space after BOS, turn
// "<0xXX>" into its byte.
func (v l2cVocab) decode(prev, id int) string {
	p := v.pieces[id]
	if prev == 1 && strings.HasPrefix(p, " ") {
		p = p[1:]
	}
	var b byte
	if n, _ := fmt.Sscanf(p, "<0x%02X>", &b); n == 1 {
		return string([]byte{b})
	}
	return p
}

func TestWriteLlama2C(t *testing.T) {
	for _, size := range []int{VocabSize, VocabSize + 5} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteLlama2C(&buf, size); err != nil {
				t.Fatal(err)
			}
			v := readL2CVocab(t, &buf, size)
			longest := 0
			seen := map[string]int{}
			for id, p := range v.pieces {
				longest = max(longest, len(p))
				if v.scores[id] != 0 || math.Signbit(float64(v.scores[id])) {
					t.Errorf("token %d: score %v, want 0", id, v.scores[id])
				}
				if strings.IndexByte(p, 0) >= 0 || p == "" {
					t.Errorf("token %d: piece %q is empty or holds a NUL, which C strings cannot", id, p)
				}
				if prev, ok := seen[p]; ok {
					t.Errorf("tokens %d and %d share piece %q", prev, id, p)
				}
				seen[p] = id
			}
			if v.maxLen != longest {
				t.Errorf("max_token_length = %d, want %d", v.maxLen, longest)
			}
			for a, pa := range v.pieces {
				for b, pb := range v.pieces {
					if id, ok := seen[pa+pb]; ok {
						t.Fatalf("pieces %d %q + %d %q spell piece %d: run.c would merge them", a, pa, b, pb, id)
					}
				}
			}
			if got := v.lookup(" "); got != ' '+3 {
				t.Errorf("dummy prefix \" \" is id %d, want %d", got, ' '+3)
			}
			for id := ByteOffset; id < ByteOffset+256; id++ {
				if got := v.decode(0, id); got != Piece(id) {
					t.Errorf("run.c decodes id %d as %q, want %q", id, got, Piece(id))
				}
			}
			for id := range size {
				if !IsByte(id) && v.pieces[id] != Piece(id) {
					t.Errorf("special %d stored as %q, want %q", id, v.pieces[id], Piece(id))
				}
			}
		})
	}
	if err := WriteLlama2C(io.Discard, VocabSize-1); err == nil {
		t.Error("WriteLlama2C accepted a vocabulary smaller than the tokenizer's")
	}
}

// TestLlama2CEncodeMatches checks that run.c's encoder, given our
// tokenizer.bin, turns a prompt into BOS, " ", then Encode(prompt).
func TestLlama2CEncodeMatches(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteLlama2C(&buf, VocabSize); err != nil {
		t.Fatal(err)
	}
	v := readL2CVocab(t, &buf, VocabSize)
	prompts := []string{"", "Once upon a time", "a<s></s><|end|><0x41>", "tab\tnew\nline", "héllo 日本 🙂", "\x01\x7f\xc3", "\x80\x80\x80\x80\x80x", "  two spaces"}
	for _, p := range prompts {
		got := v.encode(p)
		want := []int{BOS}
		if p != "" {
			want = append(want, ' '+ByteOffset)
		}
		want = append(want, Encode(p)...)
		if !slices.Equal(got, want) {
			t.Errorf("run.c encodes %q as %v, want %v", p, got, want)
		}
		var dec strings.Builder
		for i := 1; i < len(got); i++ {
			dec.WriteString(v.decode(got[i-1], got[i]))
		}
		if dec.String() != p {
			t.Errorf("run.c decodes %q back as %q", p, dec.String())
		}
	}
}
