package api

import (
	"bytes"
	"encoding/json"
)

// The scanner below is the group parser's hot path: a group of 16
// sequences of 4,096 tokens with logprobs is about 2 MB of JSON, and
// encoding/json's validate-then-decode passes plus a Compact pass cost
// several times this single pass, which validates the numeric fields,
// measures their shapes and writes them compacted.

// shape is what a numeric list scan learned: the outer length and, for
// nested lists, the length of each inner list.
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

func (s *scanner) skipSpace() {
	for s.pos < len(s.raw) {
		switch s.raw[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

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

// scanNumbers checks that raw is exactly a list nested depth deep whose
// leaves are JSON numbers (integers when ints is set).
func scanNumbers(raw []byte, depth int, ints bool) (shape, *scanError) {
	s := scanner{raw: raw}
	var out bytes.Buffer
	sh, err := s.numbers(depth, ints, &out)
	if err != nil {
		return sh, err
	}
	s.skipSpace()
	if s.pos != len(raw) {
		return sh, &scanError{msg: "trailing data after the list"}
	}
	return sh, nil
}

// numbers scans, at the cursor, a list nested depth deep of numbers,
// writing it compacted to out.
func (s *scanner) numbers(depth int, ints bool, out *bytes.Buffer) (shape, *scanError) {
	var sh shape
	var idx [3]int
	fail := func(level int, msg string) *scanError {
		path := make([]any, level)
		for i := range level {
			path[i] = idx[i]
		}
		return &scanError{path: path, msg: msg}
	}
	var list func(level int) (int, *scanError)
	list = func(level int) (int, *scanError) {
		s.skipSpace()
		if !s.eat('[') {
			return 0, fail(level, listMsg(depth-level, ints))
		}
		out.WriteByte('[')
		n := 0
		s.skipSpace()
		if s.eat(']') {
			out.WriteByte(']')
			return 0, nil
		}
		for {
			if level < 3 {
				idx[level] = n
			}
			if n > 0 {
				out.WriteByte(',')
			}
			if level == depth-1 {
				if msg := s.number(ints, out); msg != "" {
					return n, fail(level+1, msg)
				}
			} else {
				m, err := list(level + 1)
				if err != nil {
					return n, err
				}
				if level == 0 && depth >= 2 {
					sh.inner = append(sh.inner, m)
				}
			}
			n++
			s.skipSpace()
			if s.eat(']') {
				out.WriteByte(']')
				return n, nil
			}
			if !s.eat(',') {
				return n, fail(level+1, "malformed list")
			}
			s.skipSpace()
		}
	}
	n, err := list(0)
	sh.outer = n
	return sh, err
}

// number scans one JSON number at the cursor by the JSON grammar and
// copies it to out; it returns a message when there is none.
func (s *scanner) number(ints bool, out *bytes.Buffer) string {
	raw, start := s.raw, s.pos
	p := start
	if p < len(raw) && raw[p] == '-' {
		p++
	}
	d := p
	p = digits(raw, p)
	if p == d || raw[d] == '0' && p-d > 1 {
		return badNumber(ints)
	}
	frac := false
	if p < len(raw) && raw[p] == '.' {
		frac = true
		p++
		d, p = p, digits(raw, p)
		if p == d {
			return badNumber(ints)
		}
	}
	if p < len(raw) && (raw[p] == 'e' || raw[p] == 'E') {
		frac = true
		p++
		if p < len(raw) && (raw[p] == '+' || raw[p] == '-') {
			p++
		}
		d, p = p, digits(raw, p)
		if p == d {
			return badNumber(ints)
		}
	}
	if frac && ints {
		return "Input should be a valid integer, got a number with a fractional part"
	}
	out.Write(raw[start:p])
	s.pos = p
	return ""
}

// digits returns the end of the run of ASCII digits starting at p.
func digits(raw []byte, p int) int {
	for p < len(raw) && raw[p] >= '0' && raw[p] <= '9' {
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
