package world

import (
	"fmt"
	"math/rand/v2"

	"github.com/delegatelab/delegate/reward"
)

// SolverMaxFactor is the most digits of either factor in the solver's
// training products. Those are the default world's products of two 2-digit
// numbers. Past it the solver has never seen the shape of the answer and
// is unreliable on such "larger numbers".
const SolverMaxFactor = 2

// SolverCovers reports whether x op y is in the solver's training
// coverage. It covers every sum, and products whose factors have at most
// SolverMaxFactor digits. It covers no difference: the designed weakness
// the default world leans on. The solver has never seen a subtraction, and
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

// WorthDelegating reports whether handing a step over saves delegator
// tokens. Only a product by a number of two or more digits does. Its
// scratchpad, 161 tokens for two 2-digit numbers, is far longer than a
// compact delegate call of 31. Sums, differences and products by one digit
// have scratchpads of 51 to 57 tokens: a call saves about 20, which the
// charge per call takes back.
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

// solverSizes are the classes of solver questions this world asks. Inside
// the coverage are products of 2-digit numbers and by one digit, and sums
// of the sizes its quantities reach. Outside it are its differences and
// products of larger numbers.
var solverSizes = []SolverSize{
	{Mul, 2, 2}, {Mul, 2, 1}, {Add, 4, 4}, {Add, 4, 2}, {Add, 3, 3},
	{Sub, 4, 4}, {Sub, 4, 2}, {Sub, 3, 2}, {Mul, 3, 2}, {Mul, 3, 1},
}

// SolverSizes returns the size classes inside the solver's coverage, or
// with covered false those outside it. The solver's corpus in package
// transcript trains on the classes inside. Question can draw the classes
// outside for grading, but the corpus never trains on them.
func SolverSizes(covered bool) []SolverSize {
	var out []SolverSize
	for _, s := range solverSizes {
		if s.Covered() == covered {
			out = append(out, s)
		}
	}
	return out
}

// Question draws x op y of a size class whose result fits Width digits.
// A subtraction's minuend is the larger; a sum comes in both orders.
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

// Coverage is what a solver was trained on, and so what it gets right.
// The zero value is the default world's solver, SolverCovers. A
// narrowing makes the solver's competence depend on the operands'
// digits, which no keyword of the text tells.
type Coverage struct {
	// MulFirstBelow, when positive, covers a product only when its first
	// factor is below it. The solver has never seen a larger one there.
	MulFirstBelow int64 `json:"mul_first_below,omitempty"`
	// MulFirstFrom, when positive, covers a product only when its first
	// factor is at least it. With MulFirstBelow it makes a band.
	MulFirstFrom int64 `json:"mul_first_from,omitempty"`
}

// Narrowed reports whether c narrows the default coverage's products.
func (c Coverage) Narrowed() bool { return c.MulFirstBelow > 0 || c.MulFirstFrom > 0 }

// DigitsCoverage is the digits world's solver. It narrows the default
// coverage to products whose first factor is below 50.
func DigitsCoverage() Coverage { return Coverage{MulFirstBelow: 50} }

// BandCoverage is the band world's solver. It covers the products whose
// first factor is from 30 to 69: no threshold on it is the solver's rule.
func BandCoverage() Coverage { return Coverage{MulFirstFrom: 30, MulFirstBelow: 70} }

// Validate checks that a narrowing leaves some 2-digit first factors in
// and some out.
func (c Coverage) Validate() error {
	if c.MulFirstBelow != 0 && (c.MulFirstBelow < 11 || c.MulFirstBelow > 99) {
		return fmt.Errorf("coverage: mul_first_below %d, want 0 (none) or 11 to 99", c.MulFirstBelow)
	}
	if c.MulFirstFrom != 0 && (c.MulFirstFrom < 11 || c.MulFirstFrom > 99) {
		return fmt.Errorf("coverage: mul_first_from %d, want 0 (none) or 11 to 99", c.MulFirstFrom)
	}
	if c.MulFirstFrom > 0 && c.MulFirstBelow > 0 && c.MulFirstFrom >= c.MulFirstBelow {
		return fmt.Errorf("coverage: mul_first_from %d, want below mul_first_below %d", c.MulFirstFrom, c.MulFirstBelow)
	}
	return nil
}

// Covers reports whether x op y is inside the coverage.
func (c Coverage) Covers(op Op, x, y int64) bool {
	if !SolverCovers(op, x, y) {
		return false
	}
	if op != Mul {
		return true
	}
	return (c.MulFirstBelow <= 0 || x < c.MulFirstBelow) && x >= c.MulFirstFrom
}

// Narrows reports whether the coverage splits size class s: some of its
// questions are inside, some outside.
func (c Coverage) Narrows(s SolverSize) bool {
	return s.Covered() && s.Op == Mul && c.Narrowed() && s.X >= 2
}

// Question draws x op y of size class s that the coverage covers, or with
// in false does not. s must hold such questions: Covered or Narrows.
func (c Coverage) Question(s SolverSize, rng *rand.Rand, in bool) (int64, int64) {
	for {
		x, y := s.Question(rng)
		if c.Covers(s.Op, x, y) == in {
			return x, y
		}
	}
}

// Selective is the policy this world rewards under the coverage. It
// delegates the steps that WorthDelegating and the coverage both allow.
func (c Coverage) Selective(p *Problem, i int) bool {
	s := p.Steps[i]
	return WorthDelegating(s) && c.Covers(s.Op, s.X.Value, s.Y.Value)
}

// WorldNames are the named worlds: DefaultConfig's problems, each with a
// solver of its own coverage. "default" has the zero Coverage. "digits"
// has DigitsCoverage, where the best policy reads the products' digits.
// "band" has BandCoverage, which no first-factor threshold equals.
var WorldNames = []string{"default", "digits", "band"}

// BandLambda is the band world's charge per delegator token. At the
// default 0.001 no rule beats never delegating there. At 0.003 a product
// delegated right gains 0.37, so a threshold rule gains something and
// still trails the band.
const BandLambda = 0.003

// NamedReward returns the reward of a named world: DefaultReward, with
// BandLambda in the band world.
func NamedReward(name string) reward.Graded {
	r := DefaultReward()
	if name == "band" {
		r.Lambda = BandLambda
	}
	return r
}

// The world rewards delegate train names (--world-reward).
const (
	// RewardGraded is NamedReward as it is: a wrong answer pays only its
	// tokens and calls, so a cheap wrong one can beat a right one.
	RewardGraded = "graded"
	// RewardGated is NamedReward success-gated at DefaultGate: any right
	// answer scores above any wrong or unfinished one (reward.Graded).
	RewardGated = "gated"
)

// WorldRewards lists the world rewards, the default first.
var WorldRewards = []string{RewardGraded, RewardGated}

// DefaultGate is the gate of RewardGated: the most cost a right answer
// pays, and minus a wrong answer's reward. It is above the cost of any
// right answer the band world's tables recorded (441 tokens, 1.32 at its
// λ), so every right answer still pays all it spends.
const DefaultGate = 2

// WorldReward returns g as the world reward kind names: g itself for
// RewardGraded or "", g gated at DefaultGate for RewardGated.
func WorldReward(g reward.Graded, kind string) (reward.Graded, error) {
	switch kind {
	case "", RewardGraded:
		return g, nil
	case RewardGated:
		g.Gate = DefaultGate
		return g, nil
	}
	return reward.Graded{}, fmt.Errorf("world reward %q: there is none (the world rewards are %v)", kind, WorldRewards)
}

// Named returns the config and the solver's coverage of a named world.
func Named(name string) (Config, Coverage, error) {
	switch name {
	case "", "default":
		return DefaultConfig(), Coverage{}, nil
	case "digits":
		return DefaultConfig(), DigitsCoverage(), nil
	case "band":
		return DefaultConfig(), BandCoverage(), nil
	}
	return Config{}, Coverage{}, fmt.Errorf("world %q: there is none (the worlds are %v)", name, WorldNames)
}
