package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/tokenizer"
)

// TestWrite checks that write makes a checkpoint LoadHF reads, with a tokenizer that round-trips text.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	if err := run([]string{"write", "-dir", dir, "-shape", "tiny"}, nil); err != nil {
		t.Fatal(err)
	}
	w, info, err := infer.LoadHF(dir, infer.HFOptions{Quantize: "q8_0"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := w.Config().Vocab, shapes["tiny"].Vocab; got != want {
		t.Errorf("vocab = %d, want %d", got, want)
	}
	eos := shapes["tiny"].Vocab - len(specials)
	if len(info.EOS) != 1 || info.EOS[0] != eos {
		t.Errorf("eos = %v, want [%d] (<|endoftext|>)", info.EOS, eos)
	}
	tok, err := tokenizer.LoadHF(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := tok.TokenID(endOfText); !ok || id != eos {
		t.Errorf("TokenID(%q) = %d, %v; want %d", endOfText, id, ok, eos)
	}
	for _, tc := range []struct {
		name, text string
		wantLen    int
	}{
		{"merged pair", "!!", 1},    // the first merge
		{"pair and byte", "!!!", 2}, // no triples in a vocabulary this small
		{"plain bytes", "The fox.", 8},
		{"special", "a<|im_end|>", 2},
		{"non-ascii", "é ü", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids := tok.Encode(tc.text)
			if len(ids) != tc.wantLen {
				t.Errorf("Encode(%q) = %v, want %d ids", tc.text, ids, tc.wantLen)
			}
			got, err := tok.Decode(ids)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.text {
				t.Errorf("Decode(Encode(%q)) = %q", tc.text, got)
			}
		})
	}
}

// TestVocabulary checks the sizes and the merge order of the generated vocabulary.
func TestVocabulary(t *testing.T) {
	for _, n := range []int{256, 300, 256 + 256*256 + 10} {
		toks, merges := vocabulary(n)
		if len(toks) != n || len(merges) != n-256 {
			t.Errorf("vocabulary(%d): %d tokens and %d merges, want %d and %d", n, len(toks), len(merges), n, n-256)
			continue
		}
		seen := map[string]bool{}
		for _, s := range toks {
			if seen[s] {
				t.Fatalf("vocabulary(%d): token %q twice", n, s)
			}
			seen[s] = true
		}
		for i, m := range merges {
			a, b, _ := strings.Cut(m, " ")
			if toks[256+i] != a+b {
				t.Fatalf("vocabulary(%d): merge %d %q makes %q, want %q", n, i, m, a+b, toks[256+i])
			}
		}
	}
}

func TestAgreeing(t *testing.T) {
	pieces := []string{" a", "b", "\n", "cd"}
	for _, tc := range []struct {
		name     string
		out      string
		wantN    int
		wantRest string
	}{
		{"all agree", "P ab\ncd\n", 4, "\n"},
		{"second differs", "P ax\ncd\n", 1, "x\ncd\n"},
		{"prompt differs", "Q ab", 0, "Q ab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, rest := agreeing(tc.out, "P", pieces)
			if n != tc.wantN || rest != tc.wantRest {
				t.Errorf("agreeing(%q) = %d, %q; want %d, %q", tc.out, n, rest, tc.wantN, tc.wantRest)
			}
		})
	}
}

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want string
	}{
		{[]float64{3, 1, 2}, "2.00 (1.00-3.00)"},
		{[]float64{10, 30, 20, 40}, "25.0 (10.0-40.0)"},
		{[]float64{123.4}, "123 (123-123)"},
		{nil, "-"},
	} {
		if got := spread(tc.v); got != tc.want {
			t.Errorf("spread(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
