package train

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/trajectory/atropos"
)

// FromAPI trains the delegator on the batches of a trajectory API, as an
// Atropos trainer does: it registers (batch_size = items per step × group
// size sequences), then for each step pulls GET /batch?step=N, trains on
// it, and writes a checkpoint of the step under OutDir (as Run does, so
// that an interrupted run resumes from its last step and fetches the next
// batch again). Environments (process --push) make the rollouts; this
// process only learns. Each sequence of a group is one rollout of it: its
// score is the rollout's reward, and its advantage the one the batch
// carries (the same at every trained token), or, when the group carries
// none, the advantage Config.RL.Estimator gives its scores (Atropos's
// example trainer normalises the scores within the group, as GRPO does);
// set_advantage_to_zero overrides are honoured. The behaviour
// logprobs are the batch's inference_logprobs, which every group must
// have: a group sampled by an older policy than the trainer's (its
// group_overrides.policy_version, the trainer step it was sampled at, is
// behind; or it carries none) is trained with truncated importance
// weights (rl.Config.MaxImportanceWeight). A group the policy cannot
// train on is quarantined (QuarantineFile) and the step goes on without
// it. The registration carries the policy's vocabulary and context, so
// that delegate's API refuses such groups first.
func FromAPI(ctx context.Context, cfg Config, client *atropos.TrainerClient, progress chan<- rl.Progress) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("train --api: %w", err)
	}
	policy, err := loadCheckpoint(cfg.StartModel(), cfg.Delegator)
	if err != nil {
		return fmt.Errorf("train --api: %w", err)
	}
	r := cfg.RL
	r.PolicyRole, r.OutDir, r.CheckpointEvery = RoleDelegator, cfg.OutDir, 1
	// The environments' logprobs are checked against the trainer's at the
	// first step only: later batches may come from an older policy (the
	// API bounds how much older), where the two rightly differ.
	r.LogprobCheckEvery = r.Steps + 1
	src := &apiSource{client: client, estimator: r.Estimator, vocab: policy.Config.Vocab, context: policy.Config.Context,
		quarantine: filepath.Join(cfg.OutDir, QuarantineFile)}
	t, err := rl.New(r, policy, src, progress)
	if err != nil {
		return fmt.Errorf("train --api: %w", err)
	}
	reg := atropos.Registration{
		BatchSize: r.ItemsPerStep * r.GroupSize, MaxTokenLen: policy.Config.Context, VocabSize: policy.Config.Vocab,
		CheckpointDir: rl.CheckpointDir(cfg.OutDir), SaveCheckpointInterval: 1, NumSteps: r.Steps,
		WandbGroup: "delegate", WandbProject: "delegate",
	}
	if err := client.Register(ctx, reg); err != nil {
		return fmt.Errorf("train --api %s: register: %w", client.URL, err)
	}
	if err := t.Run(ctx); err != nil {
		return fmt.Errorf("train --api: %w", err)
	}
	return nil
}

// QuarantineFile is the log, in OutDir, of the groups train --api could
// not train on: one QuarantineRecord per line.
const QuarantineFile = "quarantine.jsonl"

// QuarantineVersion is the format version of a QuarantineRecord.
const QuarantineVersion = 1

// QuarantineRecord is a group of a batch that the trainer set aside: why,
// and the group as the API sent it. A step redone after a restart
// records its groups again.
type QuarantineRecord struct {
	Version int                `json:"version"`
	Step    int                `json:"step"`
	Group   int                `json:"group"` // its index in the step's batch, once ordered
	Reason  string             `json:"reason"`
	Data    atropos.ScoredData `json:"data"`
}

// apiSource is rl.Source over a trajectory API's batches. A group the
// policy cannot train on is quarantined: logged to quarantine and handed
// to the trainer as rl.Group.Quarantined, so the step goes on without it.
type apiSource struct {
	client         *atropos.TrainerClient
	estimator      reward.Estimator
	vocab, context int // the policy's
	quarantine     string
}

// Next fetches the batch of step (again, if a crashed trainer had it
// already) and turns it into groups.
func (s *apiSource) Next(ctx context.Context, step int) ([]rl.Group, error) {
	s.client.Last = step - 1
	b, err := s.client.Next(ctx)
	if err != nil {
		return nil, fmt.Errorf("batch of step %d: %w", step, err)
	}
	orderBatch(b.Batch)
	groups := make([]rl.Group, 0, len(b.Batch))
	for gi, sd := range b.Batch {
		err := usable(sd, s.vocab, s.context)
		var g rl.Group
		if err == nil {
			g, err = groupOf(sd, s.estimator)
		}
		if err != nil {
			rec := QuarantineRecord{Version: QuarantineVersion, Step: step, Group: gi, Reason: err.Error(), Data: sd}
			if werr := appendJSONL(s.quarantine, rec); werr != nil {
				return nil, fmt.Errorf("batch of step %d, group %d: quarantine (%v): %w", step, gi, err, werr)
			}
			groups = append(groups, rl.Group{Quarantined: err.Error()})
			continue
		}
		// The parameters before this step are version step-1.
		g.Staleness = -1
		if v := atropos.ReadGroupOverride(sd.GroupOverrides).PolicyVersion; v != nil {
			g.Staleness = max(step-1-*v, 0)
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// usable checks what the API may not have checked (an API without the
// trainer's vocab_size, or another server): every token id within the
// policy's vocabulary and every sequence within its context.
func usable(sd atropos.ScoredData, vocab, maxLen int) error {
	for i, toks := range sd.Tokens {
		if len(toks) > maxLen {
			return fmt.Errorf("sequence %d has %d tokens, over the policy's context of %d", i, len(toks), maxLen)
		}
		for j, id := range toks {
			if id < 0 || id >= vocab {
				return fmt.Errorf("sequence %d: token %d is id %d, outside the policy's vocabulary [0,%d)", i, j, id, vocab)
			}
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
// marked set_advantage_to_zero gets 0.
func groupOf(sd atropos.ScoredData, est reward.Estimator) (rl.Group, error) {
	n := len(sd.Tokens)
	switch {
	case n == 0:
		return rl.Group{}, errors.New("no sequences")
	case len(sd.Masks) != n || len(sd.Scores) != n:
		return rl.Group{}, fmt.Errorf("%d sequences, %d masks, %d scores", n, len(sd.Masks), len(sd.Scores))
	case len(sd.InferenceLogprobs) != n:
		return rl.Group{}, fmt.Errorf("%d sequences but %d inference_logprobs: the trainer needs the sampler's logprobs of every sequence (environments must send inference_logprobs)", n, len(sd.InferenceLogprobs))
	case sd.Advantages != nil && len(sd.Advantages) != n:
		return rl.Group{}, fmt.Errorf("%d sequences but %d advantages", n, len(sd.Advantages))
	}
	var computed []float64
	if sd.Advantages == nil {
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
			ov := atropos.ReadSequenceOverride(sd.Overrides[i])
			if ov.SetAdvantageToZero {
				ro.Advantage = 0
			}
			outcomeOf(&ro, ov)
		}
		g.Rollouts = append(g.Rollouts, ro)
	}
	return g, nil
}

// outcomeOf reads into ro what a delegate environment says its rollout
// was scored from (atropos.OverrideCorrect and the others), for the step's
// metrics: accuracy, delegation rate, and the numbers as scalars under
// the in-process trainer's names. Other environments send none; a value
// of the wrong type is left out.
func outcomeOf(ro *rl.ScoredRollout, ov atropos.SequenceOverride) {
	ro.Correct = ov.Correct != nil && *ov.Correct
	ro.Delegated = ov.Delegated != nil && *ov.Delegated
	ro.Scalars = ov.Scalars()
}

// sequenceAdvantage is the advantage of a sequence whose per-token
// advantages are given: the same value at every trained token, as this
// trainer weighs a rollout's tokens alike.
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

// orderBatch puts a batch's groups in the order of their
// group_overrides.batch_order (an environment of train --processes sends
// its item's place among the step's items), as the in-process trainer
// orders a step's groups, so that the update sums them in the same order;
// a batch where some group has none stays in the order it came.
func orderBatch(batch []atropos.ScoredData) {
	key := func(sd atropos.ScoredData) (int, bool) {
		v := atropos.ReadGroupOverride(sd.GroupOverrides).BatchOrder
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
	slices.SortStableFunc(batch, func(a, b atropos.ScoredData) int {
		ka, _ := key(a)
		kb, _ := key(b)
		return cmp.Compare(ka, kb)
	})
}
