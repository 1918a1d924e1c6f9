package world

import (
	"fmt"
	"math/rand/v2"
)

// SolverMaxFactor is the most digits of either factor of a product in the
// solver's training data: the products of the default world, two 2-digit
// numbers. Past it the solver has never seen the shape of the answer and
// is unreliable ("larger numbers").
const SolverMaxFactor = 2

// SolverCovers reports whether x op y is in the solver's training
// coverage: every sum, and products whose factors have at most
// SolverMaxFactor digits. No difference is: the designed weakness the
// default world leans on. The solver has never seen a subtraction, and
// every "gives away" and "how many more" step is one, which the delegator
// computes in a 60-token scratchpad.
func SolverCovers(op Op, x, y int64) bool {
	switch op {
	case Sub:
		return false
	case Mul:
		return x < pow10(SolverMaxFactor) && y < pow10(SolverMaxFactor)
	}
	return true
}

// WorthDelegating reports whether handing a step to the solver saves the
// delegator tokens: a product by a number of two or more digits, whose
// scratchpad (161 tokens for two 2-digit numbers) is far longer than a
// delegate call (54). Sums, differences and products by one digit have
// scratchpads of 51 to 57 tokens, about as long as the call.
func WorthDelegating(s Step) bool { return s.Op == Mul && s.Y.Value >= 10 }

// SolverSize is a class of solver questions: an operation and the digits
// of each operand.
type SolverSize struct {
	Op   Op
	X, Y int
}

func (s SolverSize) String() string { return fmt.Sprintf("%dd%s%dd", s.X, s.Op, s.Y) }

// Covered reports whether the class is inside the solver's coverage.
func (s SolverSize) Covered() bool {
	switch s.Op {
	case Sub:
		return false
	case Mul:
		return s.X <= SolverMaxFactor && s.Y <= SolverMaxFactor
	}
	return true
}

// solverSizes are the classes of solver questions this world asks: the
// shapes of its steps inside the coverage (products of 2-digit numbers and
// by one digit, sums of the sizes its quantities reach) and, outside it,
// its differences and products of larger numbers.
var solverSizes = []SolverSize{
	{Mul, 2, 2}, {Mul, 2, 1}, {Add, 4, 4}, {Add, 4, 2}, {Add, 3, 3},
	{Sub, 4, 4}, {Sub, 4, 2}, {Sub, 3, 2}, {Mul, 3, 2}, {Mul, 3, 1},
}

// SolverSizes returns the size classes inside the solver's coverage
// (covered true), on which the solver's corpus (package transcript)
// trains it, or those outside it, which Question can draw for grading but
// the corpus never trains on.
func SolverSizes(covered bool) []SolverSize {
	var out []SolverSize
	for _, s := range solverSizes {
		if s.Covered() == covered {
			out = append(out, s)
		}
	}
	return out
}

// Question draws x op y of a size class whose result fits Width digits;
// a subtraction's minuend is the larger, a sum comes in both orders.
func (s SolverSize) Question(rng *rand.Rand) (int64, int64) {
	for {
		x, y := s.draw(rng)
		if s.Op.Apply(x, y) < pow10(Width) {
			return x, y
		}
	}
}

func (s SolverSize) draw(rng *rand.Rand) (int64, int64) {
	num := func(d int) int64 {
		if d <= 1 {
			return 2 + rng.Int64N(8)
		}
		lo := pow10(d - 1)
		return lo + rng.Int64N(9*lo)
	}
	x, y := num(s.X), num(s.Y)
	if s.Op == Sub && x < y {
		x, y = y, x
	}
	if s.Op == Add && rng.IntN(2) == 0 {
		x, y = y, x
	}
	return x, y
}
