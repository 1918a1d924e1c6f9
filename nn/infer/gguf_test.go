package infer

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/nn/kernel"
)

// The GGUF fixtures under testdata/gguf are the HF fixtures converted by
// testdata/gguf/make_gguf.py with llama.cpp's gguf-py; see that script.

// TestLoadGGUFMatchesHF compares each GGUF fixture with the HF checkpoint it came from.
// It compares their logits over the q8_0 prompt set and their greedy tokens.
// Where both hold the same weight values, the logits must be bitwise equal.
// That is when the file's type is the checkpoint's, or for q8_0 against the
// checkpoint quantised at load: the converter's quantiser and
// kernel.QuantizeQ8_0 give the same bytes. llama's f16 file rounds the
// float32 checkpoint to float16, which moves the logits a little, as
// docs/engine.md records, and changes no greedy token.
func TestLoadGGUFMatchesHF(t *testing.T) {
	for _, tc := range []struct {
		file     string
		hf       string
		opt      HFOptions // for LoadHF
		arch     string
		dtype    kernel.DType
		same     bool    // bitwise the same logits
		tol      float64 // else the largest absolute logit difference
		eos, bos int
		template string // a marker of the chat template
	}{
		{"llama-gqa-tied-f32", "llama-gqa-tied", HFOptions{}, "llama", kernel.Float32, true, 0, 268, 268, "<|start_header_id|>"},
		{"llama-gqa-tied-f16", "llama-gqa-tied", HFOptions{}, "llama", kernel.Float16, false, 0.1, 268, 268, "<|start_header_id|>"},
		{"llama-gqa-tied-q8_0", "llama-gqa-tied", HFOptions{Quantize: "q8_0"}, "llama", kernel.Q8_0, true, 0, 268, 268, "<|start_header_id|>"},
		{"qwen2-bias-f16", "qwen2-bias", HFOptions{}, "qwen2", kernel.Float16, true, 0, 266, 266, "<|im_start|>"},
		{"qwen2-bias-q8_0", "qwen2-bias", HFOptions{Quantize: "q8_0"}, "qwen2", kernel.Q8_0, true, 0, 266, 266, "<|im_start|>"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			g, info, err := LoadGGUF(filepath.Join("testdata", "gguf", tc.file+".gguf"), HFOptions{})
			if err != nil {
				t.Fatal(err)
			}
			h, _, err := LoadHF(filepath.Join("testdata", "hf", tc.hf), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if info.Arch != tc.arch || info.DType != tc.dtype || !slices.Equal(info.EOS, []int{tc.eos}) {
				t.Errorf("info = arch %s, dtype %v, eos %v; want %s, %v, [%d]", info.Arch, info.DType, info.EOS, tc.arch, tc.dtype, tc.eos)
			}
			tk := info.Tokenizer
			if tk.Model != "gpt2" || len(tk.Tokens) != 272 || len(tk.Types) != 272 || len(tk.Merges) != 8 || tk.BOS != tc.bos || !strings.Contains(tk.ChatTemplate, tc.template) {
				t.Errorf("tokenizer: model %s, %d tokens, %d types, %d merges, bos %d, template %q", tk.Model, len(tk.Tokens), len(tk.Types), len(tk.Merges), tk.BOS, tk.ChatTemplate)
			}
			got, want := g.Config(), h.Config()
			if (got.RopeScaling == nil) != (want.RopeScaling == nil) || got.RopeScaling != nil && *got.RopeScaling != *want.RopeScaling {
				t.Fatalf("rope scaling %+v, from the HF checkpoint %+v", got.RopeScaling, want.RopeScaling)
			}
			got.RopeScaling, want.RopeScaling = nil, nil
			if got != want {
				t.Fatalf("config %+v, from the HF checkpoint %+v", got, want)
			}
			if tc.same {
				for _, p := range q8Prompts {
					if a, b := hfPromptLogits(t, g, p), hfPromptLogits(t, h, p); !slices.Equal(a, b) {
						t.Fatalf("prompt %v: logits differ from the HF checkpoint's", p)
					}
				}
				if g.Bytes() != h.Bytes() {
					t.Errorf("weights take %d bytes, the HF checkpoint's %d", g.Bytes(), h.Bytes())
				}
				return
			}
			worst, same, steps := q8Compare(t, h, g, q8Prompts, 16)
			t.Logf("largest logit difference %.3g; greedy agrees on %d of %d tokens", worst, same, steps)
			if worst > tc.tol || same != steps {
				t.Errorf("largest logit difference %.3g (want at most %g), greedy agrees on %d of %d tokens", worst, tc.tol, same, steps)
			}
		})
	}
}

// TestLoadGGUFOptions checks that load widens or quantises GGUF matrices as HF ones.
// The result must be the same as for an HF checkpoint.
func TestLoadGGUFOptions(t *testing.T) {
	dir := filepath.Join("testdata", "gguf")
	q, _, err := LoadGGUF(filepath.Join(dir, "qwen2-bias-f16.gguf"), HFOptions{Quantize: "q8_0"})
	if err != nil {
		t.Fatal(err)
	}
	ref, _, err := LoadGGUF(filepath.Join(dir, "qwen2-bias-q8_0.gguf"), HFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wide, info, err := LoadGGUF(filepath.Join(dir, "llama-gqa-tied-q8_0.gguf"), HFOptions{Float32: true})
	if err != nil {
		t.Fatal(err)
	}
	if info.DType != kernel.Float32 {
		t.Errorf("dtype with Float32 = %v", info.DType)
	}
	q8, _, err := LoadGGUF(filepath.Join(dir, "llama-gqa-tied-q8_0.gguf"), HFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range q8Prompts {
		if a, b := hfPromptLogits(t, q, p), hfPromptLogits(t, ref, p); !slices.Equal(a, b) {
			t.Fatalf("prompt %v: f16 quantised at load differs from the q8_0 file", p)
		}
		// Widened q8_0 values computed in float32 differ from the q8_0
		// kernel's by the quantisation of the activations only.
		a, b := hfPromptLogits(t, wide, p), hfPromptLogits(t, q8, p)
		for i := range a {
			if d := math.Abs(float64(a[i] - b[i])); d > q8LogitTol {
				t.Fatalf("prompt %v logit %d: widened %v, q8_0 %v", p, i, a[i], b[i])
			}
		}
	}
}

// patched copies a GGUF fixture with the first occurrence of old replaced
// by new (of the same length).
func patched(t *testing.T, file string, old, new []byte) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "gguf", file))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, old)
	if i < 0 || len(old) != len(new) {
		t.Fatalf("%s: %q not found", file, old)
	}
	copy(b[i:], new)
	path := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// tensorInfo is the bytes of a GGUF tensor info: the name, the dimension
// count and dimensions, then the type.
func tensorInfo(name string, dims []uint64, typ uint32) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(name)))
	b = append(b, name...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(dims)))
	for _, d := range dims {
		b = binary.LittleEndian.AppendUint64(b, d)
	}
	return binary.LittleEndian.AppendUint32(b, typ)
}

func TestLoadGGUFErrors(t *testing.T) {
	arch := func(a string) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len("general.architecture")))
		b = append(b, "general.architecture"...)
		b = binary.LittleEndian.AppendUint32(b, 8) // a string
		b = binary.LittleEndian.AppendUint64(b, uint64(len(a)))
		return append(b, a...)
	}
	for _, tc := range []struct {
		name string
		path string
		want string
	}{
		{"architecture", patched(t, "llama-gqa-tied-f32.gguf", arch("llama"), arch("mamba")), `architecture "mamba" is not supported`},
		{"tensor type", patched(t, "llama-gqa-tied-f32.gguf", tensorInfo("output_norm.weight", []uint64{32}, 0), tensorInfo("output_norm.weight", []uint64{32}, 2)),
			"tensor output_norm.weight: type Q4_0 is not supported"},
		{"not gguf", filepath.Join("testdata", "hf", "qwen2-bias", "config.json"), "load gguf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := LoadGGUF(tc.path, HFOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadGGUF = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if !IsGGUF(filepath.Join("testdata", "gguf", "qwen2-bias-f16.gguf")) || IsGGUF(filepath.Join("testdata", "hf", "qwen2-bias")) {
		t.Errorf("IsGGUF does not tell a GGUF file from a checkpoint directory")
	}
}

// FuzzLoadGGUF feeds corrupt and truncated GGUF files to the loader.
// It must return an error or a model whose config validates, never panic.
func FuzzLoadGGUF(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "gguf", "qwen2-bias-q8_0.gguf"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	for _, n := range []int{0, 4, 24, 1000, 5000, len(b) - 1} {
		f.Add(b[:n])
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "fuzz.gguf")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		w, _, err := LoadGGUF(path, HFOptions{})
		if err == nil {
			if err := w.Config().Validate(); err != nil {
				t.Fatalf("LoadGGUF accepted an invalid config: %v", err)
			}
		}
	})
}
