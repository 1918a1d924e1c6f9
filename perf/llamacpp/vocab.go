package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Qwen2.5's special tokens and where its vocabulary puts them.
const (
	endOfText = "<|endoftext|>"
	firstSpec = 151643 // <|endoftext|>, then <|im_start|>, <|im_end|>
)

var specials = []string{endOfText, "<|im_start|>", "<|im_end|>"}

// qwenSplit is the Split regex of Qwen2's tokenizer.json, which llama.cpp calls the qwen2 pre-tokenizer.
const qwenSplit = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// qwenTemplate is a short chat template with Qwen2.5's markers.
const qwenTemplate = "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n" +
	"{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"

// byteChars is GPT-2's bytes_to_unicode in its order.
// Printable bytes stand for themselves and come first; the others follow as U+0100 onwards.
func byteChars() []string {
	var out []string
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)
	}
	for b := range 256 {
		if printable(b) {
			out = append(out, string(rune(b)))
		}
	}
	n := 0
	for b := range 256 {
		if !printable(b) {
			out = append(out, string(rune(256+n)))
			n++
		}
	}
	return out
}

// vocabulary is a byte-level BPE vocabulary of normal tokens, with its merges by rank.
// The 256 byte tokens come first, then one token per merge: every pair
// of byte tokens, then byte pairs followed by a byte, until there are
// normal tokens. It stands in for Qwen2.5's, which is not shipped here:
// the same sizes, so the same head and embedding, and every token prints.
func vocabulary(normal int) (tokens, merges []string) {
	bytes := byteChars()
	tokens = append(tokens, bytes...)
	add := func(a, b string) bool {
		if len(tokens) == normal {
			return false
		}
		tokens = append(tokens, a+b)
		merges = append(merges, a+" "+b)
		return true
	}
	for _, a := range bytes {
		for _, b := range bytes {
			if !add(a, b) {
				return tokens, merges
			}
		}
	}
	pairs := tokens[256:]
	for _, a := range pairs {
		for _, b := range bytes {
			if !add(a, b) {
				return tokens, merges
			}
		}
	}
	return tokens, merges
}

// writeTokenizer writes tokenizer.json and tokenizer_config.json of a Qwen2-style tokenizer into dir.
// Its normal tokens fill the ids below Qwen2.5's first special token, as
// Qwen2.5's do; the specials follow; the rest up to vocab are padding rows.
func writeTokenizer(dir string, vocab int) error {
	normal := min(firstSpec, vocab-len(specials))
	if normal < 256 {
		return fmt.Errorf("vocabulary of %d is too small for 256 byte tokens and %d specials", vocab, len(specials))
	}
	tokens, merges := vocabulary(normal)
	ids := make(map[string]int, len(tokens))
	for i, t := range tokens {
		ids[t] = i
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
	var extra []added
	for i, s := range specials {
		extra = append(extra, added{ID: normal + i, Content: s, Special: true})
	}
	re, err := json.Marshal(qwenSplit)
	if err != nil {
		return err
	}
	doc := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": extra,
		"normalizer": json.RawMessage(`{"type": "NFC"}`),
		"pre_tokenizer": json.RawMessage(`{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": ` + string(re) +
			`}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}`),
		"post_processor": nil,
		"decoder":        json.RawMessage(`{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}`),
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": ids, "merges": merges},
	}
	if err := writeJSON(filepath.Join(dir, "tokenizer.json"), doc); err != nil {
		return err
	}
	cfg := map[string]any{"add_bos_token": false, "bos_token": nil, "eos_token": endOfText, "pad_token": endOfText,
		"chat_template": qwenTemplate, "model_max_length": 32768, "tokenizer_class": "Qwen2Tokenizer"}
	return writeJSON(filepath.Join(dir, "tokenizer_config.json"), cfg)
}

// setSpecialIDs points config.json's bos_token_id and eos_token_id at <|endoftext|>, as Qwen2.5's config does.
func setSpecialIDs(dir string, id int) error {
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	cfg["bos_token_id"], cfg["eos_token_id"] = id, id
	return writeJSON(path, cfg)
}

func writeJSON(path string, v any) error {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
