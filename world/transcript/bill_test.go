package transcript

import (
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/world"
)

func TestTranscriptUsage(t *testing.T) {
	tr := Transcript{Messages: []delegate.Message{
		delegate.System("ab"), delegate.User("c"), delegate.Assistant("de"),
		delegate.ToolResult("x", "f"), delegate.Assistant("g"),
	}}
	// <s> <|system|>ab<|end|> <|user|>c<|end|> | <|assistant|>de<|end|>
	// <|tool|>f<|end|> | <|assistant|>g<|end|> call 1: prompt 1+4+3+1 = 9,
	// completion 3; call 2: prompt 9+3+3+1 = 16, completion 2, cached 12.
	u, calls := tr.Usage(false)
	want := delegate.Usage{PromptTokens: 25, CompletionTokens: 5, CachedTokens: 12}
	if u != want || calls != 2 {
		t.Errorf("Usage = %+v, %d calls; want %+v, 2", u, calls, want)
	}
	u, _ = tr.Usage(true)
	want.CachedTokens += 5 // <s> and the system message
	if u != want {
		t.Errorf("Usage with cached prefix = %+v, want %+v", u, want)
	}
}

func TestBill(t *testing.T) {
	p := testProblems(t, 1)[0]
	never, always := Route(p, world.Never).Bill(false), Route(p, world.Always).Bill(false)
	if never.SubagentCalls != 0 || always.SubagentCalls != len(p.Steps) {
		t.Errorf("calls: never %d, always %d for %d steps", never.SubagentCalls, always.SubagentCalls, len(p.Steps))
	}
	if never.DelegatorCalls != 1 || always.DelegatorCalls < 2 {
		t.Errorf("delegator calls: never %d, always %d", never.DelegatorCalls, always.DelegatorCalls)
	}
}

// TestDesignClaims checks the package doc's claims under the design
// accuracies, on a sample of the default world. The selective policy reads
// what each step is. It must have the best expected reward, at least 0.05
// ahead of every per-position rule. It must match the accuracy of solving
// alone, and cost at least a fifth less with nothing priced as cached.
func TestDesignClaims(t *testing.T) {
	ps, err := world.Generate(world.DefaultConfig(), 1, world.Validation, 400)
	if err != nil {
		t.Fatal(err)
	}
	prices, rew, acc := world.DefaultPrices(), world.DefaultReward(), DesignAccuracy()
	route := func(pol world.Policy) func(*world.Problem) Episode {
		return func(p *world.Problem) Episode { return Route(p, pol) }
	}
	sel := Measure("selective", ps, route(world.Selective), prices, rew, acc)
	single := Measure("single", ps, Single, prices, rew, acc)
	for mask := range uint(1) << world.DefaultConfig().MaxSteps {
		r := Measure("rule", ps, route(world.PositionRule(mask)), prices, rew, acc)
		if !(sel.Reward > r.Reward+0.05) {
			t.Errorf("expected rewards: selective %.3f, %s %.3f; want selective ahead by 0.05", sel.Reward, world.PositionRuleName(mask, 3), r.Reward)
		}
	}
	if saving := 1 - sel.CostUncached/single.CostUncached; saving < 0.2 || sel.PCorrect < single.PCorrect {
		t.Errorf("selective saves %.0f%% at P(correct) %.3f vs %.3f; want >= 20%% at no loss", 100*saving, sel.PCorrect, single.PCorrect)
	}
}
