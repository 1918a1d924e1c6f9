package rl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"sort"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/reward"
)

// Outcome is what a rollout achieved, as the caller's environment judged it.
type Outcome struct {
	Correct   bool // the final answer was right
	Delegated bool // the policy handed work to another agent
	// Metrics are other named scalars of the rollout (sub-agent calls,
	// cost, a format failure as 0/1); each is averaged over the step's
	// rollouts that report it.
	Metrics map[string]float64
}

// Rollout runs one episode of item with the policy and returns its trace.
// seed fixes the rollout's sampling. It may be called from many goroutines
// at once, and must return only after every model call it started has
// returned: the trainer updates the policy's parameters once all rollouts
// of a step are back. An error leaves the rollout out of its group (it is
// counted, not trained on); a cancelled ctx stops the step.
type Rollout func(ctx context.Context, item int, seed uint64) (*delegate.Trace, Outcome, error)

// Reward scores a finished rollout, e.g. correctness − λ·policy tokens −
// μ·sub-agent calls. It may be called from many goroutines at once; a
// non-finite reward stops the run.
type Reward func(tr *delegate.Trace, o Outcome) float64

// Env is the environment a Trainer runs: Items training items, numbered
// from 0, a rollout and a reward.
type Env struct {
	Items   int
	Rollout Rollout
	Reward  Reward
}

// Progress reports the state of a run, for a progress bar. Metrics is set
// once a step has finished; otherwise the event counts the step's finished
// rollouts.
type Progress struct {
	Step, Steps  int // the step in progress (from 1) and the run's total
	RolloutsDone int // rollouts of the step finished so far
	Rollouts     int // rollouts of the step in all
	Metrics      *Metrics
}

// Trainer runs GRPO-family updates on a policy's parameters: each step
// samples items, runs GroupSize rollouts of each concurrently, scores
// them, computes group-relative advantages, and takes Epochs optimizer
// steps on the tokens the policy generated. Metrics go to
// OutDir/metrics.jsonl and checkpoints to OutDir/checkpoint. A Trainer is
// not safe for concurrent use; Run is called once.
type Trainer struct {
	cfg      Config
	env      Env    // the in-process environment, or
	src      Source // groups made elsewhere
	l        *learner
	step     int // steps completed
	rng      *rand.PCG
	progress chan<- Progress
	dropped  atomic.Int64
}

// New returns a trainer of policy, the parameters the environment's policy
// model samples from (a local.Model over them, wrapped with WrapPolicy).
// policy must hold the starting weights (the pretrained ones): they are
// the KL reference, and a resumed run loads its checkpoint over them.
// Progress events go to progress (nil: none) by non-blocking sends; the
// caller owns the channel.
func New(cfg Config, policy *nn.Params, env Env, progress chan<- Progress) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case policy == nil:
		return nil, errors.New("rl trainer: nil policy")
	case env.Rollout == nil || env.Reward == nil:
		return nil, errors.New("rl trainer: env needs a rollout and a reward")
	case env.Items < cfg.ItemsPerStep:
		return nil, fmt.Errorf("rl trainer: %d items, fewer than items_per_step %d", env.Items, cfg.ItemsPerStep)
	}
	l, err := newLearner(cfg, policy)
	if err != nil {
		return nil, fmt.Errorf("rl trainer: %w", err)
	}
	return &Trainer{cfg: cfg, env: env, l: l, rng: rand.NewPCG(cfg.Seed, 0x726c), progress: progress}, nil
}

// Group is the scored rollouts of one item, as a Source gives them to the
// trainer.
type Group struct {
	Rollouts []ScoredRollout
	// Staleness is how many steps behind the trainer's parameters the
	// policy that sampled the group is (0: the current one); -1 when the
	// source does not know. A group with any other value than 0 is
	// trained off-policy: each token's loss is weighted by its truncated
	// importance weight (Config.MaxImportanceWeight).
	Staleness int
}

// ScoredRollout is one rollout of a group: its training sequences, its
// reward, and its advantage within the group when the producer computed
// it (HasAdvantage); otherwise the trainer computes the advantages of the
// group's rewards with Config.Estimator.
type ScoredRollout struct {
	Episodes     []Episode
	Reward       float64
	Advantage    float64
	HasAdvantage bool
}

// Source supplies each step's groups when the rollouts are made outside the
// trainer (by environments pushing to a trajectory API, for one). Next is
// called once per step, with the step's number (from 1), and blocks until
// the step's groups are there; its error stops the run.
type Source interface {
	Next(ctx context.Context, step int) ([]Group, error)
}

// NewFromSource returns a trainer of policy that trains on src's groups
// instead of running rollouts. cfg.ItemsPerStep and GroupSize describe
// what src delivers per step (they size Dr. GRPO's constant
// normalisation); the rest of cfg applies as with New.
func NewFromSource(cfg Config, policy *nn.Params, src Source, progress chan<- Progress) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if policy == nil || src == nil {
		return nil, errors.New("rl trainer: needs a policy and a source")
	}
	l, err := newLearner(cfg, policy)
	if err != nil {
		return nil, fmt.Errorf("rl trainer: %w", err)
	}
	return &Trainer{cfg: cfg, src: src, l: l, rng: rand.NewPCG(cfg.Seed, 0x726c), progress: progress}, nil
}

// StepsDone returns the number of steps completed (including those of a
// resumed run).
func (t *Trainer) StepsDone() int { return t.step }

// DroppedProgress counts progress events the observer did not take.
func (t *Trainer) DroppedProgress() int64 { return t.dropped.Load() }

func (t *Trainer) emit(p Progress) {
	if t.progress == nil {
		return
	}
	select {
	case t.progress <- p:
	default:
		t.dropped.Add(1)
	}
}

// Run resumes from OutDir's checkpoint if there is one (dropping metric
// lines past it), then runs steps until Steps, appending one metrics line
// per step and checkpointing every CheckpointEvery steps and at the end.
// When ctx is cancelled, or a step fails, it writes a checkpoint of the
// last completed step and returns an error wrapping the cause
// (errors.Is(err, context.Canceled) for a cancellation). A failed step
// leaves the parameters as they were before it.
func (t *Trainer) Run(ctx context.Context) (err error) {
	if err := t.resume(); err != nil {
		return fmt.Errorf("rl run %s: %w", t.cfg.OutDir, err)
	}
	mw, err := openMetrics(t.cfg.OutDir, t.step)
	if err != nil {
		return fmt.Errorf("rl run %s: %w", t.cfg.OutDir, err)
	}
	defer func() {
		if cerr := mw.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("rl run %s: %w", t.cfg.OutDir, cerr)
		}
	}()
	saved := t.step
	for t.step < t.cfg.Steps {
		m, serr := t.Step(ctx)
		if serr != nil {
			if t.step > saved {
				if err := t.save(); err != nil {
					return fmt.Errorf("rl run %s: %w (and saving: %v)", t.cfg.OutDir, serr, err)
				}
			}
			return fmt.Errorf("rl run %s: %w", t.cfg.OutDir, serr)
		}
		if err := mw.Write(m); err != nil {
			return fmt.Errorf("rl run %s: %w", t.cfg.OutDir, err)
		}
		if t.step%t.cfg.CheckpointEvery == 0 || t.step == t.cfg.Steps {
			if err := t.save(); err != nil {
				return fmt.Errorf("rl run %s: %w", t.cfg.OutDir, err)
			}
			saved = t.step
		}
	}
	return nil
}

// rolloutSlot is one rollout of a step: its place and its result.
type rolloutSlot struct {
	item, g int
	seed    uint64
	trace   *delegate.Trace
	out     Outcome
	reward  float64
	err     error
	eps     []Episode
}

// Step runs one step (rollouts or the source's groups, advantages,
// update) and returns its metrics; it neither writes them nor
// checkpoints. On error the parameters are as they were before the step.
func (t *Trainer) Step(ctx context.Context) (*Metrics, error) {
	cfg := t.cfg
	step := t.step + 1
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("step %d: %w", step, err)
	}
	// The sampler advances only when the step completes, so that a step
	// redone after a failure or a resume draws the same items.
	rng := *t.rng
	start := time.Now()
	var m *Metrics
	var groups []Group
	var err error
	if t.src != nil {
		m, groups, err = t.sourceGroups(ctx, step)
	} else {
		m, groups, err = t.rollouts(ctx, step, &rng)
	}
	if err != nil {
		return nil, err
	}
	rolloutTime := time.Since(start)
	seqs, err := t.sequences(step, m, groups)
	if err != nil {
		return nil, err
	}
	// With no KL term a zero advantage gives every token of the sequence a
	// zero weight: leave those out of the passes (the gradient is the same).
	trained := seqs[:0:0]
	for _, s := range seqs {
		if s.Adv != 0 || cfg.KLBeta > 0 {
			trained = append(trained, s)
		}
	}

	m.LR = cfg.Schedule.LR(t.step)
	upStart := time.Now()
	if len(trained) == 0 {
		m.Skipped = true
	} else {
		st, err := t.l.update(ctx, trained, m.LR, (step-1)%cfg.LogprobCheckEvery == 0)
		if err != nil {
			return nil, fmt.Errorf("step %d: update: %w", step, err)
		}
		m.Loss, m.PGLoss, m.KL, m.ClipFrac = st.Loss, st.PGLoss, st.KL, st.ClipFrac
		m.GradNorm, m.GradClipped, m.LogprobGap = st.GradNorm, st.GradClip, st.LogprobGap
		m.TrainedTokens = st.Tokens
		m.ISWeightMean, m.ISWeightMin, m.ISWeightMax, m.ISTruncFrac = st.ISMean, st.ISMin, st.ISMax, st.ISTrunc
	}
	*t.rng = rng
	m.RolloutSeconds = rolloutTime.Seconds()
	m.UpdateSeconds = time.Since(upStart).Seconds()
	m.Time = time.Now().UTC()
	t.step = step
	t.emit(Progress{Step: step, Steps: cfg.Steps, RolloutsDone: m.Rollouts, Rollouts: m.Rollouts, Metrics: m})
	return m, nil
}

// rollouts runs the step's rollouts in the environment: ItemsPerStep items
// drawn with rng, GroupSize rollouts of each, at most Concurrency at once;
// then scores them into groups.
func (t *Trainer) rollouts(ctx context.Context, step int, rng *rand.PCG) (*Metrics, []Group, error) {
	cfg := t.cfg
	items := sampleItems(rng, t.env.Items, cfg.ItemsPerStep)
	slots := make([]rolloutSlot, len(items)*cfg.GroupSize)
	for i, it := range items {
		for g := range cfg.GroupSize {
			k := i*cfg.GroupSize + g
			slots[k] = rolloutSlot{item: it, g: g, seed: rolloutSeed(cfg.Seed, step, k)}
		}
	}
	var done atomic.Int64
	var eg errgroup.Group
	eg.SetLimit(cfg.Concurrency)
	for k := range slots {
		if ctx.Err() != nil {
			break
		}
		eg.Go(func() error {
			s := &slots[k]
			s.trace, s.out, s.err = t.runRollout(ctx, s.item, s.seed)
			t.emit(Progress{Step: step, Steps: cfg.Steps, RolloutsDone: int(done.Add(1)), Rollouts: len(slots)})
			return nil
		})
	}
	_ = eg.Wait() // every goroutine returns nil; failures are in the slots
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("step %d: %w", step, err)
	}
	return t.score(step, items, slots)
}

// score rewards the step's rollouts, builds their episodes and gives each
// the advantage of its rollout within its group. The metrics it returns
// cover the rollouts only.
func (t *Trainer) score(step int, items []int, slots []rolloutSlot) (*Metrics, []Group, error) {
	cfg := t.cfg
	m := &Metrics{Version: MetricsVersion, Step: step, Steps: cfg.Steps, Rollouts: len(slots), Items: len(items),
		Estimator: string(cfg.Estimator), Norm: string(cfg.norm())}
	scalars := map[string][2]float64{}
	var groups []Group
	for i := range items {
		group := slots[i*cfg.GroupSize : (i+1)*cfg.GroupSize]
		var rewards []float64
		var ok []*rolloutSlot
		for gi := range group {
			s := &group[gi]
			if s.err != nil {
				m.FailedRollouts++
				if m.FirstFailure == "" {
					m.FirstFailure = fmt.Sprintf("item %d rollout %d: %v", s.item, s.g, s.err)
				}
				continue
			}
			s.reward = t.env.Reward(s.trace, s.out)
			eps, err := Episodes(s.trace, cfg.PolicyRole, t.l.policy.Config.Context)
			if err != nil {
				return nil, nil, fmt.Errorf("step %d: item %d rollout %d: %w", step, s.item, s.g, err)
			}
			s.eps = eps
			rewards = append(rewards, s.reward)
			ok = append(ok, s)
			m.Reward += s.reward
			if s.out.Correct {
				m.Accuracy++
			}
			if s.out.Delegated {
				m.DelegationRate++
			}
			for k, v := range s.out.Metrics {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, nil, fmt.Errorf("step %d: item %d rollout %d: metric %q is %v", step, s.item, s.g, k, v)
				}
				a := scalars[k]
				scalars[k] = [2]float64{a[0] + v, a[1] + 1}
			}
			for _, e := range eps {
				m.PolicyTokens += e.Generated()
				m.Sequences += e.Calls
			}
		}
		m.Groups++
		if len(ok) == 0 || (cfg.Estimator == reward.RLOO && len(ok) < 2) {
			m.FailedGroups++
			continue
		}
		grp, err := reward.NewGroup(cfg.Estimator, rewards)
		if err != nil {
			return nil, nil, fmt.Errorf("step %d: item %d: %w", step, items[i], err)
		}
		if grp.Degenerate {
			m.DegenerateGroups++
		}
		var g Group
		for j, s := range ok {
			g.Rollouts = append(g.Rollouts, ScoredRollout{Episodes: s.eps, Reward: s.reward, Advantage: grp.Advantages[j], HasAdvantage: true})
		}
		groups = append(groups, g)
	}
	good := m.Rollouts - m.FailedRollouts
	if good == 0 {
		return nil, nil, fmt.Errorf("step %d: all %d rollouts failed; first: %s", step, m.Rollouts, m.FirstFailure)
	}
	m.Reward /= float64(good)
	m.Accuracy /= float64(good)
	m.DelegationRate /= float64(good)
	m.PolicyTokensMean = float64(m.PolicyTokens) / float64(good)
	if len(scalars) > 0 {
		m.Scalars = make(map[string]float64, len(scalars))
		for k, a := range scalars {
			m.Scalars[k] = a[0] / a[1]
		}
	}
	var rs []float64
	for _, s := range slots {
		if s.err == nil {
			rs = append(rs, s.reward)
		}
	}
	m.RewardStd = stddev(rs)
	return m, groups, nil
}

// sourceGroups takes the step's groups from the source and describes them
// in the step's metrics; groups without advantages get them here.
func (t *Trainer) sourceGroups(ctx context.Context, step int) (*Metrics, []Group, error) {
	cfg := t.cfg
	groups, err := t.src.Next(ctx, step)
	if err != nil {
		return nil, nil, fmt.Errorf("step %d: %w", step, err)
	}
	m := &Metrics{Version: MetricsVersion, Step: step, Steps: cfg.Steps, Items: len(groups),
		Estimator: string(cfg.Estimator), Norm: string(cfg.norm())}
	var rs []float64
	var known, behind int
	for gi := range groups {
		g := &groups[gi]
		m.Groups++
		switch {
		case g.Staleness < 0:
			m.UnknownVersion++
		default:
			known++
			behind += g.Staleness
			m.StalenessMax = max(m.StalenessMax, g.Staleness)
			for len(m.StalenessGroups) <= g.Staleness {
				m.StalenessGroups = append(m.StalenessGroups, 0)
			}
			m.StalenessGroups[g.Staleness]++
		}
		var rewards []float64
		has := 0
		for _, r := range g.Rollouts {
			if math.IsNaN(r.Reward) || math.IsInf(r.Reward, 0) || math.IsNaN(r.Advantage) || math.IsInf(r.Advantage, 0) {
				return nil, nil, fmt.Errorf("step %d: group %d: a reward or advantage is not finite", step, gi)
			}
			rewards = append(rewards, r.Reward)
			if r.HasAdvantage {
				has++
			}
			for _, e := range r.Episodes {
				m.PolicyTokens += e.Generated()
				m.Sequences += e.Calls
				if e.Len() >= t.l.policy.Config.Context {
					return nil, nil, fmt.Errorf("step %d: group %d: sequence %s of %d tokens exceeds the context of %d", step, gi, e.Node, e.Len()+1, t.l.policy.Config.Context)
				}
			}
		}
		m.Rollouts += len(g.Rollouts)
		rs = append(rs, rewards...)
		switch {
		case len(g.Rollouts) == 0:
			m.FailedGroups++
		case has == len(g.Rollouts):
		case has > 0:
			return nil, nil, fmt.Errorf("step %d: group %d: %d of %d rollouts carry an advantage; all or none must", step, gi, has, len(g.Rollouts))
		case cfg.Estimator == reward.RLOO && len(g.Rollouts) < 2:
			m.FailedGroups++
			g.Rollouts = nil
		default:
			grp, err := reward.NewGroup(cfg.Estimator, rewards)
			if err != nil {
				return nil, nil, fmt.Errorf("step %d: group %d: %w", step, gi, err)
			}
			if grp.Degenerate {
				m.DegenerateGroups++
			}
			for j := range g.Rollouts {
				g.Rollouts[j].Advantage, g.Rollouts[j].HasAdvantage = grp.Advantages[j], true
			}
		}
	}
	if m.Rollouts == 0 {
		return nil, nil, fmt.Errorf("step %d: the source gave no rollouts", step)
	}
	if known > 0 {
		m.StalenessMean = float64(behind) / float64(known)
	}
	for _, r := range rs {
		m.Reward += r
	}
	m.Reward /= float64(len(rs))
	m.PolicyTokensMean = float64(m.PolicyTokens) / float64(len(rs))
	m.RewardStd = stddev(rs)
	return m, groups, nil
}

// sequences gives every episode of the groups its rollout's advantage and
// the coefficient of the normalisation.
func (t *Trainer) sequences(step int, m *Metrics, groups []Group) ([]trainSeq, error) {
	cfg := t.cfg
	var seqs []trainSeq
	var trainedRollouts int
	type rolloutSeqs struct {
		lo, hi int // range in seqs
		tokens int
	}
	var spans []rolloutSeqs
	for _, g := range groups {
		for _, r := range g.Rollouts {
			if !r.HasAdvantage {
				return nil, fmt.Errorf("step %d: a rollout has no advantage", step)
			}
			sp := rolloutSeqs{lo: len(seqs)}
			for _, e := range r.Episodes {
				seqs = append(seqs, trainSeq{Episode: e, Adv: r.Advantage, OffPolicy: g.Staleness != 0})
				if g.Staleness != 0 {
					m.OffPolicySequences++
				}
				sp.tokens += e.Generated()
			}
			sp.hi = len(seqs)
			if sp.tokens > 0 {
				spans = append(spans, sp)
				trainedRollouts++
			}
		}
	}
	// Normalisation: every token of a rollout gets the same coefficient.
	var total int
	for _, sp := range spans {
		total += sp.tokens
	}
	for _, sp := range spans {
		var c float64
		switch cfg.norm() {
		case NormSeqMean:
			c = 1 / (float64(sp.tokens) * float64(trainedRollouts))
		case NormTokenSum:
			c = 1 / (float64(cfg.MaxNewTokens) * float64(cfg.GroupSize*cfg.ItemsPerStep))
		case NormTokenMean:
			c = 1 / float64(total)
		}
		for i := sp.lo; i < sp.hi; i++ {
			seqs[i].Coef = c
		}
	}
	return seqs, nil
}

// runRollout calls the environment's rollout, turning a panic into an
// error carrying the stack.
func (t *Trainer) runRollout(ctx context.Context, item int, seed uint64) (tr *delegate.Trace, out Outcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("rollout of item %d panicked: %v\n%s", item, p, debug.Stack())
		}
	}()
	tr, out, err = t.env.Rollout(ctx, item, seed)
	if err == nil && tr == nil {
		err = fmt.Errorf("rollout of item %d returned no trace", item)
	}
	return tr, out, err
}

// sampleItems draws k distinct items of n, in increasing order.
func sampleItems(src *rand.PCG, n, k int) []int {
	r := rand.New(src)
	picked := make(map[int]bool, k)
	out := make([]int, 0, k)
	for len(out) < k { // Floyd's algorithm: exactly k draws
		j := r.IntN(n - k + len(out) + 1)
		if picked[j] {
			j = n - k + len(out)
		}
		picked[j] = true
		out = append(out, j)
	}
	sort.Ints(out)
	return out
}

// rolloutSeed derives the seed of rollout k of a step.
func rolloutSeed(seed uint64, step, k int) uint64 {
	x := seed ^ uint64(step)*0x9e3779b97f4a7c15 ^ uint64(k)*0xbf58476d1ce4e5b9
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func stddev(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	var s float64
	for _, v := range x {
		s += v
	}
	mean := s / float64(len(x))
	var ss float64
	for _, v := range x {
		ss += (v - mean) * (v - mean)
	}
	return math.Sqrt(ss / float64(len(x)))
}
