package transcript

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/delegatelab/delegate/world"
)

// Mix sets the delegator's pretraining corpus. It says which route
// policies the transcripts follow, and how many transcripts the other
// protocols get. Route policies are mixed per problem, so the pretrained
// delegator is a stochastic policy over "delegate this step or not" that
// RL can sharpen. Never and always teach both behaviours cleanly. Random
// delegates each step with probability DelegateProb, and teaches that
// either can follow any step.
type Mix struct {
	// Weights of the route policies.
	Never, Always, Random float64
	// DelegateProb is the per-step delegation probability of Random.
	DelegateProb float64
	// Shares of problems that also get a single, a decompose and a lead
	// transcript. The decompose transcripts follow policy Random.
	Single, Decompose, Lead float64
	// Peers is K for the lead transcripts.
	Peers int
}

// DefaultMix is the shipped corpus mix. Route is never 1/4, always 1/4 and
// random 1/2 with probability 1/2. Each problem also gets, with
// probability 1/4 each, a single, a decompose and a lead transcript with 3
// peers.
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
func BuildCorpus(problems []*world.Problem, mix Mix, seed uint64) (Corpus, error) {
	if err := mix.Validate(); err != nil {
		return Corpus{}, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	c := Corpus{Policies: map[string]int{}}
	total := mix.Never + mix.Always + mix.Random
	random := world.Random(mix.DelegateProb, rng)
	for _, p := range problems {
		var pol world.Policy
		switch u := rng.Float64() * total; {
		case u < mix.Never:
			pol = world.Never
			c.Policies["never"]++
		case u < mix.Never+mix.Always:
			pol = world.Always
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

// SolverCorpus draws n solver transcripts evenly over the size classes cov
// covers. Each question lies inside cov, and the draw is deterministic from
// seed. With problems, half are instead their covered steps, in the world's
// own proportions. The zero Coverage is the
// default world's solver.
func SolverCorpus(problems []*world.Problem, cov world.Coverage, seed uint64, n int) []Transcript {
	rng := rand.New(rand.NewPCG(seed, 0x501e))
	sizes := world.SolverSizes(true)
	var steps []world.Step
	for _, p := range problems {
		for _, s := range p.Steps {
			if cov.Covers(s.Op, s.X.Value, s.Y.Value) {
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
		x, y := cov.Question(sz, rng, true)
		out = append(out, SolverTranscript(sz.Op, x, y))
	}
	return out
}
