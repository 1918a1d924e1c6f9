package openenv

// validJSON reports whether b is one JSON value, as json.Valid does, in
// one pass without the scanner's state machine. The hot paths check each
// message with it: json.Valid took most of the time of reading an
// observation. Strings may hold any byte from 0x20 up, as json.Valid
// allows, and nesting deeper than json.Valid's limit is refused as it is.
func validJSON(b []byte) bool {
	i, ok := validValue(b, skipSpace(b, 0), 0)
	return ok && skipSpace(b, i) == len(b)
}

// maxDepth is encoding/json's bound on nested arrays and objects.
const maxDepth = 10000

// validValue checks the value at i, depth levels deep, and returns its end.
func validValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return validString(b, i)
	case c == '{':
		return validObject(b, i, depth+1)
	case c == '[':
		return validArray(b, i, depth+1)
	case c == '-' || c >= '0' && c <= '9':
		return validNumber(b, i)
	case c == 't':
		return validLiteral(b, i, "true")
	case c == 'f':
		return validLiteral(b, i, "false")
	case c == 'n':
		return validLiteral(b, i, "null")
	}
	return i, false
}

func validObject(b []byte, i, depth int) (int, bool) {
	return walkObject(b, i, depth, func(_ []byte, i int) (int, bool) { return validValue(b, i, depth) })
}

// walkObject checks the object at b[i], depth levels deep, as validJSON
// does, and returns its end. For each member it calls value with the key,
// as written between its quotes, and the index of the value; value checks
// the value and returns its end. A reader walks and checks a message in
// one pass so, where validJSON and then members scanned it twice or more.
func walkObject(b []byte, i, depth int, value func(key []byte, i int) (int, bool)) (int, bool) {
	if depth > maxDepth || i >= len(b) || b[i] != '{' {
		return i, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		start := i
		var ok bool
		if i, ok = validString(b, i); !ok {
			return i, false
		}
		key := b[start+1 : i-1]
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return i, false
		}
		if i, ok = value(key, skipSpace(b, i+1)); !ok {
			return i, false
		}
		i = skipSpace(b, i)
		switch {
		case i >= len(b):
			return i, false
		case b[i] == '}':
			return i + 1, true
		case b[i] != ',':
			return i, false
		}
		i = skipSpace(b, i+1)
	}
}

func validArray(b []byte, i, depth int) (int, bool) {
	if depth > maxDepth {
		return i, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = validValue(b, i, depth); !ok {
			return i, false
		}
		i = skipSpace(b, i)
		switch {
		case i >= len(b):
			return i, false
		case b[i] == ']':
			return i + 1, true
		case b[i] != ',':
			return i, false
		}
		i = skipSpace(b, i+1)
	}
}

// validString checks the string that starts at i, its quote.
func validString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return i, false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// validNumber checks the number at i: an optional minus, an integer
// without leading zeros, a fraction and an exponent.
func validNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func validLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}
