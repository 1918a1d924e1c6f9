package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// readString reads b, a JSON string, as encoding/json reads it into a
// string. It is the UnmarshalJSON of the string fields with a method of
// their own. Calling encoding/json there would scan the string twice
// more, and most content needs no second decoder. What readString does
// not read itself, an invalid string included, goes to encoding/json.
func readString(b []byte) (string, error) {
	if s, ok := unquote(b); ok {
		return s, nil
	}
	var s string
	err := json.Unmarshal(b, &s)
	return s, err
}

// unquote reads b, a JSON string, as encoding/json does. ok is false
// when b is not one.
func unquote(b []byte) (s string, ok bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	in := b[1 : len(b)-1]
	r := 0
	for r < len(in) {
		c := in[r]
		if c == '\\' || c == '"' || c < 0x20 {
			break
		}
		if c < utf8.RuneSelf {
			r++
			continue
		}
		rr, size := utf8.DecodeRune(in[r:])
		if rr == utf8.RuneError && size == 1 {
			break
		}
		r += size
	}
	if r == len(in) {
		return string(in), true // no escapes: the bytes are the text
	}
	out := make([]byte, r, len(in)+utf8.UTFMax)
	copy(out, in[:r])
	for r < len(in) {
		switch c := in[r]; {
		case c == '\\':
			if r+1 >= len(in) {
				return "", false
			}
			switch e := in[r+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				rr := hex4(in[r:])
				if rr < 0 {
					return "", false
				}
				r += 6
				if utf16.IsSurrogate(rr) {
					// A pair makes one rune; a lone half is U+FFFD.
					if pair := utf16.DecodeRune(rr, hex4(in[r:])); pair != utf8.RuneError {
						r += 6
						out = utf8.AppendRune(out, pair)
						continue
					}
					rr = utf8.RuneError
				}
				out = utf8.AppendRune(out, rr)
				continue
			default:
				return "", false
			}
			r += 2
		case c == '"', c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			out = append(out, c)
			r++
		default:
			// Invalid UTF-8 reads as U+FFFD, a byte at a time.
			rr, size := utf8.DecodeRune(in[r:])
			out = utf8.AppendRune(out, rr)
			r += size
		}
	}
	return string(out), true
}

// hex4 reads the escape \uXXXX at the start of b; -1 when there is none.
func hex4(b []byte) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// logprobFields is Logprob without its methods: encoding/json's reading
// of it.
type logprobFields Logprob

// UnmarshalJSON reads a logprob. A response has one per token. The
// plain shape, each of "token", "logprob" and "bytes" at most once and
// in any order, is read here. Anything else, top_logprobs included, goes
// through encoding/json.
func (l *Logprob) UnmarshalJSON(data []byte) error {
	if out, ok := plainLogprob(data, *l); ok {
		*l = out
		return nil
	}
	return json.Unmarshal(data, (*logprobFields)(l))
}

// plainLogprob reads data, an object of the plain shape, over l. ok is
// false for any other data.
func plainLogprob(data []byte, l Logprob) (out Logprob, ok bool) {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return l, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return l, skipSpace(data, i+1) == len(data)
	}
	var seen [3]bool
	for {
		// A key of plain letters, then its value.
		if i == len(data) || data[i] != '"' {
			return l, false
		}
		end := i + 1
		for end < len(data) && data[end] != '"' && data[end] != '\\' {
			end++
		}
		if end == len(data) || data[end] != '"' {
			return l, false
		}
		key := string(data[i+1 : end])
		i = skipSpace(data, end+1)
		if i == len(data) || data[i] != ':' {
			return l, false
		}
		i = skipSpace(data, i+1)
		var n int
		switch key {
		case "token":
			if n = stringEnd(data, i); n < 0 || seen[0] {
				return l, false
			}
			s, ok := unquote(data[i:n])
			if !ok {
				return l, false
			}
			l.Token, seen[0] = s, true
		case "logprob":
			n = numberEnd(data, i)
			if n < 0 || seen[1] {
				return l, false
			}
			v, err := strconv.ParseFloat(string(data[i:n]), 64)
			if err != nil {
				return l, false
			}
			l.Logprob, seen[1] = v, true
		case "bytes":
			n = bytes.IndexByte(data[i:], ']')
			if n < 0 || seen[2] {
				return l, false
			}
			n += i + 1
			b, ok := byteArray(data[i:n])
			if !ok {
				return l, false
			}
			l.Bytes, seen[2] = b, true
		default:
			return l, false
		}
		i = skipSpace(data, n)
		switch {
		case i == len(data):
			return l, false
		case data[i] == ',':
			i = skipSpace(data, i+1)
		case data[i] == '}':
			return l, skipSpace(data, i+1) == len(data)
		default:
			return l, false
		}
	}
}

// stringEnd returns the index just past the JSON string at data[i:], or
// -1 when there is none.
func stringEnd(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// numberEnd returns the index just past the JSON number at data[i:], by
// JSON's grammar, or -1 when there is none.
func numberEnd(data []byte, i int) int {
	digits := func(j int) int {
		for j < len(data) && '0' <= data[j] && data[j] <= '9' {
			j++
		}
		return j
	}
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return -1
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		i = digits(i)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}
