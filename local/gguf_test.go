package local_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/tokenizer"
)

// TestGGUFTokenizerMatchesHF checks a GGUF fixture's tokenizer against its source tokenizer.json.
// It must give the same ids, and its chat template must name the family's
// chat format.
func TestGGUFTokenizerMatchesHF(t *testing.T) {
	texts := []string{"hello there", "The weather in Paris is 23 degrees!\n\nthe end", "<|im_start|>user\nhi<|im_end|>", "ünïcödé tëxt", ""}
	for _, tc := range []struct {
		file, hf string
		want     tokenizer.ChatFormat
	}{
		{"qwen2-bias-q8_0.gguf", "qwen2-bias", tokenizer.ChatQwen25},
		{"llama-gqa-tied-f16.gguf", "llama-gqa-tied", tokenizer.ChatLlama3},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, info, err := infer.LoadGGUF(filepath.Join("..", "nn", "infer", "testdata", "gguf", tc.file), infer.HFOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := local.GGUFTokenizer(info.Tokenizer)
			if err != nil {
				t.Fatal(err)
			}
			want, err := tokenizer.LoadHF(filepath.Join("..", "nn", "infer", "testdata", "hf", tc.hf, "tokenizer.json"))
			if err != nil {
				t.Fatal(err)
			}
			if got.VocabSize() != want.VocabSize() {
				t.Errorf("vocabulary %d, tokenizer.json's %d", got.VocabSize(), want.VocabSize())
			}
			for _, s := range texts {
				a, b := got.Encode(s), want.Encode(s)
				if !slices.Equal(a, b) {
					t.Errorf("Encode(%q) = %v, tokenizer.json gives %v", s, a, b)
				}
				if d, err := got.Decode(a); err != nil || d != s {
					t.Errorf("Decode(Encode(%q)) = %q, %v", s, d, err)
				}
			}
			f, err := local.GGUFChatFormat(info.Tokenizer.ChatTemplate)
			if err != nil || f != tc.want {
				t.Errorf("chat format = %v, %v; want %v", f, err, tc.want)
			}
		})
	}
}

func TestGGUFTokenizerRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		tok  infer.GGUFTokenizer
		want string
	}{
		{"sentencepiece", infer.GGUFTokenizer{Model: "llama"}, `tokenizer.ggml.model "llama"`},
		{"pre-tokenizer", infer.GGUFTokenizer{Model: "gpt2", Pre: "deepseek-coder"}, `tokenizer.ggml.pre "deepseek-coder"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := local.GGUFTokenizer(tc.tok)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("GGUFTokenizer = %v, want an error naming %s", err, tc.want)
			}
		})
	}
	if _, err := local.GGUFChatFormat("{{ messages }}"); err == nil {
		t.Errorf("GGUFChatFormat of an unknown template: no error")
	}
}

// TestGGUFChat serves a GGUF fixture with its embedded tokenizer and template.
// A greedy chat reply must be the one its source HF checkpoint gives.
func TestGGUFChat(t *testing.T) {
	w, info, err := infer.LoadGGUF(filepath.Join("..", "nn", "infer", "testdata", "gguf", "qwen2-bias-f16.gguf"), infer.HFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := local.GGUFTokenizer(info.Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	f, err := local.GGUFChatFormat(info.Tokenizer.ChatTemplate)
	if err != nil {
		t.Fatal(err)
	}
	m, err := local.NewHF(w, tok, f, info.EOS, local.Config{Name: "gguf", MaxNew: 16, MaxBatch: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ref, _, _, _ := hfModel(t, "qwen2-bias")
	zero := 0.0
	req := &delegate.Request{Messages: []delegate.Message{delegate.User("hello there")}, Temperature: &zero, MaxTokens: 12}
	got, err := m.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.PromptTokenIDs, want.PromptTokenIDs) || got.Choices[0].Message.Content != want.Choices[0].Message.Content {
		t.Errorf("GGUF reply %q (prompt %v), HF checkpoint's %q (prompt %v)", got.Choices[0].Message.Content, got.PromptTokenIDs, want.Choices[0].Message.Content, want.PromptTokenIDs)
	}
}
