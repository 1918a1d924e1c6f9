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

// apply computes x op y exactly.
func (o Op) apply(x, y int64) int64 {
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

// Expr is the compact, self-contained question for one operation, as the
// solver is asked it and as a scratchpad's header writes it: "347*28".
func Expr(op Op, x, y int64) string {
	return strconv.FormatInt(x, 10) + op.String() + strconv.FormatInt(y, 10)
}

// ParseExpr reads a question in Expr's form, "347*28": two non-negative
// integers of at most 10 digits around one of + - *, nothing else. It is
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

// maxOperand bounds the operands the scratchpads accept, so that no result
// overflows int64 and no scratchpad grows without bound.
const maxOperand = 1_000_000_000

func checkOperands(op Op, x, y int64) error {
	switch {
	case op != Add && op != Sub && op != Mul:
		return fmt.Errorf("unknown op %q", byte(op))
	case x < 0 || y < 0:
		return fmt.Errorf("%s: negative operand", Expr(op, x, y))
	case x > maxOperand || y > maxOperand:
		return fmt.Errorf("%s: operand above %d", Expr(op, x, y), maxOperand)
	case op == Sub && x < y:
		return fmt.Errorf("%s: negative difference", Expr(op, x, y))
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

// reverse returns s with its bytes in reverse order (s is ASCII digits).
func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// Scratchpad returns the delegator's digit-level working for x op y and
// the result. The format writes one elementary digit operation per line,
// least significant digit first, so that every token a model writes depends
// on at most three digits it can find by position:
//
//	347+85         header: the operation
//	7+5+0=12       digit + digit + carry in = carry out and digit
//	4+8+1=13
//	3+0+1=04
//	=432           the result: the last line's two digits (a leading 0
//	               dropped) followed by the earlier lines' last digits,
//	               bottom to top
//
// Subtraction writes "a-b-c=rd" where c is the borrow in, r the borrow out
// and d the digit (a - b - c + 10r). Multiplication by a one-digit y writes
// "a*y+c=rd" per digit of x. Multiplication by a longer y interleaves a
// one-digit block per digit of y (least significant first) with the
// addition of each shifted partial product to the running sum:
//
//	347*28
//	347*8
//	7*8+0=56
//	4*8+5=37
//	3*8+3=27
//	=2776
//	347*2
//	...
//	=694
//	2776+6940
//	...
//	=9716
//
// The result of a block is its last "=N" line. Scratchpad checks itself:
// the digits it wrote must read back as x op y computed exactly, or it
// returns an error (which would be a bug in this file, never an input's
// fault once checkOperands passed).
func Scratchpad(op Op, x, y int64) (string, int64, error) {
	if err := checkOperands(op, x, y); err != nil {
		return "", 0, fmt.Errorf("scratchpad: %w", err)
	}
	var b strings.Builder
	got := writeBlock(&b, op, x, y)
	if want := op.apply(x, y); got != want {
		return "", 0, fmt.Errorf("scratchpad %s: wrote %d, want %d", Expr(op, x, y), got, want)
	}
	text := strings.TrimSuffix(b.String(), "\n")
	if r, err := blockResult(text); err != nil || r != got {
		return "", 0, fmt.Errorf("scratchpad %s: final line reads %d (%v), want %d", Expr(op, x, y), r, err, got)
	}
	return text, got, nil
}

// writeBlock writes the block for x op y and returns the value its final
// line states, computed from the digits written (not from x op y).
func writeBlock(b *strings.Builder, op Op, x, y int64) int64 {
	b.WriteString(Expr(op, x, y))
	b.WriteByte('\n')
	if op == Mul && y >= 10 {
		yd := digitsLSD(y)
		var acc int64
		for i, d := range yd {
			p := writeBlock(b, Mul, x, int64(d))
			if i == 0 {
				acc = p
				continue
			}
			acc = writeBlock(b, Add, acc, p*pow10(i))
		}
		return acc
	}
	xd, yd := digitsLSD(x), digitsLSD(y)
	n := len(xd)
	if op != Mul && len(yd) > n {
		n = len(yd)
	}
	units := make([]byte, 0, n+1)
	carry := 0
	var last string
	for i := 0; i < n; i++ {
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
		last = strconv.Itoa(out) + strconv.Itoa(digit)
		carry = out
	}
	// The last line's two digits lead (its tens are the final carry, or
	// the borrow, which is 0 for a minuend at least the subtrahend), then
	// the other lines' digits from the bottom up; leading zeros dropped.
	s := last + reverse(string(units[:len(units)-1]))
	s = strings.TrimLeft(s, "0")
	if s == "" {
		s = "0"
	}
	b.WriteString("=" + s + "\n")
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1 // unreachable: s is digits; -1 fails the caller's check
	}
	return v
}

func digitAt(d []int, i int) int {
	if i < len(d) {
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

// SolverAnswer returns the solver's terse answer to x op y and the result:
// the digits of the result least significant first, then the result in
// \boxed{}. A multiplication by a number of more than one digit first
// writes a line of the shifted partial products and, past two of them, a
// line per running sum, all least significant first:
//
//	347*28  ->  6772 0496
//	            6179
//	            \boxed{9716}
//
// Writing least significant digits first lets a small model carry as it
// goes; it still does several digit operations per token, which is what
// makes it cheap and, past the sizes it was trained on, unreliable. The
// answer checks itself like Scratchpad.
func SolverAnswer(op Op, x, y int64) (string, int64, error) {
	if err := checkOperands(op, x, y); err != nil {
		return "", 0, fmt.Errorf("solver answer: %w", err)
	}
	want := op.apply(x, y)
	var b strings.Builder
	if op == Mul && y >= 10 {
		var sums []int64
		var sum int64
		for i, d := range digitsLSD(y) {
			p := x * int64(d) * pow10(i)
			sum += p
			if i > 0 {
				b.WriteByte(' ')
				sums = append(sums, sum)
			}
			b.WriteString(reverse(padLeft(strconv.FormatInt(p, 10), i+1)))
		}
		b.WriteByte('\n')
		for _, s := range sums[:len(sums)-1] {
			b.WriteString(reverse(strconv.FormatInt(s, 10)) + "\n")
		}
		if sum != want {
			return "", 0, fmt.Errorf("solver answer %s: partials sum to %d, want %d", Expr(op, x, y), sum, want)
		}
	}
	r := strconv.FormatInt(want, 10)
	b.WriteString(reverse(r) + "\n" + Boxed(want))
	text := b.String()
	if got, err := ParseAnswer(text); err != nil || got != want {
		return "", 0, fmt.Errorf("solver answer %s: reads back %d (%v), want %d", Expr(op, x, y), got, err, want)
	}
	return text, want, nil
}

// padLeft pads digits with zeros to at least n of them (a shifted partial
// product of 0 still shows its shift).
func padLeft(s string, n int) string {
	for len(s) < n {
		s = "0" + s
	}
	return s
}

// Boxed formats v as \boxed{v}.
func Boxed(v int64) string { return `\boxed{` + strconv.FormatInt(v, 10) + `}` }

// CheckLines checks every digit line of a scratchpad ("a+b+c=rd",
// "a-b-c=rd", "a*b+c=rd") for its arithmetic and returns the 1-based
// number of the first wrong line, or 0 when all are right. Other lines
// (headers, results, prose) are not judged. It is a diagnostic for a
// model's scratchpads: where the first slip happened.
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
