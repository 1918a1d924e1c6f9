package world

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Policy decides whether the delegator hands step i of a problem to the
// solver. False means the delegator computes it with a scratchpad.
type Policy func(p *Problem, i int) bool

// Never computes every step.
func Never(*Problem, int) bool { return false }

// Always delegates every step.
func Always(*Problem, int) bool { return true }

// Random delegates each step with probability prob, drawn from rng. The
// policy is not safe for concurrent use, since rng is not.
func Random(prob float64, rng *rand.Rand) Policy {
	return func(*Problem, int) bool { return rng.Float64() < prob }
}

// Selective is the policy this world rewards. It delegates exactly the
// steps worth it, by WorthDelegating, that the solver was trained on, by
// SolverCovers.
func Selective(p *Problem, i int) bool {
	s := p.Steps[i]
	return WorthDelegating(s) && SolverCovers(s.Op, s.X.Value, s.Y.Value)
}

// PositionRule delegates the steps at the positions set in mask and
// computes the others. Bit 0 is the first step. It ignores the input.
func PositionRule(mask uint) Policy {
	return func(_ *Problem, i int) bool { return i < 64 && mask>>uint(i)&1 == 1 }
}

// PositionRuleName names a position rule over steps positions. The name is
// "never", "always", or the positions it delegates: "delegate step 1, 3".
func PositionRuleName(mask uint, steps int) string {
	var pos []string
	for i := range steps {
		if mask>>uint(i)&1 == 1 {
			pos = append(pos, strconv.Itoa(i+1))
		}
	}
	switch len(pos) {
	case 0:
		return "never delegate"
	case steps:
		return "always delegate"
	}
	return "delegate step " + strings.Join(pos, ", ")
}

// RandomRate delegates each step with probability rate. A hash of the
// problem, the step and seed decides, so the same question always gets the
// same answer and a conversation replays. The decision ignores what the
// step is.
func RandomRate(rate float64, seed uint64) Policy {
	return func(p *Problem, i int) bool {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d/%d", p.Text, i, seed)
		return float64(h.Sum64()>>11)/float64(1<<53) < rate
	}
}

// StepKind is what a step is, as its keyword in the text says. It is the
// first or a later product, "x C of y I"; a "times as many"; an amount got
// or given away; or the parts' sum, "in all", or difference, "how many
// more". A rule on kinds is what a keyword reader can do.
type StepKind int

// The kinds of steps, in the order of a KindRule's mask bits.
const (
	FirstProduct StepKind = iota
	LaterProduct
	TimesAsMany
	AmountGot
	AmountGiven
	PartsSum
	PartsDifference
	NumStepKinds = iota
)

var stepKindNames = [NumStepKinds]string{"first product", "later product", "times", "got", "given away", "in all", "how many more"}

func (k StepKind) String() string { return stepKindNames[k] }

// KindOf returns the kind of step i of p.
func KindOf(p *Problem, i int) StepKind {
	s := p.Steps[i]
	switch {
	case s.Part < 0 && s.Op == Sub:
		return PartsDifference
	case s.Part < 0:
		return PartsSum
	case s.Op == Sub:
		return AmountGiven
	case s.Op == Add:
		return AmountGot
	case !s.Ready():
		return TimesAsMany
	}
	for j := range i {
		if t := p.Steps[j]; t.Op == Mul && t.Ready() {
			return LaterProduct
		}
	}
	return FirstProduct
}

// KindRule delegates the steps whose kinds are set in mask and computes
// the others. Bit 0 is FirstProduct. It reads the keywords, never the
// numbers.
func KindRule(mask uint) Policy {
	return func(p *Problem, i int) bool { return mask>>uint(KindOf(p, i))&1 == 1 }
}

// KindRuleName names a kind rule: "never delegate", or the kinds it
// delegates, such as "delegate first product, got".
func KindRuleName(mask uint) string {
	var kinds []string
	for k := range StepKind(NumStepKinds) {
		if mask>>uint(k)&1 == 1 {
			kinds = append(kinds, k.String())
		}
	}
	if len(kinds) == 0 {
		return "never delegate"
	}
	return "delegate " + strings.Join(kinds, ", ")
}

// FirstFactorBelow is the threshold rule. It delegates the products of two
// literals worth delegating whose first factor is below t, and computes
// the rest. Under DigitsCoverage, t = 50 is its Selective policy.
func FirstFactorBelow(t int64) Policy {
	return func(p *Problem, i int) bool {
		s := p.Steps[i]
		return s.Op == Mul && s.Ready() && WorthDelegating(s) && s.X.Value < t
	}
}
