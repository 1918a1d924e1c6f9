package local

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/tokenizer"
)

// GGUF token types (tokenizer.ggml.token_type).
const (
	ggufNormal      = 1
	ggufControl     = 3
	ggufUserDefined = 4
	ggufUnused      = 5
)

// ggufPre maps llama.cpp's tokenizer.ggml.pre names to tokenizer.json pre-tokenizers.
// llama.cpp's converter gives those names to byte-level BPE tokenizers.
// Each maps to the pre-tokenizer package tokenizer reads, with the
// normalizer and ignore_merges of the family's own tokenizer.json.
var ggufPre = map[string]struct {
	preTokenizer string
	nfc          bool
	ignoreMerges bool
}{
	"qwen2":     {splitThenByteLevel(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`), true, false},
	"llama-bpe": {splitThenByteLevel(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`), false, true},
	"gpt-2":     {`{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}`, false, false},
}

func splitThenByteLevel(regex string) string {
	r, _ := json.Marshal(regex) // a string always marshals
	return `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": ` + string(r) +
		`}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}`
}

// GGUFTokenizer makes the tokenizer a GGUF file embeds into a tokenizer.HF.
// infer.LoadGGUF reads it from the file. GGUFTokenizer writes the
// tokenizer.json of the same vocabulary, merges and control tokens, with
// the pre-tokenizer tokenizer.ggml.pre names: qwen2, llama-bpe or gpt-2.
// Then it reads it. Other tokenizer models, such as SentencePiece's llama,
// and other pre-tokenizers are refused with their names.
func GGUFTokenizer(t infer.GGUFTokenizer) (*tokenizer.HF, error) {
	if t.Model != "gpt2" {
		return nil, fmt.Errorf("gguf tokenizer: tokenizer.ggml.model %q is not supported (want gpt2, a byte-level BPE)", t.Model)
	}
	pre, ok := ggufPre[t.Pre]
	if !ok {
		return nil, fmt.Errorf("gguf tokenizer: tokenizer.ggml.pre %q is not supported (want qwen2, llama-bpe or gpt-2)", t.Pre)
	}
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	vocab := make(map[string]int, len(t.Tokens))
	var extra []added
	for id, tok := range t.Tokens {
		typ := int32(ggufNormal)
		if t.Types != nil {
			typ = t.Types[id]
		}
		switch typ {
		case ggufUnused:
		case ggufControl, ggufUserDefined:
			extra = append(extra, added{ID: id, Content: tok, Special: typ == ggufControl})
		default:
			vocab[tok] = id
		}
	}
	normalizer := "null"
	if pre.nfc {
		normalizer = `{"type": "NFC"}`
	}
	model := map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
		"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": pre.ignoreMerges,
		"vocab": vocab, "merges": t.Merges}
	if t.Merges == nil {
		model["merges"] = []string{}
	}
	doc := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": extra,
		"normalizer":     json.RawMessage(normalizer),
		"pre_tokenizer":  json.RawMessage(pre.preTokenizer),
		"post_processor": nil,
		"decoder":        json.RawMessage(`{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}`),
		"model":          model,
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("gguf tokenizer: %w", err)
	}
	hf, err := tokenizer.ParseHF(b)
	if err != nil {
		return nil, fmt.Errorf("gguf tokenizer: %w", err)
	}
	return hf, nil
}

// GGUFChatFormat names the chat format of a GGUF file's chat template by its control tokens.
// <|start_header_id|> means llama3. <|im_start|> means qwen3 when the
// template also writes <think>, and qwen2.5 otherwise. The engine renders
// chats in Go with package tokenizer, not by running the Jinja template. A
// template it does not recognise is an error; a local model's
// chat_template setting overrides it.
func GGUFChatFormat(template string) (tokenizer.ChatFormat, error) {
	switch {
	case strings.Contains(template, "<|start_header_id|>"):
		return tokenizer.ChatLlama3, nil
	case strings.Contains(template, "<|im_start|>") && strings.Contains(template, "<think>"):
		return tokenizer.ChatQwen3, nil
	case strings.Contains(template, "<|im_start|>"):
		return tokenizer.ChatQwen25, nil
	case template == "":
		return 0, fmt.Errorf("gguf chat template: the file has none (set chat_template: qwen2.5, qwen3 or llama3)")
	}
	return 0, fmt.Errorf("gguf chat template: not one of qwen2.5, qwen3 or llama3 (set chat_template to the one it renders)")
}
