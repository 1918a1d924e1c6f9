package train

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/trajectory/atropos"
)

// FromAPI trains the delegator on a trajectory API's batches, as an
// Atropos trainer does. It registers with batch_size = items per step ×
// group size sequences. For each step it pulls GET /batch?step=N, trains
// on it and writes the step's checkpoint under OutDir, as Run does. An
// interrupted run resumes from its last step and fetches the next batch
// again. Environments (process --push) make the rollouts; this
// process only learns. Each sequence of a group is one rollout of it: its
// score is the rollout's reward, and its advantage the one the batch
// carries (the same at every trained token), or, when the group carries
// none, the advantage Config.RL.Estimator gives its scores (Atropos's
// example trainer normalises the scores within the group, as GRPO does);
// set_advantage_to_zero overrides are honoured. Under Config.Credit
// reward.CreditRole each sequence gets its sample's advantage among its
// role's samples instead (atropos.RoleAdvantages), from the role, question
// and own result each sequence's overrides name. The behaviour
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
	src := &atropos.Source{Client: client, Estimator: r.Estimator, Credit: cfg.Credit, Vocab: policy.Config.Vocab, Context: policy.Config.Context,
		Quarantine: filepath.Join(cfg.OutDir, QuarantineFile)}
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
// not train on: one atropos.QuarantineRecord per line.
const QuarantineFile = "quarantine.jsonl"
