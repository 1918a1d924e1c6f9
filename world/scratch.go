package world

import (
	"fmt"
	"strconv"
	"strings"
)

// Op is an arithmetic operation of a step.
type Op byte

// The operations of this world. Subtraction is only ever asked with a
// minuend at least as large as the subtrahend, so every value is a
// non-negative integer.
const (
	Add Op = '+'
	Sub Op = '-'
	Mul Op = '*'
)

// String returns the operator's sign.
func (o Op) String() string { return string(rune(o)) }

// Apply computes x op y exactly.
func (o Op) Apply(x, y int64) int64 {
	switch o {
	case Add:
		return x + y
	case Sub:
		return x - y
	case Mul:
		return x * y
	}
	panic(fmt.Sprintf("world: unknown op %q", byte(o))) // ops only come from this package's constants
}

// Width is the fixed digit count of every number in this world's formats.
// Only a product's factors, as the text gives them, are exempt. Operands
// of + and - are zero-padded to Width digits, as in "1316-0085", and so
// are every step's result and the final answer. No value of a generated
// problem reaches 10^Width. The generator keeps every quantity of a part
// below 10^Width/2, so a sum of two of them fits. Fixed widths put every
// digit a model reads at a fixed offset from the start of its block.
const Width = 4

// Pad writes v zero-padded to Width digits.
func Pad(v int64) string { return padLeft(strconv.FormatInt(v, 10), Width) }

// Expr is the compact question for one operation. The solver is asked it
// and a scratchpad's header writes it. A product keeps its operands as
// they are: "47*28". A sum or difference pads both to Width digits:
// "1316-0085".
func Expr(op Op, x, y int64) string {
	if op == Mul {
		return strconv.FormatInt(x, 10) + op.String() + strconv.FormatInt(y, 10)
	}
	return Pad(x) + op.String() + Pad(y)
}

// ParseExpr reads a question in Expr's form, such as "347*28". That is two
// non-negative integers of at most 10 digits around one of + - *. It is
// the inverse of Expr, for grading the solver per operation and size.
func ParseExpr(q string) (op Op, x, y int64, err error) {
	i := strings.IndexAny(q, "+-*")
	if i <= 0 || i == len(q)-1 {
		return 0, 0, 0, fmt.Errorf("parse question %q: want x+y, x-y or x*y", clip(q))
	}
	op = Op(q[i])
	parse := func(s string) (int64, error) {
		if len(s) > 10 || strings.Trim(s, "0123456789") != "" {
			return 0, fmt.Errorf("parse question %q: %q is not a number of at most 10 digits", clip(q), clip(s))
		}
		return strconv.ParseInt(s, 10, 64)
	}
	if x, err = parse(q[:i]); err != nil {
		return 0, 0, 0, err
	}
	if y, err = parse(q[i+1:]); err != nil {
		return 0, 0, 0, err
	}
	return op, x, y, nil
}

// checkOperands accepts the operations this world's formats write. Operands
// and differences must not be negative, and results must be below
// 10^Width, so every number fits its padded width.
func checkOperands(op Op, x, y int64) error {
	lim := pow10(Width)
	switch {
	case op != Add && op != Sub && op != Mul:
		return fmt.Errorf("unknown op %q", byte(op))
	case x < 0 || y < 0:
		return fmt.Errorf("%s%s%d: negative operand", strconv.FormatInt(x, 10), op, y)
	case x >= lim || y >= lim:
		return fmt.Errorf("%d%s%d: operand of more than %d digits", x, op, y, Width)
	case op == Sub && x < y:
		return fmt.Errorf("%s: negative difference", Expr(op, x, y))
	case op == Mul && x != 0 && y >= (lim+x-1)/x:
		return fmt.Errorf("%s: product of more than %d digits", Expr(op, x, y), Width)
	case op == Add && x+y >= lim:
		return fmt.Errorf("%s: sum of more than %d digits", Expr(op, x, y), Width)
	}
	return nil
}

// digitsLSD returns the decimal digits of v, least significant first.
func digitsLSD(v int64) []int {
	if v == 0 {
		return []int{0}
	}
	var d []int
	for ; v > 0; v /= 10 {
		d = append(d, int(v%10))
	}
	return d
}

// reverse returns s, ASCII digits, with its bytes in reverse order.
func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// Scratchpad returns the delegator's digit-level working for x op y and
// the result. It is made of blocks of one shape. A header has both
// operands padded to Width digits. One elementary digit operation follows
// per line, least significant digit first. The result, padded to Width
// digits, ends the block. So every token depends on at most three digits
// found at fixed offsets from the start of its block:
//
//	1316-0085      header
//	6-5-0=01       digit - digit - borrow in = borrow out and digit
//	1-8-0=13
//	3-0-1=02
//	1-0-0=01
//	=1231          the result: the lines' last digits, bottom to top
//
// Addition writes "a+b+c=rd", with c the carry in and r the carry out. A
// product by one digit d writes "a*d+c=rd" under the header "00xy*000d".
// A product as the text gives it, such as "47*28", is a short header
// followed by one such block per digit of the second factor, least
// significant first. Each is followed by the sum of the running total and
// the shifted partial product:
//
//	47*28
//	0047*0008
//	7*8+0=56
//	4*8+5=37
//	0*8+3=03
//	0*8+0=00
//	=0376
//	0047*0002
//	...
//	=0094
//	0376+0940
//	...
//	=1316
//
// The result of a block is its last "=N" line. Scratchpad checks itself:
// the digits it wrote must read back as x op y computed exactly, or it
// returns an error. Such an error is a bug in this file, never an input's
// fault once checkOperands passed.
func Scratchpad(op Op, x, y int64) (string, int64, error) {
	if err := checkOperands(op, x, y); err != nil {
		return "", 0, fmt.Errorf("scratchpad: %w", err)
	}
	var b strings.Builder
	var got int64
	if op == Mul {
		b.WriteString(Expr(op, x, y) + "\n")
		for i, d := range digitsLSD(y) {
			p := writeBlock(&b, Mul, x, int64(d))
			if i == 0 {
				got = p
				continue
			}
			got = writeBlock(&b, Add, got, p*pow10(i))
		}
	} else {
		got = writeBlock(&b, op, x, y)
	}
	if want := op.Apply(x, y); got != want {
		return "", 0, fmt.Errorf("scratchpad %s: wrote %d, want %d", Expr(op, x, y), got, want)
	}
	text := strings.TrimSuffix(b.String(), "\n")
	if r, err := blockResult(text); err != nil || r != got {
		return "", 0, fmt.Errorf("scratchpad %s: final line reads %d (%v), want %d", Expr(op, x, y), r, err, got)
	}
	return text, got, nil
}

// writeBlock writes one block, x op y over Width digits. For a product y
// is a single digit. It returns the value its final line states, computed
// from the digits written, not from x op y.
func writeBlock(b *strings.Builder, op Op, x, y int64) int64 {
	b.WriteString(Pad(x) + op.String() + Pad(y) + "\n")
	xd, yd := digitsLSD(x), digitsLSD(y)
	units := make([]byte, 0, Width)
	carry := 0
	for i := 0; i < Width; i++ {
		a, c := digitAt(xd, i), digitAt(yd, i)
		var out, digit int
		switch op {
		case Add:
			s := a + c + carry
			out, digit = s/10, s%10
			fmt.Fprintf(b, "%d+%d+%d=%d%d\n", a, c, carry, out, digit)
		case Sub:
			s := a - c - carry
			if s < 0 {
				out, digit = 1, s+10
			} else {
				out, digit = 0, s
			}
			fmt.Fprintf(b, "%d-%d-%d=%d%d\n", a, c, carry, out, digit)
		case Mul:
			s := a*int(y) + carry
			out, digit = s/10, s%10
			fmt.Fprintf(b, "%d*%d+%d=%d%d\n", a, y, carry, out, digit)
		}
		units = append(units, byte('0'+digit))
		carry = out
	}
	if carry != 0 {
		return -1 // unreachable after checkOperands (the result fits Width digits); -1 fails the caller's check
	}
	s := reverse(string(units))
	b.WriteString("=" + s + "\n")
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1 // unreachable: s is digits; -1 fails the caller's check
	}
	return v
}

// digitAt is digit i of d, least significant first, and 0 outside it.
func digitAt(d []int, i int) int {
	if i >= 0 && i < len(d) {
		return d[i]
	}
	return 0
}

func pow10(n int) int64 {
	p := int64(1)
	for ; n > 0; n-- {
		p *= 10
	}
	return p
}

// blockResult reads the value of a block's final "=N" line.
func blockResult(text string) (int64, error) {
	i := strings.LastIndexByte(text, '\n')
	last := text[i+1:]
	if !strings.HasPrefix(last, "=") {
		return 0, fmt.Errorf("final line %q does not start with =", last)
	}
	return strconv.ParseInt(last[1:], 10, 64)
}

// SolverAnswer returns the solver's terse answer to x op y and the result.
// The answer is lines of digit and carry pairs, least significant first. Then
// comes the result in \boxed{}, padded to Width digits. A sum or a difference
// is one line of Width pairs, each the result's digit and the carry or
// borrow out of it. A product writes a line of pairs per digit of the
// second factor, least significant first: the first factor times that
// digit. The last pair's carry is the partial product's top digit. When
// there are several partials, a line of Width pairs sums them, shifted:
//
//	47*28      ->  6573          47*8: 6 carry 5, 7 carry 3: 376
//	               4190          47*2: 4 carry 1, 9 carry 0: 94
//	               60113110      376+940: 6, 1 carry 1, 3 carry 1, 1: 1316
//	               \boxed{1316}
//	1316+0684  ->  01010120
//	               \boxed{2000}
//
// Each digit it writes depends on at most three earlier digits at fixed
// offsets: two operand digits and the carry just written. But it writes
// two tokens per digit where the delegator's scratchpad writes a whole line
// of nine. It is cheap and, past the shapes it was trained on, unreliable.
// The answer checks itself like Scratchpad.
func SolverAnswer(op Op, x, y int64) (string, int64, error) {
	if err := checkOperands(op, x, y); err != nil {
		return "", 0, fmt.Errorf("solver answer: %w", err)
	}
	want := op.Apply(x, y)
	var b strings.Builder
	if op == Mul {
		xd := digitsLSD(x)
		var partials [][]int
		for _, d := range digitsLSD(y) {
			carry := 0
			var p []int
			for _, a := range xd {
				v := a*d + carry
				carry = v / 10
				fmt.Fprintf(&b, "%d%d", v%10, carry)
				p = append(p, v%10)
			}
			partials = append(partials, append(p, carry))
			b.WriteByte('\n')
		}
		if len(partials) > 1 {
			carry := 0
			for i := range Width {
				v := carry
				for k, p := range partials {
					v += digitAt(p, i-k)
				}
				carry = v / 10
				fmt.Fprintf(&b, "%d%d", v%10, carry)
			}
			b.WriteByte('\n')
		}
	} else {
		xd, yd := digitsLSD(x), digitsLSD(y)
		carry := 0
		for i := range Width {
			v := digitAt(xd, i) + digitAt(yd, i) + carry
			if op == Sub {
				v = digitAt(xd, i) - digitAt(yd, i) - carry
			}
			switch {
			case v < 0:
				v, carry = v+10, 1
			case op == Sub:
				carry = 0
			default:
				v, carry = v%10, v/10
			}
			fmt.Fprintf(&b, "%d%d", v, carry)
		}
		b.WriteByte('\n')
	}
	b.WriteString(Boxed(want))
	text := b.String()
	if got, err := ParseAnswer(text); err != nil || got != want {
		return "", 0, fmt.Errorf("solver answer %s: reads back %d (%v), want %d", Expr(op, x, y), got, err, want)
	}
	return text, want, nil
}

// padLeft pads digits with zeros to at least n of them. A shifted partial
// product of 0 thus still shows its shift.
func padLeft(s string, n int) string {
	for len(s) < n {
		s = "0" + s
	}
	return s
}

// Boxed formats v as \boxed{v}, v padded to Width digits when it fits.
func Boxed(v int64) string {
	if v >= 0 && v < pow10(Width) {
		return `\boxed{` + Pad(v) + `}`
	}
	return `\boxed{` + strconv.FormatInt(v, 10) + `}`
}

// CheckLines checks the arithmetic of every digit line of a scratchpad. Digit
// lines look like "a+b+c=rd", "a-b-c=rd" or "a*b+c=rd". It returns the
// 1-based number of the first wrong line, or 0 when all are right. Other
// lines, such as headers, results and prose, are not judged. It is a
// diagnostic for a model's scratchpads: where the first slip happened.
func CheckLines(text string) int {
	for n, line := range strings.Split(text, "\n") {
		if ok, isDigitLine := checkDigitLine(line); isDigitLine && !ok {
			return n + 1
		}
	}
	return 0
}

// checkDigitLine judges one line of the form d o d o d=dd.
func checkDigitLine(l string) (ok, isDigitLine bool) {
	if len(l) != 8 || l[5] != '=' {
		return false, false
	}
	for _, i := range []int{0, 2, 4, 6, 7} {
		if l[i] < '0' || l[i] > '9' {
			return false, false
		}
	}
	a, b, c := int(l[0]-'0'), int(l[2]-'0'), int(l[4]-'0')
	r, d := int(l[6]-'0'), int(l[7]-'0')
	switch {
	case l[1] == '+' && l[3] == '+':
		return a+b+c == 10*r+d, true
	case l[1] == '-' && l[3] == '-':
		return a-b-c+10*r == d && r <= 1 && c <= 1, true
	case l[1] == '*' && l[3] == '+':
		return a*b+c == 10*r+d, true
	}
	return false, false
}
