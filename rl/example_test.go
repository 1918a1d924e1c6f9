package rl_test

import (
	"context"
	"fmt"
	"os"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
)

// exampleSource runs each step's rollouts in process and hands the groups to the trainer.
// rollout.Groups runs, scores and groups them, and computes the advantages.
type exampleSource struct {
	cfg       rl.Config
	questions []delegate.Task
	policy    func(seed int64) (delegate.Strategy, error)
	scorer    rollout.Scorer
}

func (s *exampleSource) Next(ctx context.Context, step int) ([]rl.Group, error) {
	G := s.cfg.GroupSize
	rcfg := rollout.DefaultConfig()
	rcfg.GroupSize, rcfg.Concurrency, rcfg.Estimator, rcfg.KeepTies, rcfg.TrainRoles = G, G, string(s.cfg.Estimator), true, []string{s.cfg.PolicyRole}
	build := func(item, k int) (delegate.Strategy, error) {
		return s.policy(int64(rl.RolloutSeed(s.cfg.Seed, step, item*G+k) >> 2))
	}
	groups, err := rollout.Groups(ctx, rcfg, s.questions, build, nil, s.scorer, nil)
	if err != nil {
		return nil, err
	}
	var out []rl.Group
	for _, g := range groups {
		var rg rl.Group
		if g.Record != nil {
			for _, m := range g.Record.Rollouts {
				eps, err := rl.Episodes(g.Rollouts[m.Index].Trace, s.cfg.PolicyRole, 1024)
				if err != nil {
					return nil, err
				}
				rg.Rollouts = append(rg.Rollouts, rl.ScoredRollout{Episodes: eps, Reward: m.Reward, Advantage: m.Advantage, HasAdvantage: true})
			}
		}
		out = append(out, rg)
	}
	return out, nil
}

// Example wires a route strategy for training.
// The strong model is the policy: a local model over the parameters the trainer updates.
// Its agent's delegate.Sampler makes its calls return logprobs and sample as the trainer says.
// The weak model is frozen, and the reward charges the policy's tokens and every delegation.
func Example() {
	ctx := context.Background()
	cfgModel := nn.Config{Vocab: tokenizer.VocabSize, Dim: 32, Layers: 1, Heads: 2, Hidden: 64, Context: 1024}.WithDefaults()
	strongP, err := nn.Alloc(cfgModel) // in a real run: nn.Load of the pretrained delegator
	if err != nil {
		fmt.Println(err)
		return
	}
	strongP.Init(1)
	weakP, err := nn.Alloc(cfgModel)
	if err != nil {
		fmt.Println(err)
		return
	}
	weakP.Init(2)

	out, err := os.MkdirTemp("", "rl-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(out)
	cfg := rl.DefaultConfig()
	cfg.PolicyRole = strategy.RoleStrong
	cfg.OutDir = out
	cfg.GroupSize, cfg.ItemsPerStep, cfg.Steps = 2, 2, 1
	cfg.Schedule.Warmup, cfg.Schedule.Total = 0, 1
	cfg.MaxNewTokens = 8

	lcfg := local.DefaultConfig()
	lcfg.Name = "strong"
	strong, err := local.New(strongP, lcfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer strong.Close()
	lcfg.Name = "weak"
	weak, err := local.New(weakP, lcfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer weak.Close()
	scfg := strategy.DefaultConfig()
	scfg.MaxTurns = 2
	temp := cfg.Temperature
	policy := func(seed int64) (delegate.Strategy, error) {
		return strategy.New(strategy.NameRoute, strategy.Roles{
			Strong: delegate.Agent{Role: strategy.RoleStrong, Model: strong,
				Sampler: delegate.NewSampler(delegate.Sampling{Temperature: &temp, MaxTokens: cfg.MaxNewTokens, Seed: &seed, Logprobs: true})},
			Weak: delegate.Agent{Role: strategy.RoleWeak, Model: weak},
		}, scfg)
	}
	scorer := &rollout.RewardScorer{
		Reward:          reward.Graded{Lambda: 0.001, CostUnit: reward.CostTokens, Mu: 0.05}.Reward,
		PolicyRoles:     []string{strategy.RoleStrong},
		GeneratedTokens: true,
	}
	questions := []delegate.Task{{ID: "a", Prompt: "What is 2+3?", Answer: "5"}, {ID: "b", Prompt: "What is 7*6?", Answer: "42"}}
	tr, err := rl.New(cfg, strongP, &exampleSource{cfg: cfg, questions: questions, policy: policy, scorer: scorer}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := tr.Run(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("steps done:", tr.StepsDone())
	// Output: steps done: 1
}
