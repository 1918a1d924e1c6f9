package atropos

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
)

// The scanner below is the group parser's hot path: a group of 16
// sequences of 4,096 tokens with logprobs is about 2 MB of JSON, and
// encoding/json's validate-then-decode passes plus a Compact pass cost
// several times this single pass, which validates the numeric fields,
// measures their shapes and writes them compacted.

// shape is what a numeric list scan learned. It holds the outer length
// and, for nested lists, each inner list's length.
type shape struct {
	outer int
	inner []int
}

type scanError struct {
	path []any
	msg  string
}

type scanner struct {
	raw []byte
	pos int
}

func (s *scanner) skipSpace() { s.pos = skipWS(s.raw, s.pos) }

func (s *scanner) eat(c byte) bool {
	if s.pos < len(s.raw) && s.raw[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

func (s *scanner) peek() byte {
	if s.pos < len(s.raw) {
		return s.raw[s.pos]
	}
	return 0
}

// scanNumbers checks that raw is exactly a list nested depth deep. Its
// leaves must be JSON numbers, integers when ints is set.
func scanNumbers(raw []byte, depth int, ints bool) (shape, *scanError) {
	s := scanner{raw: raw}
	_, sh, err := s.numbers(depth, ints, nil)
	if err != nil {
		return sh, err
	}
	s.skipSpace()
	if s.pos != len(raw) {
		return sh, &scanError{msg: "trailing data after the list"}
	}
	return sh, nil
}

// numbers scans, at the cursor, a list nested depth deep (1 to 3) of
// numbers, appending it compacted to dst.
func (s *scanner) numbers(depth int, ints bool, dst []byte) ([]byte, shape, *scanError) {
	var sh shape
	var idx [3]int
	dst, n, err := s.list(0, depth, ints, dst, &sh, &idx)
	sh.outer = n
	return dst, sh, err
}

// failAt is a scan error at the first level indices of idx.
func failAt(idx *[3]int, level int, msg string) *scanError {
	path := make([]any, level)
	for i := range level {
		path[i] = idx[i]
	}
	return &scanError{path: path, msg: msg}
}

// list scans the list at level, 0 outermost, of a list nested depth deep.
// It records in idx the index being scanned at each level. It records in
// sh the lengths of the lists at level 1.
func (s *scanner) list(level, depth int, ints bool, dst []byte, sh *shape, idx *[3]int) ([]byte, int, *scanError) {
	s.skipSpace()
	if !s.eat('[') {
		return dst, 0, failAt(idx, level, listMsg(depth-level, ints))
	}
	dst = append(dst, '[')
	if level == depth-1 {
		return s.leaves(level, ints, dst, idx)
	}
	n := 0
	s.skipSpace()
	if s.eat(']') {
		return append(dst, ']'), 0, nil
	}
	for {
		idx[level] = n
		if n > 0 {
			dst = append(dst, ',')
		}
		var m int
		var err *scanError
		if dst, m, err = s.list(level+1, depth, ints, dst, sh, idx); err != nil {
			return dst, n, err
		}
		if level == 0 {
			sh.inner = append(sh.inner, m)
		}
		n++
		s.skipSpace()
		if s.eat(']') {
			return append(dst, ']'), n, nil
		}
		if !s.eat(',') {
			return dst, n, failAt(idx, level+1, "malformed list")
		}
	}
}

// leaves scans the numbers of a list whose '[' was just read, through its
// ']'. It is the hot loop of a group (tens of thousands of numbers per
// sequence): one pass, one append per number and its comma.
func (s *scanner) leaves(level int, ints bool, dst []byte, idx *[3]int) ([]byte, int, *scanError) {
	raw := s.raw
	p := skipWS(raw, s.pos)
	if p < len(raw) && raw[p] == ']' {
		s.pos = p + 1
		return append(dst, ']'), 0, nil
	}
	n := 0
	for {
		idx[level] = n
		start := p
		if p < len(raw) && raw[p] == '-' {
			p++
		}
		d := p
		p = digits(raw, p)
		if p == d || raw[d] == '0' && p-d > 1 {
			s.pos = start
			return dst, n, failAt(idx, level+1, badNumber(ints))
		}
		if p < len(raw) && (raw[p] == '.' || raw[p] == 'e' || raw[p] == 'E') {
			var msg string
			if p, msg = fraction(raw, p, ints); msg != "" {
				s.pos = start
				return dst, n, failAt(idx, level+1, msg)
			}
		}
		n++
		if p < len(raw) && raw[p] == ',' {
			p++
			dst = append(dst, raw[start:p]...)
		} else {
			dst = append(dst, raw[start:p]...)
			p = skipWS(raw, p)
			if p < len(raw) && raw[p] == ']' {
				s.pos = p + 1
				return append(dst, ']'), n, nil
			}
			if p >= len(raw) || raw[p] != ',' {
				s.pos = p
				return dst, n, failAt(idx, level+1, "malformed list")
			}
			p++
			dst = append(dst, ',')
		}
		p = skipWS(raw, p)
	}
}

// fraction scans the fraction and exponent of a number whose integer part
// ends at p. It returns the number's end, or a message.
func fraction(raw []byte, p int, ints bool) (int, string) {
	if raw[p] == '.' {
		p++
		d := p
		if p = digits(raw, p); p == d {
			return p, badNumber(ints)
		}
	}
	if p < len(raw) && (raw[p] == 'e' || raw[p] == 'E') {
		p++
		if p < len(raw) && (raw[p] == '+' || raw[p] == '-') {
			p++
		}
		d := p
		if p = digits(raw, p); p == d {
			return p, badNumber(ints)
		}
	}
	if ints {
		return p, "Input should be a valid integer, got a number with a fractional part"
	}
	return p, ""
}

// skipWS returns the first position from p that is not JSON whitespace.
func skipWS(raw []byte, p int) int {
	for p < len(raw) {
		switch raw[p] {
		case ' ', '\t', '\n', '\r':
			p++
		default:
			return p
		}
	}
	return p
}

// digits returns the end of the run of ASCII digits starting at p. It
// tests eight bytes at a time: in each byte of x, x-'0' borrows into the
// high bit below '0' and x+('9'^0x7f) carries into it above '9'; a carry
// or borrow only reaches later bytes, past the first non-digit, so the
// lowest flagged byte is the first non-digit.
func digits(raw []byte, p int) int {
	for p+8 <= len(raw) {
		x := binary.LittleEndian.Uint64(raw[p:])
		if m := ((x - 0x3030303030303030) | (x + 0x4646464646464646)) & 0x8080808080808080; m != 0 {
			return p + bits.TrailingZeros64(m)/8
		}
		p += 8
	}
	for p < len(raw) && raw[p]-'0' < 10 {
		p++
	}
	return p
}

func badNumber(ints bool) string {
	if ints {
		return "Input should be a valid integer"
	}
	return "Input should be a valid number"
}

// str scans a JSON string at the cursor and returns its decoded value.
func (s *scanner) str() (string, bool) {
	if !s.eat('"') {
		return "", false
	}
	start := s.pos
	escaped := false
	for s.pos < len(s.raw) {
		switch c := s.raw[s.pos]; {
		case c == '"':
			s.pos++
			if !escaped {
				return string(s.raw[start : s.pos-1]), true
			}
			var v string
			if json.Unmarshal(s.raw[start-1:s.pos], &v) != nil {
				return "", false
			}
			return v, true
		case c == '\\':
			escaped = true
			s.pos += 2
		case c < 0x20:
			return "", false
		default:
			s.pos++
		}
	}
	return "", false
}

// skipValue moves the cursor past one JSON value, finding its extent
// only; the caller validates the slice.
func (s *scanner) skipValue() bool {
	s.skipSpace()
	switch s.peek() {
	case '"':
		_, ok := s.str()
		return ok
	case '{', '[':
		depth := 0
		for s.pos < len(s.raw) {
			switch s.raw[s.pos] {
			case '"':
				if _, ok := s.str(); !ok {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.pos++
					return true
				}
			}
			s.pos++
		}
		return false
	case 0:
		return false
	default:
		start := s.pos
		for s.pos < len(s.raw) {
			switch s.raw[s.pos] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.pos > start
			}
			s.pos++
		}
		return s.pos > start
	}
}

func listMsg(depth int, ints bool) string {
	leaf := "number"
	if ints {
		leaf = "integer"
	}
	switch depth {
	case 1:
		return "Input should be a valid list of " + leaf + "s"
	case 2:
		return "Input should be a valid list of lists of " + leaf + "s"
	default:
		return "Input should be a valid list nested 3 deep of " + leaf + "s"
	}
}
