package world

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// randomOperands draws x op y with operands of 1..maxDigits digits, zeros
// included. A minuend is at least the subtrahend, and a result has at most
// Width digits.
func randomOperands(r *rand.Rand, op Op, maxDigits int) (int64, int64) {
	num := func() int64 {
		d := 1 + r.IntN(maxDigits)
		return r.Int64N(pow10(d))
	}
	for {
		x, y := num(), num()
		if op == Sub && x < y {
			x, y = y, x
		}
		if op.Apply(x, y) < pow10(Width) {
			return x, y
		}
	}
}

func TestScratchpadSelfChecks(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, op := range []Op{Add, Sub, Mul} {
		t.Run(op.String(), func(t *testing.T) {
			for range 3000 {
				x, y := randomOperands(r, op, Width)
				text, got, err := Scratchpad(op, x, y)
				if err != nil {
					t.Fatalf("Scratchpad(%s): %v", Expr(op, x, y), err)
				}
				want := op.Apply(x, y)
				if got != want {
					t.Fatalf("Scratchpad(%s) = %d, want %d", Expr(op, x, y), got, want)
				}
				if r, err := blockResult(text); err != nil || r != want {
					t.Fatalf("Scratchpad(%s) final line reads %d (%v), want %d", Expr(op, x, y), r, err, want)
				}
				if !strings.HasPrefix(text, Expr(op, x, y)+"\n") {
					t.Fatalf("Scratchpad(%s) starts %q, want the header", Expr(op, x, y), strings.SplitN(text, "\n", 2)[0])
				}
				if n := CheckLines(text); n != 0 {
					t.Fatalf("CheckLines(Scratchpad(%s)) = line %d, want 0:\n%s", Expr(op, x, y), n, text)
				}
			}
		})
	}
}

func TestScratchpadGolden(t *testing.T) {
	tests := []struct {
		op   Op
		x, y int64
		want string
	}{
		{Add, 347, 85, "0347+0085\n7+5+0=12\n4+8+1=13\n3+0+1=04\n0+0+0=00\n=0432"},
		{Sub, 1000, 999, "1000-0999\n0-9-0=11\n0-9-1=10\n0-9-1=10\n1-0-1=00\n=0001"},
		{Sub, 7, 7, "0007-0007\n7-7-0=00\n0-0-0=00\n0-0-0=00\n0-0-0=00\n=0000"},
		{Mul, 347, 8, "347*8\n0347*0008\n7*8+0=56\n4*8+5=37\n3*8+3=27\n0*8+2=02\n=2776"},
		{Mul, 12, 10, "12*10\n0012*0000\n2*0+0=00\n1*0+0=00\n0*0+0=00\n0*0+0=00\n=0000\n0012*0001\n2*1+0=02\n1*1+0=01\n0*1+0=00\n0*1+0=00\n=0012\n0000+0120\n0+0+0=00\n0+2+0=02\n0+1+0=01\n0+0+0=00\n=0120"},
	}
	for _, tt := range tests {
		got, _, err := Scratchpad(tt.op, tt.x, tt.y)
		if err != nil || got != tt.want {
			t.Errorf("Scratchpad(%s) = %q, %v; want %q", Expr(tt.op, tt.x, tt.y), got, err, tt.want)
		}
	}
}

func TestScratchpadRejects(t *testing.T) {
	tests := []struct {
		name string
		op   Op
		x, y int64
	}{
		{"negative difference", Sub, 3, 5},
		{"negative operand", Add, -1, 5},
		{"too large", Mul, pow10(Width) + 1, 2},
		{"product too large", Mul, 999, 99},
		{"sum too large", Add, 9999, 1},
		{"unknown op", Op('/'), 6, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := Scratchpad(tt.op, tt.x, tt.y); err == nil {
				t.Errorf("Scratchpad(%q, %d, %d) = nil error, want one", byte(tt.op), tt.x, tt.y)
			}
			if _, _, err := SolverAnswer(tt.op, tt.x, tt.y); err == nil {
				t.Errorf("SolverAnswer(%q, %d, %d) = nil error, want one", byte(tt.op), tt.x, tt.y)
			}
		})
	}
}

func TestSolverAnswerSelfChecks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, op := range []Op{Add, Sub, Mul} {
		for range 3000 {
			x, y := randomOperands(r, op, Width)
			text, got, err := SolverAnswer(op, x, y)
			if err != nil {
				t.Fatalf("SolverAnswer(%s): %v", Expr(op, x, y), err)
			}
			want := op.Apply(x, y)
			if a, err := ParseAnswer(text); err != nil || a != want || got != want {
				t.Fatalf("SolverAnswer(%s) answers %d (%v), returns %d; want %d", Expr(op, x, y), a, err, got, want)
			}
		}
	}
}

func TestSolverAnswerGolden(t *testing.T) {
	tests := []struct {
		op   Op
		x, y int64
		want string
	}{
		{Add, 347, 85, "21314000\n\\boxed{0432}"},
		{Add, 1316, 684, "01010120\n\\boxed{2000}"},
		{Sub, 1316, 85, "10312010\n\\boxed{1231}"},
		{Mul, 47, 28, "6573\n4190\n60113110\n\\boxed{1316}"},
		{Mul, 347, 8, "657372\n\\boxed{2776}"},
		{Mul, 12, 10, "0000\n2010\n00201000\n\\boxed{0120}"},
	}
	for _, tt := range tests {
		got, _, err := SolverAnswer(tt.op, tt.x, tt.y)
		if err != nil || got != tt.want {
			t.Errorf("SolverAnswer(%s) = %q, %v; want %q", Expr(tt.op, tt.x, tt.y), got, err, tt.want)
		}
	}
}

func TestCheckLinesFindsSlip(t *testing.T) {
	text, _, err := Scratchpad(Mul, 347, 28)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(text, "\n")
	lines[3] = "4*8+5=36" // was 37
	if got, want := CheckLines(strings.Join(lines, "\n")), 4; got != want {
		t.Errorf("CheckLines with line 4 wrong = %d, want %d", got, want)
	}
	if got := CheckLines("prose\n=12\n"); got != 0 {
		t.Errorf("CheckLines(prose) = %d, want 0", got)
	}
}

func FuzzCheckLines(f *testing.F) {
	for _, s := range []string{"347*8\n7*8+0=56\n4*8+5=37\n=2776", "4-8-0=16", "9*9+8=89", "1+1+1=03\n", "=", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := CheckLines(s)
		if lines := strings.Count(s, "\n") + 1; n < 0 || n > lines {
			t.Errorf("CheckLines(%q) = %d, outside 0..%d", s, n, lines)
		}
	})
}
