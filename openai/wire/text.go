package wire

import (
	"encoding/json"
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
