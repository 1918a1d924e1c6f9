package world

import (
	"errors"
	"fmt"
	"math/rand/v2"
)

// Mix sets the pretraining corpus of the delegator: which route policies
// its transcripts follow and how many transcripts of the other protocols
// it gets. The route policies are mixed per problem, so that the
// pretrained delegator is a stochastic policy over "delegate this step or
// not" that RL can sharpen: never and always teach both behaviours
// cleanly, and Random (each step delegated with probability DelegateProb)
// teaches that either can follow any step.
type Mix struct {
	// Weights of the route policies.
	Never, Always, Random float64
	// DelegateProb is the per-step delegation probability of Random.
	DelegateProb float64
	// Shares of problems that also get a single, a decompose (policy
	// Random) and a lead transcript.
	Single, Decompose, Lead float64
	// Peers is K for the lead transcripts.
	Peers int
}

// DefaultMix: route policies never 1/4, always 1/4, random 1/2 with
// probability 1/2; a single transcript for 1/4 of the problems, decompose
// for 1/4, lead with 3 peers for 1/4.
func DefaultMix() Mix {
	return Mix{Never: 0.25, Always: 0.25, Random: 0.5, DelegateProb: 0.5, Single: 0.25, Decompose: 0.25, Lead: 0.25, Peers: 3}
}

// Validate reports every field out of range.
func (m Mix) Validate() error {
	var errs []error
	for key, v := range map[string]float64{"never": m.Never, "always": m.Always, "random": m.Random} {
		if !(v >= 0) {
			errs = append(errs, fmt.Errorf("%s: weight %v is negative", key, v))
		}
	}
	if !(m.Never+m.Always+m.Random > 0) {
		errs = append(errs, errors.New("never, always, random: weights sum to 0"))
	}
	for key, v := range map[string]float64{"delegate_prob": m.DelegateProb, "single": m.Single, "decompose": m.Decompose, "lead": m.Lead} {
		if !(v >= 0 && v <= 1) {
			errs = append(errs, fmt.Errorf("%s: %v is outside [0, 1]", key, v))
		}
	}
	if m.Lead > 0 && (m.Peers < 1 || m.Peers > 8) {
		errs = append(errs, fmt.Errorf("peers: %d is outside [1, 8]", m.Peers))
	}
	if len(errs) > 0 {
		return fmt.Errorf("world mix: %w", errors.Join(errs...))
	}
	return nil
}

// Corpus is the supervised pretraining data built from a problem set.
type Corpus struct {
	Delegator []Transcript // route (every problem), single, plan, aggregate, leader
	Solver    []Transcript // the solver's answers in those transcripts, route and decompose
	Peers     []Transcript // the peers' answers in the lead transcripts
	Policies  map[string]int
}

// BuildCorpus builds the pretraining transcripts for problems under mix,
// deterministic from seed. The solver transcripts are those the
// delegator's transcripts call for; for the solver's own training use
// SolverCorpus, which covers its sizes evenly.
func BuildCorpus(problems []*Problem, mix Mix, seed uint64) (Corpus, error) {
	if err := mix.Validate(); err != nil {
		return Corpus{}, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	c := Corpus{Policies: map[string]int{}}
	total := mix.Never + mix.Always + mix.Random
	random := Random(mix.DelegateProb, rng)
	for _, p := range problems {
		var pol Policy
		switch u := rng.Float64() * total; {
		case u < mix.Never:
			pol = Never
			c.Policies["never"]++
		case u < mix.Never+mix.Always:
			pol = Always
			c.Policies["always"]++
		default:
			pol = random
			c.Policies["random"]++
		}
		eps := []Episode{Route(p, pol)}
		if rng.Float64() < mix.Single {
			eps = append(eps, Single(p))
		}
		if rng.Float64() < mix.Decompose {
			eps = append(eps, Decompose(p, random))
		}
		if rng.Float64() < mix.Lead {
			e := Lead(p, mix.Peers, rng)
			c.Delegator = append(c.Delegator, e.Delegator...)
			c.Peers = append(c.Peers, e.Subagents...)
		}
		for _, e := range eps {
			c.Delegator = append(c.Delegator, e.Delegator...)
			c.Solver = append(c.Solver, e.Subagents...)
		}
	}
	return c, nil
}

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
		return s.X <= SolverMaxSubtraction
	case Mul:
		return s.Y <= SolverMaxMultiplier
	}
	return true
}

// SolverSizes are the classes of the solver's training data: every size
// the default world asks it inside its coverage (products of 2 to 5 digits
// by 1 to 3 digits, sums of up to 6 digits, subtractions of up to 2), plus
// the sizes just past the coverage, which Question can draw for grading
// but SolverCorpus never trains on.
func SolverSizes(covered bool) []SolverSize {
	var out []SolverSize
	for x := 1; x <= 6; x++ {
		for y := 1; y <= x; y++ {
			out = append(out, SolverSize{Add, x, y})
		}
	}
	for x := 1; x <= 4; x++ {
		for y := 1; y <= x; y++ {
			out = append(out, SolverSize{Sub, x, y})
		}
	}
	for x := 1; x <= 5; x++ {
		for y := 1; y <= 4; y++ {
			out = append(out, SolverSize{Mul, x, y})
		}
	}
	kept := out[:0]
	for _, s := range out {
		if s.Covered() == covered {
			kept = append(kept, s)
		}
	}
	return kept
}

// Question draws x op y of a size class; a subtraction's minuend is the
// larger.
func (s SolverSize) Question(rng *rand.Rand) (int64, int64) {
	num := func(d int) int64 {
		if d <= 1 {
			return rng.Int64N(10)
		}
		lo := pow10(d - 1)
		return lo + rng.Int64N(9*lo)
	}
	x, y := num(s.X), num(s.Y)
	if s.Op == Sub && x < y {
		x, y = y, x
	}
	if rng.IntN(2) == 0 && s.Op != Sub && s.Op != Mul {
		x, y = y, x // sums come in both orders
	}
	return x, y
}

// SolverCorpus draws n solver transcripts evenly over the covered size
// classes, deterministic from seed; with problems, half of them are
// instead the covered steps of those problems, in the world's own
// proportions.
func SolverCorpus(problems []*Problem, seed uint64, n int) []Transcript {
	rng := rand.New(rand.NewPCG(seed, 0x501e))
	sizes := SolverSizes(true)
	var steps []Step
	for _, p := range problems {
		for _, s := range p.Steps {
			if SolverCovers(s.Op, s.X.Value, s.Y.Value) {
				steps = append(steps, s)
			}
		}
	}
	out := make([]Transcript, 0, n)
	for len(out) < n {
		if len(steps) > 0 && rng.IntN(2) == 0 {
			s := steps[rng.IntN(len(steps))]
			out = append(out, SolverTranscript(s.Op, s.X.Value, s.Y.Value))
			continue
		}
		sz := sizes[rng.IntN(len(sizes))]
		x, y := sz.Question(rng)
		out = append(out, SolverTranscript(sz.Op, x, y))
	}
	return out
}
