package rl_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
)

// Example wires a route strategy for training: the strong model is the
// policy (a local model over the parameters the trainer updates, wrapped
// so that its calls return logprobs), the weak model is frozen, and the
// reward charges the policy's tokens and every delegation.
func Example() {
	ctx := context.Background()
	cfgModel := nn.Config{Vocab: tokenizer.VocabSize, Dim: 32, Layers: 1, Heads: 2, Hidden: 64, Context: 768}.WithDefaults()
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
	cfg.GroupSize, cfg.ItemsPerStep, cfg.Steps = 2, 1, 1
	cfg.Schedule.Warmup, cfg.Schedule.Total = 0, 1
	cfg.MaxNewTokens = 8

	strong, err := local.New(strongP, local.Config{Name: "strong"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer strong.Close()
	weak, err := local.New(weakP, local.Config{Name: "weak"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer weak.Close()
	scfg := strategy.DefaultConfig()
	scfg.MaxTurns = 2
	route, err := strategy.New(strategy.NameRoute, strategy.Roles{
		Strong: delegate.Agent{Model: rl.WrapPolicy(strong, cfg)},
		Weak:   delegate.Agent{Model: weak},
	}, scfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	questions := []string{"What is 2+3?", "What is 7*6?"}
	answers := []string{"5", "42"}
	env := rl.Env{
		Items: len(questions),
		Rollout: func(ctx context.Context, item int, seed uint64) (*delegate.Trace, rl.Outcome, error) {
			tr, err := route.Run(ctx, questions[item], nil)
			if err != nil {
				return nil, rl.Outcome{}, err
			}
			o := rl.Outcome{
				Correct:   strings.TrimSpace(tr.Answer) == answers[item],
				Delegated: tr.Roles[strategy.RoleWeak].Calls > 0,
				Metrics:   map[string]float64{"weak_calls": float64(tr.Roles[strategy.RoleWeak].Calls)},
			}
			return tr, o, nil
		},
		Reward: func(tr *delegate.Trace, o rl.Outcome) float64 {
			r := -0.001*float64(tr.Roles[strategy.RoleStrong].Usage.CompletionTokens) - 0.05*o.Metrics["weak_calls"]
			if o.Correct {
				r++
			}
			return r
		},
	}
	tr, err := rl.New(cfg, strongP, env, nil)
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
