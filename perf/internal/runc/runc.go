// Package runc holds what the benchmark programs that run llama2.c's run program share.
// That is a seeded model with clear-cut greedy choices, its export in llama2.c's formats,
// and the text run.c prints for a token sequence.
package runc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/tokenizer"
)

// ScaledModel draws a model of config c from seed and multiplies every weight matrix by scale.
// The norms are left as drawn.
// Greedy decoding is then far from ties, and float rounding does not decide a token.
func ScaledModel(c nn.Config, seed uint64, scale float32) (*nn.Params, error) {
	if !(scale > 0) {
		return nil, errors.New("scale must be positive")
	}
	p, err := nn.Alloc(c)
	if err != nil {
		return nil, err
	}
	p.Init(seed)
	mats := [][]float32{p.TokenEmb}
	for _, l := range p.Layers {
		mats = append(mats, l.Wq, l.Wk, l.Wv, l.Wo, l.W1, l.W2, l.W3)
	}
	if !c.TiedOutput {
		mats = append(mats, p.Output)
	}
	for _, m := range mats {
		for i := range m {
			m[i] *= scale
		}
	}
	return p, nil
}

// Export writes dir/model.bin (llama2.c's legacy checkpoint) and
// dir/tokenizer.bin for p, creating dir.
func Export(dir string, p *nn.Params) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "model.bin"), func(w io.Writer) error { return nn.ExportLlama2C(w, p) }); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "tokenizer.bin"), func(w io.Writer) error { return tokenizer.WriteLlama2C(w, p.Config.Vocab) })
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close() // the write error is the one worth reporting
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Text is what run.c prints for the sequence ids, without the final newline.
// The first id is fed, never printed.
// A leading space right after BOS is dropped, and "<0xXX>" pieces print their byte.
// Single bytes that are neither printable ASCII nor whitespace are skipped.
func Text(ids []int) string {
	var b strings.Builder
	for i := 1; i < len(ids); i++ {
		piece := tokenizer.Llama2CPiece(ids[i])
		if ids[i-1] == tokenizer.BOS && strings.HasPrefix(piece, " ") {
			piece = piece[1:]
		}
		if by, ok := hexBytePiece(piece); ok {
			piece = string([]byte{by})
		}
		if len(piece) == 1 && !printableOrSpace(piece[0]) {
			continue
		}
		b.WriteString(piece)
	}
	return b.String()
}

// hexBytePiece parses a "<0xXX>" piece.
func hexBytePiece(s string) (byte, bool) {
	var b byte
	if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
		return 0, false
	}
	if _, err := fmt.Sscanf(s[3:5], "%02X", &b); err != nil {
		return 0, false
	}
	return b, true
}

// printableOrSpace is C's isprint || isspace in the "C" locale.
func printableOrSpace(c byte) bool {
	return (c >= 0x20 && c <= 0x7e) || (c >= '\t' && c <= '\r')
}
