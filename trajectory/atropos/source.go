package atropos

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
)

// QuarantineVersion is the format version of a QuarantineRecord.
const QuarantineVersion = 1

// QuarantineRecord is a group of a batch that the trainer set aside. It
// holds why, and the group as the API sent it. A step redone after a restart
// records its groups again.
type QuarantineRecord struct {
	Version int        `json:"version"`
	Step    int        `json:"step"`
	Group   int        `json:"group"` // its index in the step's batch, once ordered
	Reason  string     `json:"reason"`
	Data    ScoredData `json:"data"`
}

// Source is rl.Source over a trajectory API's batches, the trainer side.
// Each sequence of a group is one rollout: its score is the reward, its
// advantage the batch's or, when the group carries none, Estimator's of
// the scores. Under Credit reward.CreditRole each sequence's advantage is
// instead its sample's under reward.RoleCredit (roleAdvantages). A group
// without sequences is an item with nothing to train (rl.Group.Empty). A group
// the policy cannot train on is quarantined: logged to Quarantine and
// handed to the trainer as rl.Group.Quarantined, so the step goes on
// without it.
type Source struct {
	Client         *TrainerClient
	Estimator      reward.Estimator
	Credit         string // reward.CreditTask or CreditRole; "" is task
	Vocab, Context int    // the policy's vocabulary and context
	Quarantine     string // the log of quarantined groups, one QuarantineRecord a line
}

// Next fetches the batch of step (again, if a crashed trainer had it
// already) and turns it into groups.
func (s *Source) Next(ctx context.Context, step int) ([]rl.Group, error) {
	out, err := s.next(ctx, step, nil)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// View is one trainer's part of a batch from Source.NextViews. It holds
// the sequences of its roles, checked against its policy's vocabulary and
// context.
type View struct {
	// Roles are the OverrideRole values of its sequences.
	Roles []string
	// Others takes too the sequences of roles no view lists, and those
	// that name none.
	Others         bool
	Vocab, Context int
}

// NextViews fetches the batch of step as Next does and splits it among
// views. View v's groups hold, in batch order, the sequences whose role
// views[v] lists (or, with Others, no view lists), with the advantages the
// whole group gives them. A group with none of them is left out of v's,
// unless it has no sequences at all: that empty group is every view's. A
// group that one sequence keeps from its view's policy is quarantined in
// every view.
func (s *Source) NextViews(ctx context.Context, step int, views []View) ([][]rl.Group, error) {
	if len(views) == 0 {
		return nil, fmt.Errorf("batch of step %d: no views", step)
	}
	return s.next(ctx, step, views)
}

// next is Next for views nil and NextViews otherwise.
func (s *Source) next(ctx context.Context, step int, views []View) ([][]rl.Group, error) {
	s.Client.Last = step - 1
	b, err := s.Client.Next(ctx)
	if err != nil {
		return nil, fmt.Errorf("batch of step %d: %w", step, err)
	}
	orderBatch(b.Batch)
	out := make([][]rl.Group, max(len(views), 1))
	for gi, sd := range b.Batch {
		at, err := s.viewsOf(sd, views)
		var g rl.Group
		if err == nil {
			g, err = groupOf(sd, s.Estimator, s.Credit)
		}
		if err != nil {
			rec := QuarantineRecord{Version: QuarantineVersion, Step: step, Group: gi, Reason: err.Error(), Data: sd}
			if werr := appendJSONL(s.Quarantine, rec); werr != nil {
				return nil, fmt.Errorf("batch of step %d, group %d: quarantine (%v): %w", step, gi, err, werr)
			}
			for v := range out {
				out[v] = append(out[v], rl.Group{Quarantined: err.Error()})
			}
			continue
		}
		// The parameters before this step are version step-1.
		g.Staleness = -1
		if v := ReadGroupOverride(sd.GroupOverrides).PolicyVersion; v != nil {
			g.Staleness = max(step-1-*v, 0)
		}
		for v, part := range splitGroup(g, at, len(out)) {
			if len(part.Rollouts) > 0 || len(g.Rollouts) == 0 {
				out[v] = append(out[v], part)
			}
		}
	}
	return out, nil
}

// viewsOf gives the view of each sequence of sd, -1 for none, and checks
// each against its view's policy (usable). Without views every sequence
// is view 0's, checked against the Source's policy.
func (s *Source) viewsOf(sd ScoredData, views []View) ([]int, error) {
	at := make([]int, len(sd.Tokens))
	for i, toks := range sd.Tokens {
		vocab, maxLen := s.Vocab, s.Context
		if views != nil {
			var role string
			if i < len(sd.Overrides) {
				role = ReadSequenceOverride(sd.Overrides[i]).Role
			}
			at[i] = slices.IndexFunc(views, func(v View) bool { return slices.Contains(v.Roles, role) })
			if at[i] < 0 {
				at[i] = slices.IndexFunc(views, func(v View) bool { return v.Others })
			}
			if at[i] < 0 {
				continue
			}
			vocab, maxLen = views[at[i]].Vocab, views[at[i]].Context
		}
		if err := usable(i, toks, vocab, maxLen); err != nil {
			return nil, err
		}
	}
	return at, nil
}

// splitGroup gives each of n views the rollouts of g whose sequence is
// its own. at[i] is rollout i's view, or negative for none. Each part
// keeps g's staleness and failures.
func splitGroup(g rl.Group, at []int, n int) []rl.Group {
	parts := make([]rl.Group, n)
	for v := range parts {
		parts[v] = rl.Group{Staleness: g.Staleness, Failed: g.Failed, FirstFailure: g.FirstFailure, Empty: g.Empty}
	}
	for i, ro := range g.Rollouts {
		if at[i] >= 0 {
			parts[at[i]].Rollouts = append(parts[at[i]].Rollouts, ro)
		}
	}
	return parts
}

// usable checks what the API may not have checked of sequence i. Every
// token id must be within the policy's vocabulary and the sequence within
// its context. An API without the trainer's vocab_size, or another server,
// skips that.
func usable(i int, toks []int, vocab, maxLen int) error {
	if len(toks) > maxLen {
		return fmt.Errorf("sequence %d has %d tokens, over the policy's context of %d", i, len(toks), maxLen)
	}
	for j, id := range toks {
		if id < 0 || id >= vocab {
			return fmt.Errorf("sequence %d: token %d is id %d, outside the policy's vocabulary [0,%d)", i, j, id, vocab)
		}
	}
	return nil
}

// appendJSONL appends v as one line to the file at path.
func appendJSONL(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close() // the write's error is the one to report
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// groupOf converts one ScoredData group. Its advantages are the batch's,
// or est's of its scores when it carries none; a sequence the environment
// marked set_advantage_to_zero gets 0. Under credit reward.CreditRole
// they are roleAdvantages'.
func groupOf(sd ScoredData, est reward.Estimator, credit string) (rl.Group, error) {
	n := len(sd.Tokens)
	switch {
	case n == 0 && len(sd.Masks) == 0 && len(sd.Scores) == 0:
		// An item whose rollouts gave the pushed roles nothing (the API
		// takes such a group only from a trainer asking for batches of
		// groups): nothing to train, not a fault.
		return rl.Group{Empty: true}, nil
	case len(sd.Masks) != n || len(sd.Scores) != n:
		return rl.Group{}, fmt.Errorf("%d sequences, %d masks, %d scores", n, len(sd.Masks), len(sd.Scores))
	case len(sd.InferenceLogprobs) != n:
		return rl.Group{}, fmt.Errorf("%d sequences but %d inference_logprobs: the trainer needs the sampler's logprobs of every sequence (environments must send inference_logprobs)", n, len(sd.InferenceLogprobs))
	case sd.Advantages != nil && len(sd.Advantages) != n:
		return rl.Group{}, fmt.Errorf("%d sequences but %d advantages", n, len(sd.Advantages))
	}
	var computed []float64
	byRole := credit == reward.CreditRole
	if byRole {
		var err error
		if computed, err = RoleAdvantages(sd, est); err != nil {
			return rl.Group{}, err
		}
	} else if sd.Advantages == nil {
		if est == reward.RLOO && n < 2 {
			// RLOO has no advantage for a lone sequence: the group trains
			// nothing, and the step counts it as failed.
			return rl.Group{}, nil
		}
		grp, err := reward.NewGroup(est, sd.Scores)
		if err != nil {
			return rl.Group{}, fmt.Errorf("advantages of the scores: %w", err)
		}
		computed = grp.Advantages
	}
	var g rl.Group
	for i := range n {
		e, err := rl.FromTokens(sd.Tokens[i], sd.Masks[i], sd.InferenceLogprobs[i])
		if err != nil {
			return rl.Group{}, fmt.Errorf("sequence %d: %w", i, err)
		}
		e.Node, e.Calls = fmt.Sprintf("sequence %d", i), 1
		ro := rl.ScoredRollout{Episodes: []rl.Episode{e}, Reward: sd.Scores[i], HasAdvantage: true}
		if computed != nil {
			ro.Advantage = computed[i]
		} else if ro.Advantage, err = sequenceAdvantage(sd.Advantages[i], sd.Masks[i]); err != nil {
			return rl.Group{}, fmt.Errorf("sequence %d: %w", i, err)
		}
		if i < len(sd.Overrides) {
			ov := ReadSequenceOverride(sd.Overrides[i])
			if ov.SetAdvantageToZero && !byRole {
				ro.Advantage = 0 // under role credit RoleAdvantages applied it
			}
			outcomeOf(&ro, ov)
		}
		g.Rollouts = append(g.Rollouts, ro)
	}
	return g, nil
}

// RoleAdvantages gives each sequence of sd its advantage under credit per
// role. It runs reward.RoleCredit under est over the samples the sequences
// say they are (OverrideRole, OverrideQuestion, OverrideSampleCorrect). Each
// is rewarded by its own result, else by its score, in the group's order.
// This is the in-process rule when the sequences are an environment's
// episodes' samples in order, as process --push sends them. In a group marked
// set_advantage_to_zero (a tie) a sequence without its own result gets 0, as
// under task credit. A sequence that names no role is an error: the group
// cannot be credited per role.
func RoleAdvantages(sd ScoredData, est reward.Estimator) ([]float64, error) {
	n := len(sd.Tokens)
	if len(sd.Scores) != n {
		return nil, fmt.Errorf("role credit: %d sequences, %d scores", n, len(sd.Scores))
	}
	eps := make([]*delegate.Episode, n)
	zero := make([]bool, n)
	for i := range n {
		var ov SequenceOverride
		if i < len(sd.Overrides) {
			ov = ReadSequenceOverride(sd.Overrides[i])
		}
		if ov.Role == "" {
			return nil, fmt.Errorf("role credit: sequence %d names no role: credit per role needs each sequence's %s and %s (delegate's environments send them)", i, OverrideRole, OverrideQuestion)
		}
		// One episode per sequence: RoleCredit takes samples in order and
		// reads only their role, question, own result and reward.
		eps[i] = &delegate.Episode{
			Samples: []delegate.Sample{{Role: ov.Role, Question: ov.Question, Correct: ov.SampleCorrect, Trained: true}},
			Outcome: delegate.Outcome{Reward: sd.Scores[i]},
		}
		zero[i] = ov.SetAdvantageToZero && ov.SampleCorrect == nil
	}
	credits, err := reward.RoleCredit(est, eps)
	if err != nil {
		return nil, err
	}
	adv := make([]float64, n)
	for i := range n {
		if !zero[i] {
			adv[i] = credits[i][0].Advantage
		}
	}
	return adv, nil
}

// outcomeOf reads into ro what a delegate environment says its rollout was
// scored from (OverrideCorrect and the others). It feeds the step's
// metrics: accuracy, delegation rate, and the numbers as scalars under
// the in-process trainer's names. Other environments send none; a value
// of the wrong type is left out.
func outcomeOf(ro *rl.ScoredRollout, ov SequenceOverride) {
	ro.Correct = ov.Correct != nil && *ov.Correct
	ro.Delegated = ov.Delegated != nil && *ov.Delegated
	ro.Scalars = ov.Scalars()
}

// sequenceAdvantage is the advantage of a sequence with per-token
// advantages. It is the same value at every trained token, as this trainer
// weighs a rollout's tokens alike.
func sequenceAdvantage(adv []float64, masks []int) (float64, error) {
	if len(adv) != len(masks) {
		return 0, fmt.Errorf("%d advantages for %d tokens", len(adv), len(masks))
	}
	a, set := 0.0, false
	for j, m := range masks {
		if m == delegate.MaskIgnore {
			continue
		}
		v := adv[j]
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("advantage %v at token %d", v, j)
		}
		if set && v != a {
			return 0, fmt.Errorf("advantages differ between trained tokens (%v and %v at token %d): this trainer takes one advantage per sequence", a, v, j)
		}
		a, set = v, true
	}
	return a, nil
}

// orderBatch puts a batch's groups in group_overrides.batch_order order.
// An environment of train --processes sends its item's place among the
// step's items there. The in-process trainer orders a step's groups the
// same way, so the update sums them in the same order. A batch where some
// group has none stays in the order it came.
func orderBatch(batch []ScoredData) {
	key := func(sd ScoredData) (int, bool) {
		v := ReadGroupOverride(sd.GroupOverrides).BatchOrder
		if v == nil {
			return 0, false
		}
		return *v, true
	}
	for _, sd := range batch {
		if _, ok := key(sd); !ok {
			return
		}
	}
	slices.SortStableFunc(batch, func(a, b ScoredData) int {
		ka, _ := key(a)
		kb, _ := key(b)
		return cmp.Compare(ka, kb)
	})
}
