package train

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/models"
	nntrain "github.com/delegatelab/delegate/nn/train"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/world"
)

// The modes of a run.
const (
	// ModeRoute trains the delegator under route: it has the delegate
	// tool and the solver answers what it hands over.
	ModeRoute = "route"
	// ModeMLPO trains a leader under lead with frozen peers' answers in
	// its context. It trains on the items most peers do not already solve.
	ModeMLPO = "mlpo"
)

// The policies a route run trains (Config.Train).
const (
	// TrainDelegator trains the delegator; the solver answers greedily
	// with its pretrained weights, in training as in the table.
	TrainDelegator = "delegator"
	// TrainSolver trains the solver on the calls the pretrained delegator
	// makes to it. The delegator is greedy, as in the table; the solver
	// samples at the trainer's temperature.
	TrainSolver = "solver"
	// TrainBoth trains both from the same rollouts, each on its own
	// samples of them.
	TrainBoth = "both"
)

// Config sets a training run. DefaultConfig gives the documented defaults.
type Config struct {
	// Mode is ModeRoute (default), ModeMLPO or ModeDecompose.
	Mode string `json:"mode"`
	// Train is which policies a route run trains: TrainDelegator (the
	// default), TrainSolver or TrainBoth. Under route the delegator's
	// turns and the solver's answers are separate samples (every call to
	// the solver starts one), each policy's samples of a step form its
	// own groups with the advantages of their rollouts, and each policy
	// has its own trainer (rl.Lockstep): the delegator's in OutDir, the
	// solver's in OutDir/SolverDir. MLPO trains its leader only.
	Train string `json:"train"`
	// Credit is how a route run's samples get advantages.
	// reward.CreditTask, the default, gives each sample its rollout's
	// advantage. reward.CreditRole gives each trained role's samples
	// advantages against the role's own (reward.RoleCredit), the solver
	// rewarded by whether its answer to the question it was handed is
	// right. It changes nothing for the delegator alone. reward.CreditStep
	// trains the delegator on a reward that charges 1 for each wrong
	// answer taken from the solver (stepScorer). reward.CreditDecision
	// gives each delegate call its own advantage (creditDecisions).
	// reward.CreditCounterfactual gives it its own value against inline's 0
	// (creditCounterfactual). "" is task.
	Credit string `json:"credit,omitempty"`
	// SkipCredit, with decision or counterfactual credit, also gives a
	// delegate call's advantage to the token at which the delegator wrote
	// a later step's block in place of the delegated step's (skipTokens).
	SkipCredit bool `json:"skip_credit,omitempty"`
	// CentreCalls, with counterfactual credit, gives each call its value
	// less the mean of the step's other calls on the same operation,
	// capped at 0, where those calls both gain and lose (creditCentred).
	CentreCalls bool `json:"centre_calls,omitempty"`
	// InlineCredit, with counterfactual credit, gives the first token of
	// each block the delegator writes for a step advantage 0, the value of
	// computing inline, in place of its rollout's (creditInline).
	InlineCredit bool `json:"inline_credit,omitempty"`
	// Coverage is the solver's coverage in a named world (world.Named);
	// the zero value is the default world's. When it narrows the products,
	// the table adds the threshold rule fitted on training items, and SFT
	// learns the coverage's selective policy.
	Coverage world.Coverage `json:"coverage,omitzero"`
	// Solver and Delegator are nn checkpoint directories: the frozen
	// sub-agent and the policy's starting weights. "" means the shipped model
	// embedded in the binary (package models). That is the solver, and the
	// router, or under ModeDecompose the planner. Solver may name another
	// shipped model as "shipped:NAME" (the digits world's solver).
	Solver    string `json:"solver"`
	Delegator string `json:"delegator"`
	// Peers are MLPO's frozen peers, taken in turn. Each is a checkpoint
	// directory or a shipped model as "shipped:NAME". Peer i, from 0, of
	// the K answers with Peers[i mod len(Peers)]. Default: "shipped:peer" and
	// "shipped:delegator", two models whose mistakes differ.
	Peers []string `json:"peers,omitempty"`
	// OutDir receives metrics.jsonl, checkpoint/, eval.jsonl and
	// table.md. A run in an OutDir that holds an earlier run's files
	// resumes it. Required.
	OutDir string `json:"out_dir"`
	// TrainTime bounds the training phase's time, rollouts and updates. It
	// is summed over every process of a resumed run, as the metrics log's
	// seconds. Training stops at RL.Steps or when it is spent, whichever
	// comes first. 0: no bound (the default; Deadline bounds it).
	TrainTime time.Duration `json:"train_time"`
	// Deadline, when set, is when this invocation should be done, table
	// included. Training stops early enough to leave the final evaluation
	// the time the pretrained policy's took. The baseline phase measures
	// that and keeps it in TimingFile. The baselines and the final
	// evaluation themselves are not cut short. Not part of a run's
	// identity: each resumed invocation has its own.
	Deadline time.Time `json:"-"`
	// Traces, when set, receives the trace of every strategy run of the
	// job as the run returns. That covers rollouts, baselines and
	// evaluations. It is called from many goroutines at once and must not
	// block. Not part of a run's identity.
	Traces func(*delegate.Trace) `json:"-"`
	// RL is the trainer's config; PolicyRole and OutDir are set by Run.
	// Its MaxNewTokens caps every model call of the run, the table's too.
	// Defaults: rl.DefaultConfig with 4 items of 8 rollouts a step, 200
	// steps (the time bound usually ends training first), a constant
	// learning rate of 1e-4 after 2 warmup steps, MaxNewTokens 1024 (the
	// world's budget of a route turn), concurrency 32 and the logprob
	// check every 10 steps.
	RL rl.Config `json:"rl"`
	// Reward weighs correctness, delegator tokens and sub-agent calls.
	// Default world.DefaultReward. Its FormatPenalty (at most 0) applies
	// under ModeDecompose only, added to the reward of a rollout (and of a
	// table's item) that ended without a proper answer; route and MLPO
	// count such a run wrong and nothing more, and want it 0. Its Gate,
	// route only, makes it success-gated (world.RewardGated): training,
	// the credit's call values, the rule searches and every arm of the
	// table then use the gated reward.
	Reward reward.Graded `json:"reward"`
	// RewardKind names the reward that scores route's training rollouts.
	// "" or reward.KindGraded is Reward, the default. Another of
	// reward.Kinds is that kind of CostReward, scored at the trainer's
	// step so that critical_path's bonus anneals. The table keeps Reward.
	RewardKind string `json:"reward_kind,omitempty"`
	// CostReward holds every cost-aware kind's settings. Default
	// reward.DefaultConfig; its Kind is not read.
	CostReward reward.Config `json:"cost_reward"`
	// Prices prices the calls of the table. Default world.DefaultPrices.
	Prices world.Prices `json:"prices"`
	// World generates the problems; Seed seeds them. Training problems
	// come from the train split, evaluation items from EvalSplit.
	// Defaults world.DefaultConfig() and 1.
	World world.Config `json:"world"`
	Seed  uint64       `json:"seed"`
	// EvalSplit is the split of the table's items. It is "validation"
	// while choosing settings, and "test", the default, for the reported
	// table, read once.
	EvalSplit string `json:"eval_split"`
	// RuleItems is how many training problems each per-position rule runs
	// on. The best rule is the table's strongest input-independent
	// baseline. Default 200.
	RuleItems int `json:"rule_items"`
	// CacheMinTokens is the shortest shared prefix of a conversation's
	// turns that the table prices as cached input. Real APIs cache only
	// long prefixes; OpenAI needs 1,024 tokens or more. Default 1024; 0 prices
	// every shared prefix as cached.
	CacheMinTokens int `json:"cache_min_tokens"`
	// TrainProblems is the size of the training pool. Default 2000.
	TrainProblems int `json:"train_problems"`
	// EvalItems is the number of held-out problems every arm of the table
	// is run on. Default 100.
	EvalItems int `json:"eval_items"`
	// EvalTemperature is the delegator's sampling temperature in the
	// table (the solver and the peers are greedy). Default 0: greedy.
	EvalTemperature float64 `json:"eval_temperature"`
	// StrictToolCalls makes route's delegator write well-formed calls
	// only, in training and in the table. Sampling enforces that each call
	// names the delegate tool with valid arguments. A malformed call
	// otherwise ends its rollout, and at temperature 1 it can split a
	// group. The logprobs the trainer gets stay the model's own, before
	// the mask. Default false.
	StrictToolCalls bool `json:"strict_tool_calls,omitempty"`
	// EvalConcurrency bounds the table's items in flight. Default 16.
	EvalConcurrency int `json:"eval_concurrency"`
	// SolverSamples is how many answers the solver samples per held-out
	// call, at the trainer's temperature, in the role report of a run that
	// trains it (RoleReport). 0 asks for greedy answers only. Default
	// DefaultSolverSamples.
	SolverSamples int `json:"solver_samples"`
	// HandedCalls adds a figure to the role report: the solver judged on
	// the calls the delegator of the system as trained hands it on the
	// held-out items (RoleReport.Handed), with its check. The held-out
	// records then keep the calls' questions. Only route with the solver
	// trained. Default false: every output as without it.
	HandedCalls bool `json:"handed_calls,omitempty"`
	// MaxTurns bounds route's delegator turns. Default 6 (the default
	// world's problems take at most 5 with every step delegated).
	MaxTurns int `json:"max_turns"`
	// PeerCount is K, the peers of MLPO's lead strategy. Default 3.
	PeerCount int `json:"peer_count"`
	// PeerSamples is how many sampled peer answers per item estimate how
	// often peers solve it, for MLPO's filter. Default 4.
	PeerSamples int `json:"peer_samples"`
	// FilterMaxRate drops, in MLPO, the training items whose peers solve
	// at least that share of the time. Default 0.75.
	FilterMaxRate float64 `json:"filter_max_rate"`
	// Parity, under ModeDecompose, rewards a rollout with the reference
	// environment's buckets (reward.Parity). They compare its answer with
	// the single-agent baseline's, in place of the graded comparison
	// (decompose.go).
	Parity bool `json:"parity,omitempty"`
	// BatchItems makes FromAPI ask for batches of RL.ItemsPerStep groups
	// (atropos.Registration.BatchGroups), not of items × group size
	// sequences. A step then trains a step's items whatever the solver's
	// samples add to each group. delegate api honours it; Atropos's
	// server counts sequences. Not part of a run's identity.
	BatchItems bool `json:"-"`
}

// ShippedPrefix names a shipped model (package models) where a checkpoint
// directory is expected: "shipped:peer".
const ShippedPrefix = "shipped:"

// SolverDir is the solver trainer's directory in OutDir (its metrics.jsonl
// and checkpoint/) when Train is TrainSolver or TrainBoth.
const SolverDir = "solver"

// RouterModel is the shipped model a route run starts from when
// Config.Delegator is "". It is the planner pretrained further on the
// default world under route, with the solver's answers handed back
// without its working (models/README.md).
const RouterModel = "router"

// StartModel is the shipped model the policy starts from when
// Config.Delegator is "". That is the router under route, the planner
// under decompose and the delegator under mlpo.
func (c Config) StartModel() string { return newMode(c.Mode, nil).startModel() }

// trainsDelegator and trainsSolver say which policies the run trains.
func (c Config) trainsDelegator() bool { return c.Train == TrainDelegator || c.Train == TrainBoth }
func (c Config) trainsSolver() bool    { return c.Train == TrainSolver || c.Train == TrainBoth }

// roleCredit says whether the run gives each role its own credit.
func (c Config) roleCredit() bool { return c.Credit == reward.CreditRole }

// peerCheckpoints are the peers' checkpoints, Peers or the default team.
func (c Config) peerCheckpoints() []string {
	if len(c.Peers) == 0 {
		return []string{ShippedPrefix + "peer", ShippedPrefix + "delegator"}
	}
	return c.Peers
}

// DefaultConfig returns the defaults noted on each field, with the
// shipped checkpoints and OutDir runs/train.
func DefaultConfig() Config {
	r := rl.DefaultConfig()
	r.GroupSize, r.ItemsPerStep, r.Steps = 8, 4, 200
	r.Schedule = nntrain.Schedule{Warmup: 2, Total: 200, MaxLR: 1e-4, MinLR: 1e-4}
	r.MaxNewTokens = 1024
	r.Concurrency = 32
	r.LogprobCheckEvery = 10
	r.Estimator = reward.GRPO
	r.PolicyRole = RoleDelegator
	return Config{
		Mode:            ModeRoute,
		Train:           TrainDelegator,
		Credit:          reward.CreditTask,
		OutDir:          "runs/train",
		RL:              r,
		Reward:          world.DefaultReward(),
		CostReward:      reward.DefaultConfig(),
		Prices:          world.DefaultPrices(),
		World:           world.DefaultConfig(),
		Seed:            1,
		EvalSplit:       world.Test.String(),
		RuleItems:       200,
		CacheMinTokens:  1024,
		TrainProblems:   2000,
		EvalItems:       100,
		EvalConcurrency: 16,
		SolverSamples:   DefaultSolverSamples,
		MaxTurns:        6,
		PeerCount:       3,
		PeerSamples:     4,
		FilterMaxRate:   0.75,
	}
}

// The MLPO recipe's settings that differ from DefaultConfig's. delegate
// train --mode mlpo applies them unless its flags say otherwise.
const (
	MLPOKLBeta    = 0.04 // the leader keeps its format alone
	MLPOPeerCount = 2
)

// RLSeed is the seed of the trainer's item order and rollouts
// (rl.Config.Seed), the run's Seed when that is 0.
func (c Config) RLSeed() uint64 {
	if c.RL.Seed == 0 {
		return c.Seed
	}
	return c.RL.Seed
}

// Validate checks every field, naming the key of each problem.
func (c Config) Validate() error {
	var v violations
	c.validateMode(&v)
	c.validateTraining(&v)
	c.validateReward(&v)
	c.validateEval(&v)
	c.validatePeers(&v)
	if len(v.errs) > 0 {
		return fmt.Errorf("train config: %w", errors.Join(v.errs...))
	}
	return nil
}

// violations collects what Validate finds wrong, in the order found.
type violations struct{ errs []error }

// bad records that key's value breaks the rule format says.
func (v *violations) bad(key, format string, args ...any) {
	v.add(fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}

func (v *violations) add(err error) { v.errs = append(v.errs, err) }

// validateMode checks the mode and the settings that go with one mode.
func (c Config) validateMode(v *violations) {
	if c.Mode != ModeRoute && c.Mode != ModeMLPO && c.Mode != ModeDecompose {
		v.bad("mode", "must be %q, %q or %q, got %q", ModeRoute, ModeMLPO, ModeDecompose, c.Mode)
	}
	switch {
	case c.Train != TrainDelegator && c.Train != TrainSolver && c.Train != TrainBoth:
		v.bad("train", "must be %q, %q or %q, got %q", TrainDelegator, TrainSolver, TrainBoth, c.Train)
	case c.Mode == ModeMLPO && c.Train != TrainDelegator:
		v.bad("train", "mode %s trains its leader only (%q), got %q", ModeMLPO, TrainDelegator, c.Train)
	case c.Mode == ModeDecompose && c.Train != TrainDelegator:
		v.bad("train", "mode %s trains its delegator only (%q), got %q", ModeDecompose, TrainDelegator, c.Train)
	}
	switch _, err := reward.ParseCredit(c.Credit); {
	case err != nil && c.Credit != "":
		v.bad("credit", "%v", err)
	case c.Credit == reward.CreditRole && c.Mode != ModeRoute:
		v.bad("credit", "%q goes with mode %s, not %s", c.Credit, ModeRoute, c.Mode)
	case (c.Credit == reward.CreditStep || c.Credit == reward.CreditDecision || c.Credit == reward.CreditCounterfactual) && (c.Mode != ModeRoute || c.Train != TrainDelegator):
		v.bad("credit", "%q goes with mode %s training the %s, not mode %s training %s", c.Credit, ModeRoute, TrainDelegator, c.Mode, c.Train)
	}
	if c.SkipCredit && c.Credit != reward.CreditDecision && c.Credit != reward.CreditCounterfactual {
		v.bad("skip_credit", "goes with credit %q or %q, not %q", reward.CreditDecision, reward.CreditCounterfactual, c.Credit)
	}
	if c.CentreCalls && c.Credit != reward.CreditCounterfactual {
		v.bad("centre_calls", "goes with credit %q, not %q", reward.CreditCounterfactual, c.Credit)
	}
	if c.InlineCredit && c.Credit != reward.CreditCounterfactual {
		v.bad("inline_credit", "goes with credit %q, not %q", reward.CreditCounterfactual, c.Credit)
	}
	if err := c.Coverage.Validate(); err != nil {
		v.add(err)
	}
	if c.Parity && c.Mode != ModeDecompose {
		v.bad("parity", "goes with mode %s, not %s", ModeDecompose, c.Mode)
	}
}

// validateTraining checks the output, the starting models and RL.
func (c Config) validateTraining(v *violations) {
	if c.OutDir == "" {
		v.bad("out_dir", "required")
	}
	if c.TrainTime < 0 {
		v.bad("train_time", "must not be negative, got %v", c.TrainTime)
	}
	if name, ok := strings.CutPrefix(c.Solver, ShippedPrefix); ok && !slices.Contains(models.Names, name) {
		v.bad("solver", "there is no shipped model %q (the shipped models are %v)", name, models.Names)
	}
	r := c.RL
	r.PolicyRole, r.OutDir = RoleDelegator, c.OutDir
	if err := r.Validate(); err != nil {
		v.add(err)
	}
	if err := c.World.Validate(); err != nil {
		v.add(fmt.Errorf("world: %w", err))
	}
}

// validateReward checks the reward's weights and penalty.
func (c Config) validateReward(v *violations) {
	for _, f := range []struct {
		key string
		v   float64
	}{{"reward.lambda", c.Reward.Lambda}, {"reward.mu", c.Reward.Mu}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			v.bad(f.key, "must be non-negative and finite, got %v", f.v)
		}
	}
	if !(c.Reward.FormatPenalty <= 0) || math.IsInf(c.Reward.FormatPenalty, 0) {
		v.bad("reward.format_penalty", "must be at most 0 and finite, got %v", c.Reward.FormatPenalty)
	}
	if !(c.Reward.Gate >= 0) || math.IsInf(c.Reward.Gate, 0) {
		v.bad("reward.gate", "must be non-negative and finite, got %v", c.Reward.Gate)
	}
	if c.Reward.Gate != 0 && c.Mode != ModeRoute {
		v.bad("reward.gate", "goes with mode %s, not %s", ModeRoute, c.Mode)
	}
	if c.Reward.Gate != 0 && c.Credit == reward.CreditStep {
		// Step credit charges 1 a wrong answer, which a gate fixes at −Gate.
		v.bad("reward.gate", "does not go with credit %q, which charges each wrong answer taken", c.Credit)
	}
	if c.Reward.FormatPenalty != 0 && c.Mode != ModeDecompose {
		v.bad("reward.format_penalty", "applies to mode %s only (route and mlpo count a run without a proper answer wrong), got %v under %s", ModeDecompose, c.Reward.FormatPenalty, c.Mode)
	}
	if !c.costReward() {
		if c.RewardKind != "" && c.RewardKind != reward.KindGraded {
			v.bad("reward_kind", "want one of %v, got %q", reward.Kinds(), c.RewardKind)
		}
		return
	}
	if c.Mode != ModeRoute {
		v.bad("reward_kind", "%s goes with mode %s, not %s", c.RewardKind, ModeRoute, c.Mode)
	}
	if c.Credit == reward.CreditStep || c.Credit == reward.CreditDecision || c.Credit == reward.CreditCounterfactual {
		// Step, decision and counterfactual credit value wrong answers on the world's reward.
		v.bad("reward_kind", "%s does not go with credit %q, which charges the world's reward", c.RewardKind, c.Credit)
	}
	if _, err := c.trainingReward(); err != nil {
		v.bad("cost_reward", "%v", err)
	}
}

// costReward says whether RewardKind names a cost-aware kind of
// reward.Kinds, not the graded Reward.
func (c Config) costReward() bool {
	return c.RewardKind != "" && c.RewardKind != reward.KindGraded && slices.Contains(reward.Kinds(), c.RewardKind)
}

// trainingReward is the reward function of route's training rollouts:
// Reward's, or the kind of CostReward that RewardKind names.
func (c Config) trainingReward() (func(reward.Outcome) float64, error) {
	if !c.costReward() {
		return c.Reward.Reward, nil
	}
	rc := c.CostReward
	rc.Kind = c.RewardKind
	return rc.Func()
}

// trainScorer is the scorer of route's training rollouts: Scorer's, with
// the reward trainingReward selects. Validate has checked it.
func (c Config) trainScorer() *rollout.RewardScorer {
	s := Scorer(c.Reward)
	if fn, err := c.trainingReward(); err == nil {
		s.Reward = fn
	}
	return s
}

// validateEval checks the problems and the evaluation's settings.
func (c Config) validateEval(v *violations) {
	if c.TrainProblems < c.RL.ItemsPerStep {
		v.bad("train_problems", "must be at least rl.items_per_step (%d), got %d", c.RL.ItemsPerStep, c.TrainProblems)
	}
	if sp, err := world.ParseSplit(c.EvalSplit); err != nil || sp == world.Train {
		v.bad("eval_split", "must be validation or test, got %q", c.EvalSplit)
	}
	if c.RuleItems < 1 {
		v.bad("rule_items", "must be at least 1, got %d", c.RuleItems)
	}
	if c.CacheMinTokens < 0 {
		v.bad("cache_min_tokens", "must not be negative, got %d", c.CacheMinTokens)
	}
	if c.EvalItems < 1 {
		v.bad("eval_items", "must be at least 1, got %d", c.EvalItems)
	}
	if !(c.EvalTemperature >= 0 && c.EvalTemperature <= 2) {
		v.bad("eval_temperature", "must be in [0, 2], got %v", c.EvalTemperature)
	}
	if c.EvalConcurrency < 1 {
		v.bad("eval_concurrency", "must be at least 1, got %d", c.EvalConcurrency)
	}
	if c.SolverSamples < 0 {
		v.bad("solver_samples", "must not be negative, got %d", c.SolverSamples)
	}
	if c.HandedCalls && (c.Mode != ModeRoute || !c.trainsSolver()) {
		v.bad("handed_calls", "needs mode %s with the solver trained, got mode %s, train %s", ModeRoute, c.Mode, c.Train)
	}
	if c.MaxTurns < 1 {
		v.bad("max_turns", "must be at least 1, got %d", c.MaxTurns)
	}
}

// validatePeers checks MLPO's peers and filter.
func (c Config) validatePeers(v *violations) {
	if c.Mode != ModeMLPO {
		return
	}
	if c.PeerCount < 1 {
		v.bad("peer_count", "must be at least 1, got %d", c.PeerCount)
	}
	if c.PeerSamples < 1 {
		v.bad("peer_samples", "must be at least 1, got %d", c.PeerSamples)
	}
	if !(c.FilterMaxRate > 0 && c.FilterMaxRate <= 1) {
		v.bad("filter_max_rate", "must be in (0, 1], got %v", c.FilterMaxRate)
	}
	for i, p := range c.Peers {
		name, shipped := strings.CutPrefix(p, ShippedPrefix)
		switch {
		case p == "":
			v.bad("peers", "entry %d is empty", i+1)
		case shipped && !slices.Contains(models.Names, name):
			v.bad("peers", "entry %d: there is no shipped model %q (the shipped models are %v)", i+1, name, models.Names)
		}
	}
}
