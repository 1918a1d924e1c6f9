package wire

import (
	"encoding/json"
	"errors"
	"testing"
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
