package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// The fixtures under testdata/hf are written by testdata/hf/gen.mjs with
// Hugging Face's tokenizers library; see that file.

var llama3Path = flag.String("llama3", "", "path to Llama 3's tokenizer.json (not committed: Meta's licence); checks testdata/hf/llama3.ids.jsonl.gz against it")

const hfDir = "testdata/hf"

// readLines reads a gzip-compressed file of JSON lines into values of T.
func readLines[T any](t testing.TB, name string) []T {
	t.Helper()
	f, err := os.Open(filepath.Join(hfDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<24)
	var out []T
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s line %d: %v", name, len(out)+1, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

var (
	loadMu  sync.Mutex
	loaded  = map[string]*HF{}
	loadErr = map[string]error{}
	strs    []string
)

// hfTokenizer loads a committed tokenizer.json once per test binary.
func hfTokenizer(t testing.TB, name string) *HF {
	t.Helper()
	loadMu.Lock()
	defer loadMu.Unlock()
	if _, ok := loaded[name]; !ok {
		loaded[name], loadErr[name] = LoadHF(filepath.Join(hfDir, name+".json.gz"))
	}
	if err := loadErr[name]; err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return loaded[name]
}

// raceStride is the sampling of the fixture strings under -race.
const raceStride = 5

func fixtureStrings(t testing.TB) []string {
	t.Helper()
	if strs == nil {
		strs = readLines[string](t, "strings.jsonl.gz")
	}
	if len(strs) < 10000 {
		t.Fatalf("fixture has %d strings, want at least 10000", len(strs))
	}
	return strs
}

type idsRecord struct {
	IDs   []int   `json:"ids"`
	Plain []int   `json:"plain"`
	Dec   *string `json:"dec"`
	NFC   *string `json:"nfc"`
	Skip  *string `json:"dec_skip"`
}

// checkIDs compares Encode, EncodePlain and Decode with the reference
// for every fixture string, reporting the first few differences.
func checkIDs(t *testing.T, tok *HF, name string) {
	in := fixtureStrings(t)
	want := readLines[idsRecord](t, name+".ids.jsonl.gz")
	if len(want) != len(in) {
		t.Fatalf("%s: %d records for %d strings", name, len(want), len(in))
	}
	bad := 0
	report := func(format string, args ...any) {
		t.Helper()
		if bad++; bad <= 5 {
			t.Errorf(format, args...)
		}
	}
	normDiff := 0
	for i, s := range in {
		if raceEnabled && i%raceStride != 0 {
			continue
		}
		w := want[i]
		if tok.nfc && w.NFC != nil && norm.NFC.String(s) != *w.NFC {
			// The library normalizes with Unicode data older than Go's: a
			// few combining marks added since (U+0D3B, U+0D3C, ...) have no
			// combining class there and are not reordered. Everything
			// after normalization must still match.
			if got := tok.encodeWords(*w.NFC, nil); !slices.Equal(got, w.Plain) {
				report("%s: encode of the library's normalization %q\n got %v\nwant %v", name, *w.NFC, got, w.Plain)
			}
			normDiff++
			t.Logf("%s: NFC differs from the library's (older Unicode data): %+q", name, s)
			continue
		}
		if got := tok.Encode(s); !slices.Equal(got, w.IDs) {
			report("%s: Encode(%q)\n got %v\nwant %v", name, s, got, w.IDs)
		}
		if got := tok.EncodePlain(s); !slices.Equal(got, w.Plain) {
			report("%s: EncodePlain(%q)\n got %v\nwant %v", name, s, got, w.Plain)
		}
		wantDec := s
		if w.Dec != nil {
			wantDec = *w.Dec
		}
		got, err := tok.Decode(w.IDs)
		if err != nil {
			report("%s: Decode of %q: %v", name, s, err)
		} else if got != wantDec {
			report("%s: Decode(%v) = %q, want %q", name, w.IDs, got, wantDec)
		}
		if w.Skip != nil {
			wantDec = *w.Skip
		}
		if got, err := tok.DecodeSkipSpecial(w.IDs); err != nil || got != wantDec {
			report("%s: DecodeSkipSpecial(%v) = %q, %v; want %q", name, w.IDs, got, err, wantDec)
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d differences over %d strings", name, bad, len(in))
	}
	if normDiff > len(in)/1000 {
		t.Errorf("%s: NFC differs from the library's on %d of %d strings, more than the 0.1%% expected", name, normDiff, len(in))
	}
}

func TestHFQwen25MatchesReference(t *testing.T) { checkIDs(t, hfTokenizer(t, "qwen2.5"), "qwen2.5") }

func TestHFQwen3MatchesReference(t *testing.T) {
	if raceEnabled {
		t.Skip("covered by the Qwen2.5 and GPT-2 files under -race; runs without it")
	}
	checkIDs(t, hfTokenizer(t, "qwen3"), "qwen3")
}

func TestHFGPT2MatchesReference(t *testing.T) { checkIDs(t, hfTokenizer(t, "gpt2"), "gpt2") }

// TestHFLlama3MatchesReference needs -llama3=PATH to Llama 3's
// tokenizer.json, which is not committed.
func TestHFLlama3MatchesReference(t *testing.T) {
	if *llama3Path == "" {
		t.Skip("no -llama3=PATH given")
	}
	tok, err := LoadHF(*llama3Path)
	if err != nil {
		t.Fatal(err)
	}
	checkIDs(t, tok, "llama3")
}

// TestHFPreTokenizerPatterns compares the scanners with the tokenizers
// library's pre-tokenizers (Oniguruma regexes) piece by piece.
func TestHFPreTokenizerPatterns(t *testing.T) {
	in := fixtureStrings(t)
	want := readLines[map[string][]int](t, "splits.jsonl.gz")
	pats := map[string]pattern{"gpt2": patternGPT2, "llama3": patternLlama3, "qwen2": patternQwen2}
	for name, p := range pats {
		t.Run(name, func(t *testing.T) {
			bad := 0
			for i, s := range in {
				var got []int
				for k := 0; k < len(s); {
					e := p.next(s, k)
					got = append(got, e-k)
					k = e
				}
				if !slices.Equal(got, want[i][name]) {
					if bad++; bad <= 5 {
						t.Errorf("%q: piece lengths\n got %v\nwant %v", s, got, want[i][name])
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d strings differ", bad, len(in))
			}
		})
	}
}

func TestHFRoundTrip(t *testing.T) {
	tok := hfTokenizer(t, "qwen2.5")
	in := append(fixtureStrings(t)[:2000:2000], "\xff\xfe invalid \xc3", "a\x00b", strings.Repeat("\U0001F600", 50))
	for _, s := range in {
		for _, enc := range []func(string) []int{tok.Encode, tok.EncodePlain} {
			got, err := tok.Decode(enc(s))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			// NFC keeps bytes that are not valid UTF-8 as they are.
			if want := norm.NFC.String(s); got != want {
				t.Errorf("Decode(Encode(%q)) = %q, want %q", s, got, want)
			}
		}
	}
}

func TestHFDecodeRejectsUnknownID(t *testing.T) {
	tok := hfTokenizer(t, "gpt2")
	for _, ids := range [][]int{{-1}, {tok.VocabSize()}, {1, 2, 1 << 30}} {
		if _, err := tok.Decode(ids); err == nil || !strings.Contains(err.Error(), "is not a token") {
			t.Errorf("Decode(%v) error = %v, want one naming the id", ids, err)
		}
	}
}

func TestHFTokenLookup(t *testing.T) {
	tok := hfTokenizer(t, "qwen2.5")
	tests := []struct {
		token string
		id    int
	}{{"<|im_start|>", 151644}, {"<|im_end|>", 151645}, {"<|endoftext|>", 151643}, {"Hello", 9707}, {"Ġworld", 1879}}
	for _, tt := range tests {
		id, ok := tok.TokenID(tt.token)
		if !ok || id != tt.id {
			t.Errorf("TokenID(%q) = %d, %v; want %d", tt.token, id, ok, tt.id)
		}
		if got, ok := tok.Token(tt.id); !ok || got != tt.token {
			t.Errorf("Token(%d) = %q, %v; want %q", tt.id, got, ok, tt.token)
		}
	}
	if got, want := tok.VocabSize(), 151665; got != want {
		t.Errorf("VocabSize = %d, want %d", got, want)
	}
}

// TestParseHFErrors checks that what is not supported is named.
func TestParseHFErrors(t *testing.T) {
	const model = `"model":{"type":"BPE","vocab":VOCAB,"merges":[]}`
	var vocab strings.Builder
	vocab.WriteString("{")
	for b := range 256 {
		if b > 0 {
			vocab.WriteString(",")
		}
		j, _ := json.Marshal(string(byteChar[b]))
		vocab.Write(j)
		vocab.WriteString(":")
		vocab.WriteString(itoa(b))
	}
	vocab.WriteString("}")
	base := func(s string) string { return strings.ReplaceAll(s, "VOCAB", vocab.String()) }
	okPre := `"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},"decoder":{"type":"ByteLevel"}`
	tests := []struct {
		name, json, want string
	}{
		{"version", `{"version":"2.0",` + model + `,` + okPre + `}`, `version "2.0"`},
		{"unknown field", `{"version":"1.0","extra":1,` + model + `,` + okPre + `}`, `unsupported field "extra"`},
		{"model type", `{"version":"1.0","model":{"type":"Unigram"},` + okPre + `}`, `type "Unigram" is not supported`},
		{"byte fallback", `{"version":"1.0","model":{"type":"BPE","byte_fallback":true,"vocab":{},"merges":[]},` + okPre + `}`, `byte_fallback`},
		{"not byte level", `{"version":"1.0","model":{"type":"BPE","vocab":{"a":0},"merges":[]},` + okPre + `}`, `no token for byte 0x00`},
		{"merge not in vocab", `{"version":"1.0","model":{"type":"BPE","vocab":VOCAB,"merges":["a b"]},` + okPre + `}`, `merge 0 "a b"`},
		{"normalizer", `{"version":"1.0",` + model + `,"normalizer":{"type":"NFKC"},` + okPre + `}`, `normalizer: type "NFKC"`},
		{"pre-tokenizer", `{"version":"1.0",` + model + `,"pre_tokenizer":{"type":"Metaspace"},"decoder":{"type":"ByteLevel"}}`, `type "Metaspace"`},
		{"no regex", `{"version":"1.0",` + model + `,"pre_tokenizer":{"type":"ByteLevel","use_regex":false},"decoder":{"type":"ByteLevel"}}`, `without use_regex`},
		{"prefix space", `{"version":"1.0",` + model + `,"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":true},"decoder":{"type":"ByteLevel"}}`, `add_prefix_space`},
		{"regex", `{"version":"1.0",` + model + `,"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\w+|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","use_regex":false}]},"decoder":{"type":"ByteLevel"}}`, `regex "\\w+|\\s+" is not supported`},
		{"decoder", `{"version":"1.0",` + model + `,"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"WordPiece"}}`, `decoder: type "WordPiece"`},
		{"post-processor", `{"version":"1.0",` + model + `,` + okPre + `,"post_processor":{"type":"BertProcessing"}}`, `post_processor: type "BertProcessing"`},
		{"single word", `{"version":"1.0",` + model + `,` + okPre + `,"added_tokens":[{"id":300,"content":"<x>","single_word":true}]}`, `added token "<x>": single_word`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHF([]byte(base(tt.json)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// FuzzParseHF feeds ParseHF damaged files: it must return an error or a
// tokenizer, never panic.
func FuzzParseHF(f *testing.F) {
	var vocab strings.Builder
	vocab.WriteString("{")
	for b := range 256 {
		if b > 0 {
			vocab.WriteString(",")
		}
		j, _ := json.Marshal(string(byteChar[b]))
		vocab.Write(j)
		vocab.WriteString(":" + itoa(b))
	}
	vocab.WriteString(`,"ab":256}`)
	f.Add(`{"version":"1.0","model":{"type":"BPE","vocab":` + vocab.String() + `,"merges":["a b"]},"pre_tokenizer":{"type":"ByteLevel","use_regex":true},"decoder":{"type":"ByteLevel"},"added_tokens":[{"id":257,"content":"<x>","special":true,"lstrip":true}]}`)
	f.Add(`{"version":"1.0","model":{"type":"BPE","vocab":` + vocab.String() + `,"merges":[["a","b"]]},"normalizer":{"type":"NFC"},"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":` + strconvQuote(regexQwen2) + `},"behavior":"Isolated","invert":false},{"type":"ByteLevel","use_regex":false}]},"decoder":{"type":"ByteLevel"}}`)
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseHF([]byte(s))
		if err != nil {
			return
		}
		ids := tok.Encode("ab <x> abc")
		if _, err := tok.Decode(ids); err != nil {
			t.Fatalf("Decode of Encode's ids: %v", err)
		}
	})
}

func strconvQuote(s string) string {
	j, _ := json.Marshal(s)
	return string(j)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// FuzzHFRoundTrip checks that decoding what Encode and EncodePlain return gives back the text.
// The text comes back NFC-normalized, as Qwen2.5's normalizer does, bytes
// that are not valid UTF-8 included.
func FuzzHFRoundTrip(f *testing.F) {
	for _, s := range []string{"", "Hello world", "it's 12345", "<|im_start|>user\nhi<|im_end|>", "  \n\t x", "e\u0301", "\xff", "👨‍👩‍👧"} {
		f.Add(s)
	}
	tok := hfTokenizer(f, "qwen2.5")
	f.Fuzz(func(t *testing.T, s string) {
		want := norm.NFC.String(s) // Qwen2.5 normalizes; invalid bytes stay as they are
		for _, enc := range []func(string) []int{tok.Encode, tok.EncodePlain} {
			got, err := tok.Decode(enc(s))
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, got, want)
			}
		}
	})
}

// benchCorpus is the fixture strings concatenated: about 1.2 MB of mixed
// scripts, code, emoji, white-space runs and special tokens.
func benchCorpus(b *testing.B) string {
	f, err := os.Open(filepath.Join(hfDir, "strings.jsonl.gz"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	var text strings.Builder
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var s string
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			b.Fatal(err)
		}
		text.WriteString(s)
	}
	return text.String()
}

// sourceCorpus is the module's own Go and Markdown files (testdata left
// out) concatenated in path order: natural text and code. bench.mjs reads
// the same files.
func sourceCorpus(b *testing.B) string {
	var text strings.Builder
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && path != "..") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".md")) {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			text.Write(data)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return text.String()
}

// BenchmarkHFEncode measures Encode over the fixture corpus, the module's text and single strings.
// The fixture corpus runs with the word cache warm, as in a training run's
// steady state, and cold, cleared before each pass. The module's source and
// docs, and the fixture strings one by one, run warm.
// testdata/hf/bench.mjs measures the tokenizers library on the same corpus.
func BenchmarkHFEncode(b *testing.B) {
	tok := hfTokenizer(b, "qwen2.5")
	corpus := benchCorpus(b)
	ntok := len(tok.Encode(corpus))
	for _, warm := range []bool{true, false} {
		name := map[bool]string{true: "warm", false: "cold"}[warm]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(corpus)))
			for range b.N {
				if !warm {
					tok.cache.mu.Lock()
					clear(tok.cache.m)
					tok.cache.mu.Unlock()
				}
				tok.Encode(corpus)
			}
			b.ReportMetric(float64(ntok)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
	// Natural text and code.
	b.Run("source", func(b *testing.B) {
		src := sourceCorpus(b)
		n := len(tok.Encode(src))
		b.SetBytes(int64(len(src)))
		b.ResetTimer()
		for range b.N {
			tok.Encode(src)
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
	})
	// The strings one by one, on one goroutine.
	b.Run("strings", func(b *testing.B) {
		in := fixtureStrings(b)
		n := 0
		for _, s := range in {
			n += len(tok.Encode(s))
		}
		b.ResetTimer()
		for range b.N {
			for _, s := range in {
				tok.Encode(s)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
	})
}

// TestHFConcurrentEncode encodes from several goroutines at once (the word
// cache is shared) and checks every result against the reference.
func TestHFConcurrentEncode(t *testing.T) {
	tok := hfTokenizer(t, "gpt2")
	tok.cache.mu.Lock()
	clear(tok.cache.m) // start cold, so that the goroutines fill the cache together
	tok.cache.mu.Unlock()
	in := fixtureStrings(t)[:2000]
	want := readLines[idsRecord](t, "gpt2.ids.jsonl.gz")
	const workers = 4
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(in); i += workers / 2 { // overlapping halves: the same words race for the cache
				if got := tok.Encode(in[i]); !slices.Equal(got, want[i].IDs) {
					errs[w] = fmt.Errorf("Encode(%q) = %v, want %v", in[i], got, want[i].IDs)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestHFMergeLongMatchesShort checks the heap merge against the scanning
// merge on every pre-tokenized word of the fixture strings, however short.
func TestHFMergeLongMatchesShort(t *testing.T) {
	tok := hfTokenizer(t, "qwen2.5")
	words := 0
	for i, s := range fixtureStrings(t) {
		if raceEnabled && i%raceStride != 0 {
			continue
		}
		for k := 0; k < len(s); {
			e := tok.pattern.next(s, k)
			if e-k > 1 {
				sym := make([]int32, e-k)
				for j := range sym {
					sym[j] = tok.byteID[s[k+j]]
				}
				short := tok.mergeShort(slices.Clone(sym))
				long := tok.mergeLong(sym)
				if !slices.Equal(short, long) {
					t.Fatalf("word %q: mergeLong %v, mergeShort %v", s[k:e], long, short)
				}
				words++
			}
			k = e
		}
	}
	t.Logf("%d words", words)
}

// TestHFLongWord encodes words of a megabyte, which a quadratic merge
// would not finish.
func TestHFLongWord(t *testing.T) {
	tok := hfTokenizer(t, "qwen2.5")
	n := 1 << 20
	if raceEnabled {
		n = 1 << 16
	}
	for _, s := range []string{strings.Repeat("a", n), strings.Repeat("ab", n/2), strings.Repeat("😀", n/4), strings.Repeat(" ", n)} {
		got, err := tok.Decode(tok.Encode(s))
		if err != nil || got != s {
			t.Errorf("round trip of a %d-byte word failed (err %v)", len(s), err)
		}
	}
}
