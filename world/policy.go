package world

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Policy decides, for step i of a problem, whether the delegator hands it
// to the solver (true) or computes it with a scratchpad (false).
type Policy func(p *Problem, i int) bool

// Never computes every step.
func Never(*Problem, int) bool { return false }

// Always delegates every step.
func Always(*Problem, int) bool { return true }

// Random delegates each step with probability prob, drawn from rng. The
// policy is not safe for concurrent use (rng is not).
func Random(prob float64, rng *rand.Rand) Policy {
	return func(*Problem, int) bool { return rng.Float64() < prob }
}

// Selective is the policy this world rewards: delegate exactly the steps
// that are worth it (WorthDelegating) and that the solver was trained on
// (SolverCovers).
func Selective(p *Problem, i int) bool {
	s := p.Steps[i]
	return WorthDelegating(s) && SolverCovers(s.Op, s.X.Value, s.Y.Value)
}

// PositionRule is the input-independent policy that delegates the steps
// at the positions whose bits are set in mask (bit 0: the first step) and
// computes the others.
func PositionRule(mask uint) Policy {
	return func(_ *Problem, i int) bool { return i < 64 && mask>>uint(i)&1 == 1 }
}

// PositionRuleName names a position rule over steps positions: "never",
// "always", or the positions it delegates ("delegate step 1, 3").
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

// RandomRate delegates each step with probability rate, decided by a hash
// of the problem, the step and seed: the same decision every time it is
// asked, so a conversation replays, and unrelated to what the step is.
func RandomRate(rate float64, seed uint64) Policy {
	return func(p *Problem, i int) bool {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d/%d", p.Text, i, seed)
		return float64(h.Sum64()>>11)/float64(1<<53) < rate
	}
}
