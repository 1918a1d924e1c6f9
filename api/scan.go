package api

// shape is what scanNumbers learned: the outer length and, for nested
// lists, the length of each inner list.
type shape struct {
	outer int
	inner []int
}

type scanError struct {
	path []any
	msg  string
}

// scanNumbers checks, in one pass and without decoding, that raw (valid
// JSON, as json.Unmarshal left it in a RawMessage) is a list nested depth
// deep whose leaves are numbers, integers when ints is set. It is the
// validation of List[List[int]] and its kin, fast enough for groups of
// millions of numbers.
func scanNumbers(raw []byte, depth int, ints bool) (shape, *scanError) {
	s := numScanner{raw: raw, ints: ints}
	var sh shape
	s.skipSpace()
	if !s.eat('[') {
		return sh, &scanError{msg: listMsg(depth, ints)}
	}
	s.skipSpace()
	if s.eat(']') {
		return sh, s.rest()
	}
	for {
		if depth == 1 {
			if err := s.number(sh.outer); err != nil {
				return sh, err
			}
		} else {
			n, err := s.list(depth-1, []any{sh.outer})
			if err != nil {
				return sh, err
			}
			sh.inner = append(sh.inner, n)
		}
		sh.outer++
		s.skipSpace()
		if s.eat(']') {
			return sh, s.rest()
		}
		if !s.eat(',') {
			return sh, &scanError{path: []any{sh.outer}, msg: "malformed list"}
		}
		s.skipSpace()
	}
}

type numScanner struct {
	raw  []byte
	pos  int
	ints bool
}

func (s *numScanner) skipSpace() {
	for s.pos < len(s.raw) {
		switch s.raw[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *numScanner) eat(c byte) bool {
	if s.pos < len(s.raw) && s.raw[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

func (s *numScanner) rest() *scanError {
	s.skipSpace()
	if s.pos != len(s.raw) {
		return &scanError{msg: "trailing data after the list"}
	}
	return nil
}

// list scans a list nested depth deep at the cursor and returns its length.
func (s *numScanner) list(depth int, path []any) (int, *scanError) {
	s.skipSpace()
	if !s.eat('[') {
		return 0, &scanError{path: path, msg: listMsg(depth, s.ints)}
	}
	n := 0
	s.skipSpace()
	if s.eat(']') {
		return 0, nil
	}
	for {
		var err *scanError
		if depth == 1 {
			err = s.numberAt(append(path[:len(path):len(path)], n))
		} else {
			_, err = s.list(depth-1, append(path[:len(path):len(path)], n))
		}
		if err != nil {
			return n, err
		}
		n++
		s.skipSpace()
		if s.eat(']') {
			return n, nil
		}
		if !s.eat(',') {
			return n, &scanError{path: path, msg: "malformed list"}
		}
		s.skipSpace()
	}
}

func (s *numScanner) number(i int) *scanError { return s.numberAt([]any{i}) }

// numberAt scans one JSON number; the input is valid JSON, so only the
// kind of token needs checking.
func (s *numScanner) numberAt(path []any) *scanError {
	start := s.pos
	if s.pos < len(s.raw) && s.raw[s.pos] == '-' {
		s.pos++
	}
	digits := s.pos
	for s.pos < len(s.raw) && s.raw[s.pos] >= '0' && s.raw[s.pos] <= '9' {
		s.pos++
	}
	if s.pos == digits {
		s.pos = start
		if s.ints {
			return &scanError{path: path, msg: "Input should be a valid integer"}
		}
		return &scanError{path: path, msg: "Input should be a valid number"}
	}
	frac := false
	for s.pos < len(s.raw) {
		c := s.raw[s.pos]
		if c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' || c >= '0' && c <= '9' {
			if c == '.' || c == 'e' || c == 'E' {
				frac = true
			}
			s.pos++
			continue
		}
		break
	}
	if frac && s.ints {
		return &scanError{path: path, msg: "Input should be a valid integer, got a number with a fractional part"}
	}
	return nil
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
