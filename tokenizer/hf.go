package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"

	"golang.org/x/text/unicode/norm"
)

// HF is a byte-level BPE tokenizer read from a Hugging Face tokenizer.json.
// That is the format of GPT-2, Llama 3 and the Qwen2, Qwen2.5 and Qwen3
// families. It gives the ids Hugging Face's tokenizers library gives for the
// same file; docs/tokenizers.md says how that was checked.
//
// What a file may hold, and what LoadHF rejects with an error naming it:
//
//   - model: BPE, with merges written as "a b" strings or as ["a", "b"]
//     pairs, ignore_merges honoured; no dropout, no byte fallback, no
//     subword prefix or suffix.
//   - normalizer: none or NFC.
//   - pre_tokenizer: ByteLevel with use_regex (GPT-2's pattern), or a
//     Sequence of a Split with one of the patterns of GPT-2, Llama 3 or Qwen2
//     (behavior Isolated) and a ByteLevel without regex; add_prefix_space is
//     not supported.
//   - decoder: ByteLevel.
//   - post_processor: ignored. Encode adds no BOS or EOS; chat templates
//     spell them.
//   - added_tokens: split out of the text before pre-tokenization, leftmost
//     longest first, with lstrip, rstrip and normalized honoured; single_word
//     is not supported.
//
// An HF is safe for concurrent use.
type HF struct {
	pieces  []string // id → token text as stored in the file ("" for an id no token has)
	special []bool   // id → an added token marked special
	decoded []string // id → the bytes the ByteLevel decoder gives for the token
	vocab   map[string]int
	byteID  [256]int32 // the id of the one-byte token of byte b
	merges  map[uint64]merge
	added   []AddedToken

	ignoreMerges bool
	nfc          bool
	pattern      pattern
	raw, normed  *addedMatcher // added tokens matched before and after normalization

	cache wordCache
}

// AddedToken is one entry of a tokenizer.json's added_tokens.
type AddedToken struct {
	ID         int
	Content    string
	Special    bool // a control token (<|im_start|>, <|eot_id|>), skipped by decoders that skip specials
	LStrip     bool // the token absorbs the white space before it
	RStrip     bool // the token absorbs the white space after it
	Normalized bool // the token is matched in the normalized text rather than the raw text
}

// maxTokenID bounds the ids a file may use.
// A corrupt file then cannot make the loader allocate without limit. The
// largest real vocabularies have about 260,000 tokens.
const maxTokenID = 1<<24 - 1

type merge struct {
	rank int32
	id   int32
}

func mergeKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// LoadHF reads a tokenizer.json file, gzip-compressed or not.
func LoadHF(path string) (*HF, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	t, err := ParseHF(data)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
	}
	return t, nil
}

// ParseHF reads the contents of a tokenizer.json, gzip-compressed or not.
func ParseHF(data []byte) (*HF, error) {
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("gunzip: %w", err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("gunzip: %w", err)
		}
	}
	top, err := fields(data, "tokenizer.json", "version", "truncation", "padding", "added_tokens", "normalizer",
		"pre_tokenizer", "post_processor", "decoder", "model")
	if err != nil {
		return nil, err
	}
	var version string
	if err := json.Unmarshal(top["version"], &version); err != nil || version != "1.0" {
		return nil, fmt.Errorf("tokenizer.json version %s: only version \"1.0\" is supported", top["version"])
	}
	t := &HF{}
	if err := t.parseModel(top["model"]); err != nil {
		return nil, err
	}
	if err := t.parseNormalizer(top["normalizer"]); err != nil {
		return nil, err
	}
	if err := t.parsePreTokenizer(top["pre_tokenizer"]); err != nil {
		return nil, err
	}
	if err := checkDecoder(top["decoder"]); err != nil {
		return nil, err
	}
	if err := checkPostProcessor(top["post_processor"], "post_processor"); err != nil {
		return nil, err
	}
	if err := t.parseAdded(top["added_tokens"]); err != nil {
		return nil, err
	}
	t.special = make([]bool, len(t.pieces))
	for _, a := range t.added {
		t.special[a.ID] = a.Special
	}
	t.decoded = make([]string, len(t.pieces))
	for id, p := range t.pieces {
		t.decoded[id] = byteLevelDecode(p)
	}
	t.cache.m = make(map[string][]int32)
	return t, nil
}

// fields decodes a JSON object and rejects keys other than allowed, naming
// the key and where it was found. A missing or null object gives a nil map.
func fields(raw json.RawMessage, where string, allowed ...string) (map[string]json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	for k := range m {
		if !slices.Contains(allowed, k) {
			return nil, fmt.Errorf("%s: unsupported field %q", where, k)
		}
	}
	return m, nil
}

func isNull(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) == 0 || string(s) == "null"
}

// typeOf returns the "type" of a component object.
func typeOf(m map[string]json.RawMessage, where string) (string, error) {
	var typ string
	if err := json.Unmarshal(m["type"], &typ); err != nil {
		return "", fmt.Errorf("%s: no string \"type\"", where)
	}
	return typ, nil
}

// boolField reads an optional boolean field (false when missing or null).
func boolField(m map[string]json.RawMessage, key, where string) (bool, error) {
	if isNull(m[key]) {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(m[key], &b); err != nil {
		return false, fmt.Errorf("%s: field %q: %w", where, key, err)
	}
	return b, nil
}

// parseMerges reads the merges, written as "a b" strings (older files) or
// as ["a", "b"] pairs (newer ones).
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	s := bytes.TrimSpace(raw)
	if len(s) < 2 || s[0] != '[' {
		return nil, errors.New("not a list")
	}
	if rest := bytes.TrimSpace(s[1:]); len(rest) > 0 && rest[0] == '"' {
		var lines []string
		if err := json.Unmarshal(s, &lines); err != nil {
			return nil, err
		}
		out := make([][2]string, len(lines))
		for i, l := range lines {
			a, b, ok := strings.Cut(l, " ")
			if !ok || strings.Contains(b, " ") {
				return nil, fmt.Errorf("merge %d %q is not two tokens separated by one space", i, l)
			}
			out[i] = [2]string{a, b}
		}
		return out, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(s, &pairs); err != nil {
		return nil, err
	}
	out := make([][2]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("merge %d has %d tokens, want 2", i, len(p))
		}
		out[i] = [2]string{p[0], p[1]}
	}
	return out, nil
}

func (t *HF) parseModel(raw json.RawMessage) error {
	const where = "model"
	m, err := fields(raw, where, "type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
		"fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges")
	if err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("%s: missing", where)
	}
	typ, err := typeOf(m, where)
	if err != nil {
		return err
	}
	if typ != "BPE" {
		return fmt.Errorf("%s: type %q is not supported (only BPE)", where, typ)
	}
	if !isNull(m["dropout"]) {
		var d float64
		if err := json.Unmarshal(m["dropout"], &d); err != nil || d != 0 {
			return fmt.Errorf("%s: dropout %s is not supported", where, m["dropout"])
		}
	}
	for _, k := range []string{"continuing_subword_prefix", "end_of_word_suffix"} {
		if !isNull(m[k]) && string(bytes.TrimSpace(m[k])) != `""` {
			return fmt.Errorf("%s: %s %s is not supported", where, k, m[k])
		}
	}
	if fb, err := boolField(m, "byte_fallback", where); err != nil {
		return err
	} else if fb {
		return fmt.Errorf("%s: byte_fallback is not supported (byte-level BPE needs none)", where)
	}
	if t.ignoreMerges, err = boolField(m, "ignore_merges", where); err != nil {
		return err
	}
	if err := json.Unmarshal(m["vocab"], &t.vocab); err != nil {
		return fmt.Errorf("%s: vocab: %w", where, err)
	}
	maxID := -1
	for tok, id := range t.vocab {
		if id < 0 || id > maxTokenID {
			return fmt.Errorf("%s: vocab: token %q has id %d, outside 0..%d", where, tok, id, maxTokenID)
		}
		maxID = max(maxID, id)
	}
	t.pieces = make([]string, maxID+1)
	for tok, id := range t.vocab {
		if t.pieces[id] != "" {
			return fmt.Errorf("%s: vocab: id %d is given to both %q and %q", where, id, t.pieces[id], tok)
		}
		t.pieces[id] = tok
	}
	for b := range 256 {
		id, ok := t.vocab[string(byteChar[b])]
		if !ok {
			return fmt.Errorf("%s: vocab: no token for byte 0x%02x (%q): not a byte-level vocabulary", where, b, byteChar[b])
		}
		t.byteID[b] = int32(id)
	}
	merges, err := parseMerges(m["merges"])
	if err != nil {
		return fmt.Errorf("%s: merges: %w", where, err)
	}
	t.merges = make(map[uint64]merge, len(merges))
	for rank, e := range merges {
		a, okA := t.vocab[e[0]]
		b, okB := t.vocab[e[1]]
		c, okC := t.vocab[e[0]+e[1]]
		if !okA || !okB || !okC {
			return fmt.Errorf("%s: merge %d %q: a token is not in the vocabulary", where, rank, e[0]+" "+e[1])
		}
		k := mergeKey(int32(a), int32(b))
		if _, dup := t.merges[k]; !dup { // the first (lowest) rank wins, as in the tokenizers library
			t.merges[k] = merge{rank: int32(rank), id: int32(c)}
		}
	}
	return nil
}

func (t *HF) parseNormalizer(raw json.RawMessage) error {
	const where = "normalizer"
	m, err := fields(raw, where, "type", "normalizers")
	if err != nil || m == nil {
		return err
	}
	typ, err := typeOf(m, where)
	if err != nil {
		return err
	}
	switch typ {
	case "NFC":
		t.nfc = true
		return nil
	case "Sequence":
		var seq []json.RawMessage
		if err := json.Unmarshal(m["normalizers"], &seq); err != nil {
			return fmt.Errorf("%s: normalizers: %w", where, err)
		}
		for _, n := range seq {
			if err := t.parseNormalizer(n); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s: type %q is not supported (only NFC)", where, typ)
}

func (t *HF) parsePreTokenizer(raw json.RawMessage) error {
	const where = "pre_tokenizer"
	m, err := fields(raw, where, "type", "pretokenizers", "add_prefix_space", "trim_offsets", "use_regex")
	if err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("%s: missing (a byte-level BPE needs ByteLevel)", where)
	}
	typ, err := typeOf(m, where)
	if err != nil {
		return err
	}
	switch typ {
	case "ByteLevel":
		useRegex, err := byteLevel(m, where)
		if err != nil {
			return err
		}
		if !useRegex {
			return fmt.Errorf("%s: a ByteLevel without use_regex and without a Split is not supported", where)
		}
		t.pattern = patternGPT2
		return nil
	case "Sequence":
		var seq []json.RawMessage
		if err := json.Unmarshal(m["pretokenizers"], &seq); err != nil {
			return fmt.Errorf("%s: pretokenizers: %w", where, err)
		}
		if len(seq) != 2 {
			return fmt.Errorf("%s: a Sequence of %d pre-tokenizers is not supported (only Split then ByteLevel)", where, len(seq))
		}
		p, err := parseSplit(seq[0], where+".pretokenizers[0]")
		if err != nil {
			return err
		}
		bw := where + ".pretokenizers[1]"
		bl, err := fields(seq[1], bw, "type", "add_prefix_space", "trim_offsets", "use_regex")
		if err != nil {
			return err
		}
		if typ, err := typeOf(bl, bw); err != nil {
			return err
		} else if typ != "ByteLevel" {
			return fmt.Errorf("%s: type %q is not supported after a Split (only ByteLevel)", bw, typ)
		}
		useRegex, err := byteLevel(bl, bw)
		if err != nil {
			return err
		}
		if useRegex {
			return fmt.Errorf("%s: a ByteLevel with use_regex after a Split is not supported", bw)
		}
		t.pattern = p
		return nil
	}
	return fmt.Errorf("%s: type %q is not supported (only ByteLevel, or a Sequence of Split and ByteLevel)", where, typ)
}

// byteLevel checks a ByteLevel pre-tokenizer and reports its use_regex.
func byteLevel(m map[string]json.RawMessage, where string) (useRegex bool, err error) {
	if aps, err := boolField(m, "add_prefix_space", where); err != nil {
		return false, err
	} else if aps {
		return false, fmt.Errorf("%s: ByteLevel add_prefix_space is not supported", where)
	}
	if _, ok := m["use_regex"]; !ok {
		return true, nil // the tokenizers library's default
	}
	return boolField(m, "use_regex", where)
}

func parseSplit(raw json.RawMessage, where string) (pattern, error) {
	m, err := fields(raw, where, "type", "pattern", "behavior", "invert")
	if err != nil {
		return 0, err
	}
	if typ, err := typeOf(m, where); err != nil {
		return 0, err
	} else if typ != "Split" {
		return 0, fmt.Errorf("%s: type %q is not supported (only Split then ByteLevel)", where, typ)
	}
	var behavior string
	if err := json.Unmarshal(m["behavior"], &behavior); err != nil || behavior != "Isolated" {
		return 0, fmt.Errorf("%s: behavior %s is not supported (only Isolated)", where, m["behavior"])
	}
	if inv, err := boolField(m, "invert", where); err != nil {
		return 0, err
	} else if inv {
		return 0, fmt.Errorf("%s: invert is not supported", where)
	}
	var pat struct {
		Regex  *string
		String *string
	}
	if err := json.Unmarshal(m["pattern"], &pat); err != nil || pat.Regex == nil {
		return 0, fmt.Errorf("%s: pattern %s is not supported (only a Regex)", where, m["pattern"])
	}
	p, ok := knownPatterns[*pat.Regex]
	if !ok {
		return 0, fmt.Errorf("%s: regex %q is not supported (only the patterns of GPT-2, Llama 3 and Qwen2)", where, *pat.Regex)
	}
	return p, nil
}

func checkDecoder(raw json.RawMessage) error {
	const where = "decoder"
	m, err := fields(raw, where, "type", "add_prefix_space", "trim_offsets", "use_regex")
	if err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("%s: missing (only ByteLevel is supported)", where)
	}
	typ, err := typeOf(m, where)
	if err != nil {
		return err
	}
	if typ != "ByteLevel" {
		return fmt.Errorf("%s: type %q is not supported (only ByteLevel)", where, typ)
	}
	return nil
}

// checkPostProcessor accepts the post-processors of the supported families;
// Encode does not apply them (they add BOS/EOS ids and adjust offsets).
func checkPostProcessor(raw json.RawMessage, where string) error {
	if isNull(raw) {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	typ, err := typeOf(m, where)
	if err != nil {
		return err
	}
	switch typ {
	case "ByteLevel", "TemplateProcessing":
		return nil
	case "Sequence":
		var seq []json.RawMessage
		if err := json.Unmarshal(m["processors"], &seq); err != nil {
			return fmt.Errorf("%s: processors: %w", where, err)
		}
		for i, p := range seq {
			if err := checkPostProcessor(p, fmt.Sprintf("%s.processors[%d]", where, i)); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s: type %q is not supported (only ByteLevel, TemplateProcessing or a Sequence of them)", where, typ)
}

func (t *HF) parseAdded(raw json.RawMessage) error {
	var list []json.RawMessage
	if !isNull(raw) {
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("added_tokens: %w", err)
		}
	}
	var raws, normeds []AddedToken
	for i, r := range list {
		where := fmt.Sprintf("added_tokens[%d]", i)
		m, err := fields(r, where, "id", "content", "single_word", "lstrip", "rstrip", "normalized", "special")
		if err != nil {
			return err
		}
		var a AddedToken
		if err := json.Unmarshal(m["id"], &a.ID); err != nil || a.ID < 0 || a.ID > maxTokenID {
			return fmt.Errorf("%s: id %s is not an integer in 0..%d", where, m["id"], maxTokenID)
		}
		if err := json.Unmarshal(m["content"], &a.Content); err != nil || a.Content == "" {
			return fmt.Errorf("%s: content %s is not a non-empty string", where, m["content"])
		}
		where = fmt.Sprintf("added token %q", a.Content)
		if sw, err := boolField(m, "single_word", where); err != nil {
			return err
		} else if sw {
			return fmt.Errorf("%s: single_word is not supported", where)
		}
		for _, f := range []struct {
			key string
			dst *bool
		}{{"lstrip", &a.LStrip}, {"rstrip", &a.RStrip}, {"normalized", &a.Normalized}, {"special", &a.Special}} {
			if *f.dst, err = boolField(m, f.key, where); err != nil {
				return err
			}
		}
		if id, ok := t.vocab[a.Content]; ok && id != a.ID {
			return fmt.Errorf("%s: id %d, but the vocabulary gives it id %d", where, a.ID, id)
		}
		if a.ID >= len(t.pieces) {
			t.pieces = append(t.pieces, make([]string, a.ID+1-len(t.pieces))...)
		}
		if p := t.pieces[a.ID]; p != "" && p != a.Content {
			return fmt.Errorf("%s: id %d is already token %q", where, a.ID, p)
		}
		t.pieces[a.ID] = a.Content
		t.added = append(t.added, a)
		if a.Normalized {
			if t.nfc {
				a.Content = norm.NFC.String(a.Content)
			}
			normeds = append(normeds, a)
		} else {
			raws = append(raws, a)
		}
	}
	t.raw, t.normed = newAddedMatcher(raws), newAddedMatcher(normeds)
	return nil
}

// VocabSize is one more than the largest id of the vocabulary or the added
// tokens.
func (t *HF) VocabSize() int { return len(t.pieces) }

// AddedTokens returns the added tokens in the file's order.
func (t *HF) AddedTokens() []AddedToken { return slices.Clone(t.added) }

// TokenID returns the id of a token as the file spells it.
// The spelling is a byte-level string such as "Ġthe", or an added token's
// content such as "<|im_end|>".
func (t *HF) TokenID(token string) (int, bool) {
	if id, ok := t.vocab[token]; ok {
		return id, true
	}
	for _, a := range t.added {
		if a.Content == token {
			return a.ID, true
		}
	}
	return 0, false
}

// Token returns the token of id as the file spells it.
func (t *HF) Token(id int) (string, bool) {
	if id < 0 || id >= len(t.pieces) || t.pieces[id] == "" {
		return "", false
	}
	return t.pieces[id], true
}

// Encode returns the ids of text, recognising added tokens wherever they are spelled.
// Special added tokens are included, as with Hugging Face's
// tokenizer.encode(text, add_special_tokens=False). Text that is not valid
// UTF-8 is encoded byte by byte and decodes back unchanged.
func (t *HF) Encode(text string) []int {
	var out []int
	t.raw.split(text, func(seg string, id int) {
		if id >= 0 {
			out = append(out, id)
			return
		}
		if t.nfc {
			seg = norm.NFC.String(seg)
		}
		t.normed.split(seg, func(seg string, id int) {
			if id >= 0 {
				out = append(out, id)
				return
			}
			out = t.encodeWords(seg, out)
		})
	})
	return out
}

// EncodePlain returns the ids of text with no added token recognised: the
// spelling <|im_end|> in text becomes ordinary tokens. Use it for text that
// must not be able to forge control tokens.
func (t *HF) EncodePlain(text string) []int {
	if t.nfc {
		text = norm.NFC.String(text)
	}
	return t.encodeWords(text, nil)
}

// encodeWords pre-tokenizes text and appends the BPE ids of each word.
func (t *HF) encodeWords(text string, out []int) []int {
	for i := 0; i < len(text); {
		end := t.pattern.next(text, i)
		for _, id := range t.word(text[i:end]) {
			out = append(out, int(id))
		}
		i = end
	}
	return out
}

// word returns the BPE ids of one pre-tokenized word, from the cache when
// it is there. The returned slice is shared and must not be modified.
func (t *HF) word(w string) []int32 {
	if ids, ok := t.cache.get(w); ok {
		return ids
	}
	ids := t.bpe(w)
	t.cache.put(w, ids)
	return ids
}

// bpe merges the bytes of w by rank.
// At each step the adjacent pair with the lowest merge rank, the leftmost
// of equals, becomes one token.
func (t *HF) bpe(w string) []int32 {
	if len(w) == 1 {
		return []int32{t.byteID[w[0]]}
	}
	if t.ignoreMerges {
		var b strings.Builder
		for i := 0; i < len(w); i++ {
			b.WriteRune(byteChar[w[i]])
		}
		if id, ok := t.vocab[b.String()]; ok {
			return []int32{int32(id)}
		}
	}
	sym := make([]int32, len(w))
	for i := 0; i < len(w); i++ {
		sym[i] = t.byteID[w[i]]
	}
	if len(sym) > longWord {
		return t.mergeLong(sym)
	}
	return t.mergeShort(sym)
}

// Decode returns the text of ids as the ByteLevel decoder gives it. It
// returns bytes that do not form valid UTF-8 as they are, where the
// tokenizers library writes U+FFFD. So decoding a sequence piece by piece
// and concatenating gives the same text. An id that is no token is an error
// naming it and its index.
func (t *HF) Decode(ids []int) (string, error) { return t.decode(ids, false) }

func (t *HF) decode(ids []int, skipSpecial bool) (string, error) {
	var b strings.Builder
	for i, id := range ids {
		if id < 0 || id >= len(t.pieces) || t.pieces[id] == "" {
			return "", fmt.Errorf("decode: id %d at index %d is not a token of this vocabulary", id, i)
		}
		if skipSpecial && t.special[id] {
			continue
		}
		b.WriteString(t.decoded[id])
	}
	return b.String(), nil
}

// DecodeSkipSpecial is Decode leaving out special added tokens such as <|im_start|>.
// It matches the library's decode with skip_special_tokens=True.
// Non-special added tokens, such as <tool_call> and <think>, stay.
func (t *HF) DecodeSkipSpecial(ids []int) (string, error) { return t.decode(ids, true) }

// Special reports whether id is an added token marked special.
func (t *HF) Special(id int) bool {
	return id >= 0 && id < len(t.special) && t.special[id]
}

// byteChar is GPT-2's bytes_to_unicode, which maps every byte string to printable text.
// The printable bytes stand for themselves, the others for U+0100 onwards
// in order.
var byteChar [256]rune

// charByte inverts byteChar.
var charByte = map[rune]byte{}

func init() {
	n := 0
	for b := range 256 {
		if b >= 0x21 && b <= 0x7e || b >= 0xa1 && b <= 0xac || b >= 0xae {
			byteChar[b] = rune(b)
		} else {
			byteChar[b] = rune(256 + n)
			n++
		}
		charByte[byteChar[b]] = byte(b)
	}
}

// byteLevelDecode maps a token's characters back to bytes.
// A token with a character outside the byte-level alphabet, such as an added
// token holding a space, is kept as its UTF-8 text, as the tokenizers
// library does.
func byteLevelDecode(tok string) string {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := charByte[r]
		if !ok {
			return tok
		}
		out = append(out, b)
	}
	return string(out)
}

// wordCache maps pre-tokenized words to their ids. It is cleared when it
// reaches cacheLimit entries, which bounds its memory on any input.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

const (
	cacheLimit   = 1 << 17
	cacheMaxWord = 256 // longer words are not cached
)

func (c *wordCache) get(w string) ([]int32, bool) {
	c.mu.RLock()
	ids, ok := c.m[w]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int32) {
	if len(w) > cacheMaxWord {
		return
	}
	c.mu.Lock()
	if len(c.m) >= cacheLimit {
		clear(c.m)
	}
	c.m[strings.Clone(w)] = ids
	c.mu.Unlock()
}
