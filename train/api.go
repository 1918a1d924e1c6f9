package train

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/trajectory/atropos"
	"github.com/delegatelab/delegate/world/transcript"
)

// FromAPI trains the roles Config.Train names on a trajectory API's
// batches, as an Atropos trainer does. It registers with batch_size =
// items per step × group size sequences, and with Config.BatchItems asks
// for batches of items per step groups. For each step it pulls GET
// /batch?step=N, trains on it and writes the step's checkpoint, as Run
// does: the delegator's in OutDir, the solver's in OutDir/SolverDir. An
// interrupted run resumes from its last step and fetches the next batch
// again. Environments (process --push) make the rollouts; this process
// only learns.
//
// Each sequence of a group is one sample. Its role (OverrideRole) routes
// it: route's sub-agent (strategy.RoleWeak, or RoleSubagent) to the
// solver, any other role, or none, to the delegator. A frozen role's
// sequences train nothing. Its score is its rollout's reward, and its
// advantage the one the batch carries (the same at every trained token),
// or, when the group carries none, the advantage Config.RL.Estimator gives
// its scores (Atropos's example trainer normalises the scores within the
// group, as GRPO does); set_advantage_to_zero overrides are honoured.
// Under Config.Credit reward.CreditRole each sequence gets its sample's
// advantage among its role's samples instead (atropos.RoleAdvantages),
// from the role, question and own result each sequence's overrides name,
// computed over the whole group before it is split. The behaviour
// logprobs are the batch's inference_logprobs, which every group must
// have: a group sampled by an older policy than the trainer's (its
// group_overrides.policy_version, the trainer step it was sampled at, is
// behind; or it carries none) is trained with truncated importance
// weights (rl.Config.MaxImportanceWeight). A group a policy cannot
// train on is quarantined (QuarantineFile) and the step goes on without
// it. The registration carries the policies' vocabulary and context, so
// that delegate's API refuses such groups first.
func FromAPI(ctx context.Context, cfg Config, client *atropos.TrainerClient, progress chan<- rl.Progress) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("train --api: %w", err)
	}
	delegator, err := loadCheckpoint(cfg.StartModel(), cfg.Delegator)
	if err != nil {
		return fmt.Errorf("train --api: %w", err)
	}
	solver, err := loadCheckpoint("solver", cfg.Solver)
	if err != nil {
		return fmt.Errorf("train --api: %w", err)
	}
	r := cfg.RL
	r.PolicyRole, r.OutDir, r.CheckpointEvery = RoleDelegator, cfg.OutDir, 1
	// The environments' logprobs are checked against the trainer's at the
	// first step only: later batches may come from an older policy (the
	// API bounds how much older), where the two rightly differ.
	r.LogprobCheckEvery = r.Steps + 1
	sr := r
	sr.PolicyRole, sr.OutDir = RoleSubagent, filepath.Join(cfg.OutDir, SolverDir)
	sr.MaxNewTokens = min(transcript.StrategyConfig().Weak.MaxTokens, r.MaxNewTokens)
	src := &atropos.Source{Client: client, Estimator: r.Estimator, Credit: cfg.Credit, Vocab: delegator.Config.Vocab, Context: delegator.Config.Context,
		Quarantine: filepath.Join(cfg.OutDir, QuarantineFile)}
	views := &apiViews{src: src, views: []atropos.View{
		{Others: true, Vocab: delegator.Config.Vocab, Context: delegator.Config.Context},
		{Roles: SolverRoles, Vocab: solver.Config.Vocab, Context: solver.Config.Context},
	}}
	var trainers []*rl.Trainer
	lead := "" // the first trainer's directory, which the registration names
	add := func(c rl.Config, p *nn.Params, view int) error {
		views.trained = append(views.trained, view)
		var pr chan<- rl.Progress
		if len(trainers) == 0 {
			pr = progress // one report a step: the lead trainer's
		}
		t, err := rl.New(c, p, views.View(len(views.trained)-1), pr)
		if err != nil {
			return fmt.Errorf("train --api: %s: %w", c.PolicyRole, err)
		}
		trainers = append(trainers, t)
		if lead == "" {
			lead = c.OutDir
		}
		return nil
	}
	if cfg.trainsDelegator() {
		if err := add(r, delegator, 0); err != nil {
			return err
		}
	}
	if cfg.trainsSolver() {
		if err := add(sr, solver, 1); err != nil {
			return err
		}
	}
	reg := atropos.Registration{
		BatchSize: r.ItemsPerStep * r.GroupSize, MaxTokenLen: max(delegator.Config.Context, solver.Config.Context),
		VocabSize:     max(delegator.Config.Vocab, solver.Config.Vocab),
		CheckpointDir: rl.CheckpointDir(lead), SaveCheckpointInterval: 1, NumSteps: r.Steps,
		WandbGroup: "delegate", WandbProject: "delegate",
	}
	if cfg.BatchItems {
		reg.BatchGroups = r.ItemsPerStep
	}
	if err := client.Register(ctx, reg); err != nil {
		return fmt.Errorf("train --api %s: register: %w", client.URL, err)
	}
	if err := rl.Lockstep(ctx, trainers...); err != nil {
		return fmt.Errorf("train --api: %w", err)
	}
	return nil
}

// QuarantineFile is the log, in OutDir, of the groups train --api could
// not train on: one atropos.QuarantineRecord per line.
const QuarantineFile = "quarantine.jsonl"

// apiViews splits each step's batch among the trained roles' trainers.
// The first trainer's Next of a step fetches the batch
// (atropos.Source.NextViews); the others take their part of it. The
// trainers of rl.Lockstep step one after the other, so a batch is
// fetched once a step. A trainer asking for a step again, as one that
// is behind after a crash, gets it fetched again.
type apiViews struct {
	src     *atropos.Source
	views   []atropos.View
	trained []int // the view of each trainer, in Lockstep's order

	mu     sync.Mutex
	step   int
	groups [][]rl.Group // the step's groups of each view; nil once every trainer took its part
	taken  []bool       // which trainers took their part of groups
}

// View is the rl.Source of trainer i.
func (a *apiViews) View(i int) rl.Source { return apiView{a, i} }

type apiView struct {
	a *apiViews
	i int
}

func (v apiView) Next(ctx context.Context, step int) ([]rl.Group, error) {
	return v.a.next(ctx, step, v.i)
}

func (a *apiViews) next(ctx context.Context, step, i int) ([]rl.Group, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.groups == nil || a.step != step || a.taken[i] {
		groups, err := a.src.NextViews(ctx, step, a.views)
		if err != nil {
			return nil, err
		}
		a.step, a.groups, a.taken = step, groups, make([]bool, len(a.trained))
	}
	out := a.groups[a.trained[i]]
	a.taken[i] = true
	all := true
	for _, t := range a.taken {
		all = all && t
	}
	if all {
		a.groups = nil
	}
	return out, nil
}
