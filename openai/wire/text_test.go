package wire

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"syscall"
	"testing"
	"time"
)

// TestReadString checks readString against encoding/json: the same text,
// and an error where it gives one.
func TestReadString(t *testing.T) {
	for _, in := range []string{
		`""`, `"plain text"`, `"Dot has 91 jars of 23 coins."`, `"line\nbreak"`, `"a \"quote\""`,
		`"\u00e9t\u00e9"`, `"été, 夏"`, "\"bad \xff byte\"", "\"control \x01 byte\"", `"a"b"`, `"\"`,
		`"unterminated`, `plain`, `"`, ``, `"tab	inside"`, `"\ud800"`, `"\ud83d\ude00 pair"`, `"\ude00\ud83d wrong order"`,
		`"\ud83d\u0041 half"`, `"\/\b\f\r\t"`, `"\'"`, `"\x"`, `"\u12"`, `"\u12g4"`, `"\uD83D\uDE00"`, `"a\"`, `"\\"`,
		"\"\xe2\x82\"", "\"\xf0\x9f\x98\x80\\n\xc3\"",
	} {
		t.Run(in, func(t *testing.T) {
			var want string
			werr := json.Unmarshal([]byte(in), &want)
			got, err := readString([]byte(in))
			if (err != nil) != (werr != nil) || err == nil && got != want {
				t.Errorf("readString(%q) = %q, %v; want %q, %v", in, got, err, want, werr)
			}
		})
	}
}

// FuzzReadString checks readString against encoding/json on any input.
func FuzzReadString(f *testing.F) {
	for _, s := range []string{`""`, `"plain"`, `"a\nb"`, "\"\xff\"", `"é"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want string
		werr := json.Unmarshal(in, &want)
		got, err := readString(in)
		if (err != nil) != (werr != nil) || err == nil && got != want {
			t.Errorf("readString(%q) = %q, %v; want %q, %v", in, got, err, want, werr)
		}
	})
}

// BenchmarkReadString reads an agent's message, as a request's content,
// with encoding/json (the reference) and with readString.
func BenchmarkReadString(b *testing.B) {
	in := []byte(`"Dot has 91 jars of 23 coins. Gus has 19 jars of 83 coins. Gus gets 49 more. How many coins do they have in all?"`)
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s string
			if err := json.Unmarshal(in, &s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("readString", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := readString(in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// readBytesReference is Bytes.UnmarshalJSON as it was, through
// encoding/json alone.
func readBytesReference(data []byte) (Bytes, error) {
	if string(data) == "null" {
		return nil, nil
	}
	var ints []int
	if err := json.Unmarshal(data, &ints); err != nil {
		return nil, err
	}
	out := make(Bytes, len(ints))
	for i, v := range ints {
		if v < 0 || v > 255 {
			return nil, errors.New("out of range")
		}
		out[i] = byte(v)
	}
	return out, nil
}

// TestBytesMatchesReference checks Bytes.UnmarshalJSON against the
// reference: the same bytes, and an error where it gives one.
func TestBytesMatchesReference(t *testing.T) {
	for _, in := range []string{
		`[]`, `[0]`, `[104,195,169]`, ` [ 1 , 2 ] `, `[255]`, `[256]`, `[-1]`, `[01]`, `[1.0]`, `[1e2]`, `[1,]`,
		`[1 2]`, `[1]x`, `null`, `[`, ``, `["1"]`, `[0000]`, `[99999999999999999999]`, "[1,\n\t2]",
	} {
		t.Run(in, func(t *testing.T) {
			want, werr := readBytesReference([]byte(in))
			var got Bytes
			err := got.UnmarshalJSON([]byte(in))
			if (err != nil) != (werr != nil) || err == nil && (string(got) != string(want) || (got == nil) != (want == nil)) {
				t.Errorf("UnmarshalJSON(%q) = %v, %v; want %v, %v", in, got, err, want, werr)
			}
		})
	}
}

// FuzzBytes checks Bytes.UnmarshalJSON against the reference on any
// input.
func FuzzBytes(f *testing.F) {
	for _, s := range []string{`[]`, `[1,2,255]`, `[256]`, ` [ 0 ] `, `[01]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want, werr := readBytesReference(in)
		var got Bytes
		err := got.UnmarshalJSON(in)
		if (err != nil) != (werr != nil) || err == nil && (string(got) != string(want) || (got == nil) != (want == nil)) {
			t.Errorf("UnmarshalJSON(%q) = %v, %v; want %v, %v", in, got, err, want, werr)
		}
	})
}

// BenchmarkBytes reads one token's bytes, as a logprob carries them,
// with the reference and with Bytes.UnmarshalJSON.
func BenchmarkBytes(b *testing.B) {
	in := []byte(`[60,124,116,111,111,108,95,99,97,108,108,124,62]`)
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := readBytesReference(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Bytes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got Bytes
			if err := got.UnmarshalJSON(in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// readLogprobReference reads a logprob as encoding/json did before
// Logprob had a method of its own.
func readLogprobReference(data []byte) (Logprob, error) {
	var l logprobFields
	err := json.Unmarshal(data, &l)
	return Logprob(l), err
}

// TestLogprobMatchesReference checks Logprob.UnmarshalJSON against
// encoding/json's reading: the same logprob, and an error where it
// gives one.
func TestLogprobMatchesReference(t *testing.T) {
	for _, in := range []string{
		`{"token":"token_id:263","logprob":-0.7894896268844604,"bytes":[60,124,116]}`,
		`{"token":"a","logprob":0,"bytes":[97]}`, ` { "bytes" : [ ] , "logprob" : -1e-3 , "token" : "\n" } `, `{}`,
		`{"token":"a","logprob":0,"bytes":[97],"top_logprobs":[{"token":"b","logprob":-1,"bytes":[98]}]}`,
		`{"token":"a","token":"b"}`, `{"Token":"a"}`, `{"tok\u0065n":"a"}`, `{"token":null}`, `{"logprob":01}`,
		`{"logprob":1.}`, `{"logprob":-}`, `{"logprob":1e400}`, `{"bytes":[256]}`, `{"bytes":null}`, `{"bytes":"a]"}`,
		`{"token":"a",}`, `{"token":"a"}x`, `{"token":"a"`, `{"token":5}`, `{"other":1}`, `[]`, `null`, ``,
		"{\"token\":\"\xff\"}", `{"token":"a\"b"}`, `{"logprob":-0.5E+2}`,
	} {
		t.Run(in, func(t *testing.T) {
			want, werr := readLogprobReference([]byte(in))
			var got Logprob
			err := got.UnmarshalJSON([]byte(in))
			if (err != nil) != (werr != nil) || err == nil && !reflect.DeepEqual(got, want) {
				t.Errorf("UnmarshalJSON(%q) = %+v, %v; want %+v, %v", in, got, err, want, werr)
			}
		})
	}
}

// FuzzLogprob checks Logprob.UnmarshalJSON against encoding/json's
// reading on any input.
func FuzzLogprob(f *testing.F) {
	for _, s := range []string{`{"token":"token_id:263","logprob":-0.78,"bytes":[60,124]}`, `{}`, `{"logprob":1e5}`, `{"token":"\u00e9"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want, werr := readLogprobReference(in)
		var got Logprob
		err := got.UnmarshalJSON(in)
		if (err != nil) != (werr != nil) || err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("UnmarshalJSON(%q) = %+v, %v; want %+v, %v", in, got, err, want, werr)
		}
	})
}

// BenchmarkServeAnswer decodes an answer of delegate serve with a
// logprob and byte array per token (the router's first turn: 61 tokens,
// 157 prompt ids), with encoding/json's reading of logprobs (the
// reference) and with Logprob's own.
func BenchmarkServeAnswer(b *testing.B) {
	body, err := os.ReadFile("../../trajectory/gateway/testdata/serve-router.json")
	if err != nil {
		b.Fatal(err)
	}
	type referenceChoice struct {
		Index        int     `json:"index"`
		Message      Message `json:"message"`
		FinishReason string  `json:"finish_reason"`
		Logprobs     *struct {
			Content []logprobFields `json:"content"`
		} `json:"logprobs"`
	}
	type referenceResponse struct {
		ChatResponse
		Choices []referenceChoice `json:"choices"` // shadows ChatResponse's
	}
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := processCPU()
		for b.Loop() {
			var r referenceResponse
			if err := json.Unmarshal(body, &r); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	})
	b.Run("Logprob", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := processCPU()
		for b.Loop() {
			var r ChatResponse
			if err := json.Unmarshal(body, &r); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	})
}

// processCPU is this process's user and system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
