package constrain

// JSON checks that the bytes fed so far are a prefix of a value valid against a Schema.
// It also says when they form a whole value. Every prefix it accepts can
// still be completed. Strings must be valid UTF-8. White space between
// tokens is at most MaxSpace bytes; a number is at most maxNumber bytes,
// with at most maxExpDigits exponent digits. So a sampler cannot spin on
// padding, and every number fits a float64. Keys of an object with declared
// properties carry no escapes, so a key is known by its bytes. The zero JSON
// is not ready; use NewJSON.
//
// A JSON is a value: Set copies one into another without allocating once
// the destination has grown, which a sampler does per candidate token.
type JSON struct {
	stack []frame
	root  *Schema
	lex   lexer
	done  bool // the root value is complete
	space int  // white space bytes since the last token
}

// MaxSpace is the longest run of white space JSON accepts between tokens.
const MaxSpace = 16

const maxNumber = 32

// maxExpDigits bounds a number's exponent: with at most maxNumber
// characters its magnitude stays far inside a float64's range.
const maxExpDigits = 2

// frame is an open object or array.
type frame struct {
	s     *Schema
	obj   bool
	state uint8
	seen  uint64 // declared properties written so far
	cur   int    // the property whose value comes next; -1 for another key
}

// States of a frame.
const (
	objFirst      uint8 = iota // after {: a key or }
	objKey                     // after ,: a key
	objColon                   // after a key
	objValue                   // after :
	objCommaOrEnd              // after a value
	arrFirst                   // after [: a value or ]
	arrValue                   // after ,: a value
	arrCommaOrEnd              // after a value
)

// Lexer kinds.
const (
	lexNone uint8 = iota
	lexLiteral
	lexString
	lexKey
	lexNumber
)

// lexer is the scalar being read: a literal, a string, a key, or a number.
// A literal is one of a list of candidates: true, false, null or enum values.
type lexer struct {
	kind  uint8
	state uint8 // string: escape and \u progress; number: grammar state
	cands []string
	alive uint64 // candidates still matching
	pos   int    // bytes read (strings and keys: after the opening quote)
	need  uint8  // UTF-8 continuation bytes still due
	lo    byte   // range of the next continuation byte
	hi    byte
	free  bool   // a key: may leave the candidates
	seen  uint64 // a key: the properties already written
	int   bool   // a number: integer only
}

// NewJSON returns a checker for one value valid against s (nil: any
// value).
func NewJSON(s *Schema) JSON { return JSON{root: s} }

// Set makes j a copy of src, reusing j's storage.
func (j *JSON) Set(src *JSON) {
	stack := append(j.stack[:0], src.stack...)
	*j = *src
	j.stack = stack
}

// Done reports whether the bytes fed are one whole value (trailing white
// space allowed).
func (j *JSON) Done() bool {
	if j.done {
		return true
	}
	if len(j.stack) > 0 {
		return false
	}
	switch j.lex.kind {
	case lexNumber:
		return numberComplete(j.lex.state)
	case lexLiteral:
		return j.lex.complete()
	}
	return false
}

// plainString reports whether j is inside a string value that takes any plain byte.
// There, any printable ASCII byte but the quote and the backslash is taken
// and changes nothing.
func (j *JSON) plainString() bool {
	return j.lex.kind == lexString && j.lex.state == 0 && j.lex.need == 0
}

// Started reports whether any byte but white space was fed.
func (j *JSON) Started() bool { return j.done || len(j.stack) > 0 || j.lex.kind != lexNone }

// Feed reports whether b extends the prefix, and takes it if it does. A
// refused byte leaves j unchanged only in part: callers try bytes on a
// copy (Set).
func (j *JSON) Feed(b byte) bool {
	if j.lex.kind != lexNone {
		switch j.lex.feed(b) {
		case fedMore:
			return true
		case fedEnd:
			return j.valueDone()
		case fedBefore:
			if !j.valueDone() {
				return false
			}
		default:
			return false
		}
	}
	if b == ' ' || b == '\t' || b == '\n' || b == '\r' {
		j.space++
		return j.space <= MaxSpace
	}
	j.space = 0
	if len(j.stack) == 0 {
		if j.done {
			return false
		}
		return j.start(j.root, b)
	}
	f := j.top()
	switch f.state {
	case objFirst, objKey:
		if b == '}' && f.state == objFirst {
			return j.closeObject()
		}
		if b != '"' {
			return false
		}
		return j.startKey(f)
	case objColon:
		if b != ':' {
			return false
		}
		f.state = objValue
		return true
	case objValue:
		var s *Schema
		if f.cur >= 0 {
			s = f.s.props[f.cur]
		}
		return j.start(s, b)
	case objCommaOrEnd:
		if b == '}' {
			return j.closeObject()
		}
		if b != ',' || !f.moreKeys() {
			return false
		}
		f.state = objKey
		return true
	case arrFirst, arrValue:
		if b == ']' && f.state == arrFirst {
			j.stack = j.stack[:len(j.stack)-1]
			return j.valueDone()
		}
		var items *Schema
		if f.s != nil {
			items = f.s.items
		}
		f.state = arrCommaOrEnd
		return j.start(items, b)
	case arrCommaOrEnd:
		if b == ']' {
			j.stack = j.stack[:len(j.stack)-1]
			return j.valueDone()
		}
		if b != ',' {
			return false
		}
		f.state = arrValue
		return true
	}
	return false
}

func (j *JSON) top() *frame { return &j.stack[len(j.stack)-1] }

// moreKeys reports whether another key may follow: an object closed to
// other properties has one not yet written.
func (f *frame) moreKeys() bool {
	if f.s == nil || !f.s.closed {
		return true
	}
	return f.seen != 1<<len(f.s.names)-1
}

func (j *JSON) closeObject() bool {
	f := j.top()
	if f.s != nil && f.seen&f.s.required != f.s.required {
		return false
	}
	j.stack = j.stack[:len(j.stack)-1]
	return j.valueDone()
}

// startKey reads a key after its opening quote.
func (j *JSON) startKey(f *frame) bool {
	j.lex = lexer{kind: lexKey, pos: 0, free: true}
	if f.s == nil || len(f.s.names) == 0 {
		if f.s != nil && f.s.closed {
			return false
		}
		return true
	}
	// A closed object's key stays on the properties not yet written; a
	// free key may spell any property, and is refused at its closing
	// quote if it repeats one.
	all := uint64(1)<<len(f.s.names) - 1
	j.lex.cands, j.lex.seen, j.lex.free = f.s.names, f.seen, !f.s.closed
	j.lex.alive = all
	if f.s.closed {
		j.lex.alive = all &^ f.seen
	}
	return j.lex.alive != 0 || j.lex.free
}

// start begins a value of schema s with its first byte b.
func (j *JSON) start(s *Schema, b byte) bool {
	types := uint8(typeAny)
	if s != nil {
		types = s.types
		if s.enum != nil {
			j.lex = lexer{kind: lexLiteral, cands: s.enum, alive: 1<<len(s.enum) - 1}
			return j.lex.feed(b) == fedMore
		}
	}
	switch {
	case b == '{' && types&typeObject != 0:
		j.stack = append(j.stack, frame{s: s, obj: true, state: objFirst, cur: -1})
		return true
	case b == '[' && types&typeArray != 0:
		j.stack = append(j.stack, frame{s: s, state: arrFirst})
		return true
	case b == '"' && types&typeString != 0:
		j.lex = lexer{kind: lexString}
		return true
	case (b == '-' || b >= '0' && b <= '9') && types&(typeNumber|typeInteger) != 0:
		j.lex = lexer{kind: lexNumber, int: types&typeNumber == 0}
		return j.lex.feed(b) == fedMore
	case (b == 't' || b == 'f') && types&typeBoolean != 0:
		j.lex = lexer{kind: lexLiteral, cands: boolLits, alive: 3}
		return j.lex.feed(b) == fedMore
	case b == 'n' && types&typeNull != 0:
		j.lex = lexer{kind: lexLiteral, cands: nullLit, alive: 1}
		return j.lex.feed(b) == fedMore
	}
	return false
}

var (
	boolLits = []string{"true", "false"}
	nullLit  = []string{"null"}
)

// valueDone closes the scalar just read (a key or a value).
func (j *JSON) valueDone() bool {
	lx := j.lex
	j.lex = lexer{}
	if len(j.stack) == 0 {
		j.done = true
		return true
	}
	f := j.top()
	switch f.state {
	case objFirst, objKey:
		f.cur = -1
		if lx.kind == lexKey {
			f.cur = lx.match()
		}
		f.state = objColon
	case objValue:
		if f.cur >= 0 {
			f.seen |= 1 << f.cur
		}
		f.state = objCommaOrEnd
	}
	return true
}

// Results of lexer.feed.
const (
	fedNo     = iota // b cannot come next
	fedMore          // b is part of the scalar, which goes on
	fedEnd           // b ends the scalar and is part of it (a closing quote)
	fedBefore        // the scalar ended before b, which is not part of it
)

// complete reports whether a literal matches one candidate in full.
func (l *lexer) complete() bool {
	for i, c := range l.cands {
		if l.alive&(1<<i) != 0 && len(c) == l.pos {
			return true
		}
	}
	return false
}

// match is the candidate a key equals in full, or -1.
func (l *lexer) match() int {
	for i, c := range l.cands {
		if l.alive&(1<<i) != 0 && len(c) == l.pos {
			return i
		}
	}
	return -1
}

// narrow keeps the candidates whose byte at pos is b.
func (l *lexer) narrow(b byte) uint64 {
	var alive uint64
	for i, c := range l.cands {
		if l.alive&(1<<i) != 0 && l.pos < len(c) && c[l.pos] == b {
			alive |= 1 << i
		}
	}
	return alive
}

func (l *lexer) feed(b byte) int {
	switch l.kind {
	case lexLiteral:
		if alive := l.narrow(b); alive != 0 {
			l.alive, l.pos = alive, l.pos+1
			return fedMore
		}
		if l.complete() {
			return fedBefore
		}
		return fedNo
	case lexNumber:
		return l.number(b)
	case lexKey:
		return l.key(b)
	}
	return l.str(b, true)
}

// key reads a key's bytes after its opening quote: no escapes, and on
// the candidates unless free.
func (l *lexer) key(b byte) int {
	if b == '"' {
		if l.need != 0 {
			return fedNo
		}
		m := l.match()
		if m < 0 && !l.free || m >= 0 && l.seen&(1<<m) != 0 {
			return fedNo // not a property, or one already written
		}
		return fedEnd
	}
	if b == '\\' {
		return fedNo
	}
	if r := l.str(b, false); r != fedMore {
		return r
	}
	l.alive = l.narrow(b)
	l.pos++
	if l.alive == 0 && !l.free {
		return fedNo
	}
	return fedMore
}

// str reads a string's bytes after its opening quote. escapes allows
// backslash escapes.
func (l *lexer) str(b byte, escapes bool) int {
	if l.need > 0 {
		if b < l.lo || b > l.hi {
			return fedNo
		}
		l.need--
		l.lo, l.hi = 0x80, 0xbf
		return fedMore
	}
	switch l.state {
	case 1: // after a backslash
		switch b {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			l.state = 0
		case 'u':
			l.state = 2
		default:
			return fedNo
		}
		return fedMore
	case 2, 3, 4, 5: // \u and hex digits so far
		if !(b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F') {
			return fedNo
		}
		l.state = (l.state + 1) % 6
		return fedMore
	}
	switch {
	case b == '"':
		return fedEnd
	case b == '\\':
		if !escapes {
			return fedNo
		}
		l.state = 1
	case b < 0x20:
		return fedNo
	case b < 0x80:
	case b >= 0xc2 && b <= 0xdf:
		l.need, l.lo, l.hi = 1, 0x80, 0xbf
	case b == 0xe0:
		l.need, l.lo, l.hi = 2, 0xa0, 0xbf
	case b == 0xed:
		l.need, l.lo, l.hi = 2, 0x80, 0x9f
	case b >= 0xe1 && b <= 0xef:
		l.need, l.lo, l.hi = 2, 0x80, 0xbf
	case b == 0xf0:
		l.need, l.lo, l.hi = 3, 0x90, 0xbf
	case b >= 0xf1 && b <= 0xf3:
		l.need, l.lo, l.hi = 3, 0x80, 0xbf
	case b == 0xf4:
		l.need, l.lo, l.hi = 3, 0x80, 0x8f
	default:
		return fedNo
	}
	return fedMore
}

// Number grammar states: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
const (
	numStart  = iota
	numMinus  // after -
	numZero   // a leading 0: complete
	numInt    // integer digits: complete
	numDot    // after .
	numFrac   // fraction digits: complete
	numExp    // after e
	numExpSig // after the exponent's sign
	numExpDig // exponent digits: complete
)

func numberComplete(s uint8) bool {
	return s == numZero || s == numInt || s == numFrac || s == numExpDig
}

func (l *lexer) number(b byte) int {
	digit := b >= '0' && b <= '9'
	next := uint8(255)
	switch l.state {
	case numStart:
		switch {
		case b == '-':
			next = numMinus
		case b == '0':
			next = numZero
		case digit:
			next = numInt
		}
	case numMinus:
		switch {
		case b == '0':
			next = numZero
		case digit:
			next = numInt
		}
	case numZero, numInt:
		switch {
		case digit && l.state == numInt:
			next = numInt
		case b == '.' && !l.int:
			next = numDot
		case (b == 'e' || b == 'E') && !l.int:
			next = numExp
		}
	case numDot, numFrac:
		switch {
		case digit:
			next = numFrac
		case (b == 'e' || b == 'E') && l.state == numFrac:
			next = numExp
		}
	case numExp:
		switch {
		case b == '+' || b == '-':
			next = numExpSig
		case digit:
			next = numExpDig
		}
	case numExpSig, numExpDig:
		// At most maxExpDigits exponent digits, so that every number
		// fits a float64.
		if digit && l.need < maxExpDigits {
			next = numExpDig
		}
	}
	// At the length cap only bytes that complete a number are taken.
	if next != 255 && (l.pos < maxNumber || !numberComplete(l.state)) {
		if next == numExpDig {
			l.need++ // exponent digits: need is free in a number
		}
		l.state = next
		l.pos++
		return fedMore
	}
	if numberComplete(l.state) {
		return fedBefore
	}
	return fedNo
}
