package rl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/reward"
)

// Progress reports the state of a run, for a progress bar.
// The trainer's event sets Metrics once a step has finished.
// An in-process source's events, on the same channel, count the step's finished rollouts.
type Progress struct {
	Step, Steps  int // the step in progress (from 1) and the run's total
	RolloutsDone int // rollouts of the step finished so far
	Rollouts     int // rollouts of the step in all
	Metrics      *Metrics
}

// Trainer runs GRPO-family updates on a policy's parameters.
// Each step takes the step's scored groups from its Source,
// then takes Epochs optimizer steps on the tokens the policy generated.
// The source is the rollout pipeline in the same process, or environments over a trajectory API.
// Metrics go to OutDir/metrics.jsonl and checkpoints to OutDir/checkpoint.
// A Trainer is not safe for concurrent use; Run is called once.
type Trainer struct {
	cfg      Config
	src      Source
	l        *learner
	step     int // steps completed
	progress chan<- Progress
	dropped  atomic.Int64
}

// Group is the scored rollouts of one item, as a Source gives them to the
// trainer.
type Group struct {
	Rollouts []ScoredRollout
	// Staleness is how many steps the sampling policy is behind the trainer's parameters.
	// 0 is the current one; -1 means the source does not know.
	// A group with any other value than 0 is trained off-policy:
	// each token's loss is weighted by its importance weight, truncated at Config.MaxImportanceWeight.
	Staleness int
	// Failed counts the item's rollouts that failed and are not in
	// Rollouts; FirstFailure says why the first of them failed. A group
	// with no Rollouts (too few rollouts succeeded for advantages) trains
	// nothing and is counted in Metrics.FailedGroups.
	Failed       int
	FirstFailure string
	// Quarantined, when set, says why the source could not use the group.
	// An environment may send what the policy cannot train on.
	// The group trains nothing and is counted in Metrics.QuarantinedGroups; the step goes on without it.
	Quarantined string
	// Empty marks an item that gave this policy nothing to train: its
	// rollouts never called the policy's role. It has no Rollouts and
	// nothing Failed. It counts in Metrics.Groups and EmptyGroups, not as
	// failed; a step of empty groups alone is skipped.
	Empty bool
}

// ScoredRollout is one rollout of a group: its training sequences, reward and advantage.
// HasAdvantage says the producer computed the advantage.
// Otherwise the trainer computes the group's advantages with Config.Estimator.
type ScoredRollout struct {
	Episodes     []Episode
	Reward       float64
	Advantage    float64
	HasAdvantage bool
	// EpisodeAdvantages, when not nil, holds one advantage per episode in place of Advantage.
	// Per-role credit, reward.RoleCredit, gives each sample of a rollout its own.
	// It needs HasAdvantage.
	EpisodeAdvantages []float64
	// Spans, when not nil, holds one list per episode of token spans with their own advantage.
	// A span's advantage replaces the episode's at its tokens; the other tokens keep the episode's.
	// Per-decision credit gives each tool call's tokens the value of that decision.
	Spans [][]Span
	// Correct, Delegated and Scalars describe the rollout for the step's metrics, where the source knows them.
	// They give accuracy, delegation rate and the means of named scalars such as sub-agent calls or cost.
	// Each scalar is averaged over the step's rollouts that report it.
	Correct, Delegated bool
	Scalars            map[string]float64
}

// Source supplies each step's groups. Next is called once per step, with
// the step's number (from 1), and blocks until the step's groups are
// there; its error stops the run. A step that failed is asked for again
// with the same number, and a resumed run goes on from the step after its
// checkpoint: an in-process source gives the same step the same items
// (Items) and seeds (RolloutSeed). The trainer changes the policy's
// parameters only between calls of Next, never while one is in flight.
type Source interface {
	Next(ctx context.Context, step int) ([]Group, error)
}

// New returns a trainer of policy on src's groups.
// policy holds the parameters the groups' policy samples from, in process through a local.Model.
// It must hold the starting, pretrained weights:
// they are the KL reference, and a resumed run loads its checkpoint over them.
// cfg.ItemsPerStep and GroupSize describe what src delivers per step; they size Dr. GRPO's constant.
// Progress events go to progress, which may be nil, by non-blocking sends.
// The caller owns the channel.
func New(cfg Config, policy *nn.Params, src Source, progress chan<- Progress) (*Trainer, error) {
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
	return &Trainer{cfg: cfg, src: src, l: l, progress: progress}, nil
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

// Run resumes from OutDir's checkpoint if there is one, then runs steps until Steps.
// Resuming drops metric lines past the checkpoint.
// Each step appends one metrics line. Run checkpoints every CheckpointEvery steps and at the end.
// When ctx is cancelled or a step fails, it checkpoints the last completed step
// and returns an error wrapping the cause, so errors.Is finds context.Canceled.
// A failed step leaves the parameters as they were before it.
func (t *Trainer) Run(ctx context.Context) error { return Lockstep(ctx, t) }

// Lockstep runs the trainers of several policies whose sources share each step's rollouts.
// They are the policies of one multi-agent rollout, each trained on its own samples of it.
// Each resumes its own checkpoint and metrics in its own OutDir.
// Then, step by step, each trainer in the order given takes the step, writes its metrics line
// and checkpoints on its own CheckpointEvery.
//
// A step's updates therefore happen one trainer after the other, after the step's rollouts.
// A shared source must make a step's rollouts once, on the first Next of that step,
// and hand the later trainers their part.
// Every trainer's groups were then sampled by the parameters it updates.
//
// Trainers resumed at different steps, after a crash between two checkpoints, are brought level first.
// A step is taken only by the trainers that have not done it; the others wait.
// When ctx is cancelled or a step fails, every trainer that advanced since its last checkpoint writes one.
// The error names the OutDir of the trainer that failed.
// Each trainer stops at its own Steps.
func Lockstep(ctx context.Context, ts ...*Trainer) (err error) {
	if len(ts) == 0 {
		return errors.New("rl lockstep: no trainers")
	}
	mws := make([]*metricsWriter, len(ts))
	saved := make([]int, len(ts))
	defer func() {
		for i, mw := range mws {
			if mw == nil {
				continue
			}
			if cerr := mw.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("rl run %s: %w", ts[i].cfg.OutDir, cerr)
			}
		}
	}()
	for i, t := range ts {
		if err := t.resume(); err != nil {
			return fmt.Errorf("rl run %s: %w", t.cfg.OutDir, err)
		}
		mw, err := openMetrics(t.cfg.OutDir, t.step)
		if err != nil {
			return fmt.Errorf("rl run %s: %w", t.cfg.OutDir, err)
		}
		mws[i], saved[i] = mw, t.step
	}
	// fail saves every trainer that advanced since its last checkpoint
	// and returns cause as the error of the trainer t.
	fail := func(t *Trainer, cause error) error {
		var serrs []error
		for i, u := range ts {
			if u.step > saved[i] {
				if err := u.save(); err != nil {
					serrs = append(serrs, fmt.Errorf("%s: %w", u.cfg.OutDir, err))
				}
			}
		}
		if len(serrs) > 0 {
			return fmt.Errorf("rl run %s: %w (and saving: %v)", t.cfg.OutDir, cause, errors.Join(serrs...))
		}
		return fmt.Errorf("rl run %s: %w", t.cfg.OutDir, cause)
	}
	for {
		next := math.MaxInt // the step after the trainer furthest behind
		for _, t := range ts {
			if t.step < t.cfg.Steps {
				next = min(next, t.step+1)
			}
		}
		if next == math.MaxInt {
			return nil
		}
		for i, t := range ts {
			if t.step+1 != next || t.step >= t.cfg.Steps {
				continue
			}
			m, serr := t.Step(ctx)
			if serr != nil {
				return fail(t, serr)
			}
			if err := mws[i].Write(m); err != nil {
				return fail(t, err)
			}
			if t.step%t.cfg.CheckpointEvery == 0 || t.step == t.cfg.Steps {
				if err := t.save(); err != nil {
					return fmt.Errorf("rl run %s: %w", t.cfg.OutDir, err)
				}
				saved[i] = t.step
			}
		}
	}
}

// Step runs one step and returns its metrics; it neither writes them nor checkpoints.
// A step takes the source's groups, computes advantages the source did not give, and updates.
// On error the parameters are as they were before the step.
func (t *Trainer) Step(ctx context.Context) (*Metrics, error) {
	cfg := t.cfg
	step := t.step + 1
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("step %d: %w", step, err)
	}
	start := time.Now()
	groups, err := t.src.Next(ctx, step)
	if err != nil {
		return nil, fmt.Errorf("step %d: %w", step, err)
	}
	m, err := t.describe(step, groups)
	if err != nil {
		return nil, err
	}
	rolloutTime := time.Since(start)
	seqs, err := t.sequences(step, m, groups)
	if err != nil {
		return nil, err
	}
	// With no KL term a zero advantage gives every token of the sequence a zero weight.
	// Leave those out of the passes; the gradient is the same.
	trained := seqs[:0:0]
	for _, s := range seqs {
		if s.Adv != 0 || s.TokenAdv != nil || cfg.KLBeta > 0 {
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
	m.RolloutSeconds = rolloutTime.Seconds()
	m.UpdateSeconds = time.Since(upStart).Seconds()
	m.Time = time.Now().UTC()
	t.step = step
	t.emit(Progress{Step: step, Steps: cfg.Steps, RolloutsDone: m.Rollouts, Rollouts: m.Rollouts, Metrics: m})
	return m, nil
}

// describe checks the step's groups and fills the rollouts' part of the step's metrics.
// Groups without advantages get them here.
func (t *Trainer) describe(step int, groups []Group) (*Metrics, error) {
	cfg := t.cfg
	m := &Metrics{Version: MetricsVersion, Step: step, Steps: cfg.Steps, Items: len(groups),
		Estimator: string(cfg.Estimator), Norm: string(cfg.norm())}
	s := stepSums{scalars: map[string][2]float64{}}
	for gi := range groups {
		if err := t.describeGroup(m, &s, &groups[gi]); err != nil {
			return nil, fmt.Errorf("step %d: group %d: %w", step, gi, err)
		}
	}
	if len(s.rewards) == 0 {
		if m.QuarantinedGroups > 0 || m.EmptyGroups > 0 {
			return m, nil // nothing to train: the step is skipped
		}
		if m.FailedRollouts > 0 {
			return nil, fmt.Errorf("step %d: all %d rollouts failed; first: %s", step, m.Rollouts, m.FirstFailure)
		}
		return nil, fmt.Errorf("step %d: the source gave no rollouts", step)
	}
	s.means(m)
	return m, nil
}

// stepSums gathers over a step's groups what its metrics average.
type stepSums struct {
	rewards []float64
	// scalars holds each named scalar's sum and count.
	scalars map[string][2]float64
	// known counts the groups of known staleness; behind sums their staleness.
	known, behind int
}

// describeGroup counts one group in m and s, checks its rollouts and
// gives them advantages when the source did not.
func (t *Trainer) describeGroup(m *Metrics, s *stepSums, g *Group) error {
	if g.Quarantined != "" {
		m.QuarantinedGroups++
		g.Rollouts = nil
		return nil
	}
	if g.Empty {
		if len(g.Rollouts) > 0 || g.Failed > 0 {
			return fmt.Errorf("an empty group holds %d rollouts and %d failed", len(g.Rollouts), g.Failed)
		}
		m.Groups++
		m.EmptyGroups++
		s.countStaleness(m, g.Staleness)
		return nil
	}
	m.Groups++
	m.FailedRollouts += g.Failed
	if g.Failed > 0 && m.FirstFailure == "" {
		m.FirstFailure = g.FirstFailure
	}
	s.countStaleness(m, g.Staleness)
	var rewards []float64
	has := 0
	for _, r := range g.Rollouts {
		if err := checkRollout(r, t.l.policy.Config.Context); err != nil {
			return err
		}
		rewards = append(rewards, r.Reward)
		if r.HasAdvantage {
			has++
		}
		s.countRollout(m, r)
	}
	m.Rollouts += len(g.Rollouts) + g.Failed
	s.rewards = append(s.rewards, rewards...)
	return t.advantages(m, g, rewards, has)
}

// countStaleness counts a group's staleness: unknown when negative, else
// in the histogram and the mean's sums.
func (s *stepSums) countStaleness(m *Metrics, staleness int) {
	if staleness < 0 {
		m.UnknownVersion++
		return
	}
	s.known++
	s.behind += staleness
	m.StalenessMax = max(m.StalenessMax, staleness)
	for len(m.StalenessGroups) <= staleness {
		m.StalenessGroups = append(m.StalenessGroups, 0)
	}
	m.StalenessGroups[staleness]++
}

// checkRollout refuses a rollout whose reward, advantages or scalars are
// not finite. It also refuses one with a sequence that does not fit
// window, the policy's context.
func checkRollout(r ScoredRollout, window int) error {
	if math.IsNaN(r.Reward) || math.IsInf(r.Reward, 0) || math.IsNaN(r.Advantage) || math.IsInf(r.Advantage, 0) {
		return errors.New("a reward or advantage is not finite")
	}
	if r.EpisodeAdvantages != nil {
		if len(r.EpisodeAdvantages) != len(r.Episodes) || !r.HasAdvantage {
			return fmt.Errorf("%d episode advantages for %d episodes (with HasAdvantage %v): want one per episode, given", len(r.EpisodeAdvantages), len(r.Episodes), r.HasAdvantage)
		}
		for _, a := range r.EpisodeAdvantages {
			if math.IsNaN(a) || math.IsInf(a, 0) {
				return errors.New("an episode advantage is not finite")
			}
		}
	}
	if r.Spans != nil {
		if len(r.Spans) != len(r.Episodes) {
			return fmt.Errorf("%d span lists for %d episodes: want one per episode", len(r.Spans), len(r.Episodes))
		}
		for j, sp := range r.Spans {
			if err := checkSpans(sp, len(r.Episodes[j].Completion)); err != nil {
				return fmt.Errorf("sequence %s: %w", r.Episodes[j].Node, err)
			}
		}
	}
	for k, v := range r.Scalars {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("metric %q is %v", k, v)
		}
	}
	for _, e := range r.Episodes {
		if e.Len() >= window {
			return fmt.Errorf("sequence %s of %d tokens exceeds the context of %d", e.Node, e.Len()+1, window)
		}
	}
	return nil
}

// countRollout adds a checked rollout to the step's counts and sums.
func (s *stepSums) countRollout(m *Metrics, r ScoredRollout) {
	if r.Correct {
		m.Accuracy++
	}
	if r.Delegated {
		m.DelegationRate++
	}
	for k, v := range r.Scalars {
		a := s.scalars[k]
		s.scalars[k] = [2]float64{a[0] + v, a[1] + 1}
	}
	for _, e := range r.Episodes {
		m.PolicyTokens += e.Generated()
		m.Sequences += e.Calls
	}
}

// advantages gives a group's rollouts the estimator's advantages of
// rewards. It counts a group that trains nothing or nothing new. It
// refuses one where only some rollouts carry an advantage; rollouts that
// all carry one keep theirs.
func (t *Trainer) advantages(m *Metrics, g *Group, rewards []float64, has int) error {
	switch {
	case len(g.Rollouts) == 0:
		m.FailedGroups++
	case has == len(g.Rollouts):
		if allZero(g.Rollouts) {
			m.DegenerateGroups++
		}
	case has > 0:
		return fmt.Errorf("%d of %d rollouts carry an advantage; all or none must", has, len(g.Rollouts))
	case t.cfg.Estimator == reward.RLOO && len(g.Rollouts) < 2:
		m.FailedGroups++
		g.Rollouts = nil
	default:
		grp, err := reward.NewGroup(t.cfg.Estimator, rewards)
		if err != nil {
			return err
		}
		if grp.Degenerate {
			m.DegenerateGroups++
		}
		for j := range g.Rollouts {
			g.Rollouts[j].Advantage, g.Rollouts[j].HasAdvantage = grp.Advantages[j], true
		}
	}
	return nil
}

// means turns the step's sums into its means: reward, accuracy,
// delegation rate, tokens, staleness and the named scalars.
func (s *stepSums) means(m *Metrics) {
	if s.known > 0 {
		m.StalenessMean = float64(s.behind) / float64(s.known)
	}
	for _, r := range s.rewards {
		m.Reward += r
	}
	good := float64(len(s.rewards))
	m.Reward /= good
	m.Accuracy /= good
	m.DelegationRate /= good
	m.PolicyTokensMean = float64(m.PolicyTokens) / good
	m.RewardStd = stddev(s.rewards)
	if len(s.scalars) > 0 {
		m.Scalars = make(map[string]float64, len(s.scalars))
		for k, a := range s.scalars {
			m.Scalars[k] = a[0] / a[1]
		}
	}
}

// allZero reports whether every rollout's advantage is zero.
// Such a group carries no learning signal: all rewards are equal, or the producer zeroed a tie.
func allZero(rs []ScoredRollout) bool {
	for _, r := range rs {
		for _, sp := range r.Spans {
			for _, x := range sp {
				if x.Advantage != 0 {
					return false
				}
			}
		}
		if r.EpisodeAdvantages != nil {
			for _, a := range r.EpisodeAdvantages {
				if a != 0 {
					return false
				}
			}
			continue
		}
		if r.Advantage != 0 {
			return false
		}
	}
	return true
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
			for j, e := range r.Episodes {
				adv := r.Advantage
				if r.EpisodeAdvantages != nil {
					adv = r.EpisodeAdvantages[j]
				}
				seq := trainSeq{Episode: e, Adv: adv, OffPolicy: g.Staleness != 0}
				if r.Spans != nil && len(r.Spans[j]) > 0 {
					seq.TokenAdv = tokenAdvantages(adv, len(e.Completion), r.Spans[j])
				}
				if cfg.EntropyBonus > 0 {
					seq.TokenAdv = entropyAdvantages(seq, cfg.EntropyBonus)
				}
				seqs = append(seqs, seq)
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
