package openenv

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/models"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// shipped loads a shipped local model.
func shipped(t *testing.T, name string) *local.Model {
	t.Helper()
	params, _, err := models.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	m, err := local.New(params, local.Config{Name: name, MaxBatch: 32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestEqualsInProcessRoute plays world problems as a TRL client does, over the WebSocket and HTTP MCP.
// The shipped router is the policy and the shipped solver the sub-agent.
// For each seed the reward, the answer, the policy's calls and the sub-agent's tokens and dollars
// equal those of the in-process route rollout of the same problem.
func TestEqualsInProcessRoute(t *testing.T) {
	router, solver := shipped(t, "router"), shipped(t, "solver")
	prices := world.DefaultPrices()
	scfg := transcript.StrategyConfig()
	scfg.Strong.Temperature, scfg.Weak.Temperature = 0, 0 // greedy: the same seed's episode is one episode
	route, err := strategy.New(strategy.NameRoute, strategy.Roles{
		Strong: delegate.Agent{Role: strategy.RoleStrong, Model: router, Price: prices.Delegator},
		Weak:   delegate.Agent{Role: strategy.RoleWeak, Model: solver, Price: prices.Solver},
	}, scfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, d := newDelegationServer(t, DelegationConfig{Subagent: solver, Split: world.Test, Generation: &scfg.Weak}, nil)
	// An HTTP MCP step runs the shipped solver within its request: under
	// the race detector on a loaded machine it outlasted serve's 300 ms
	// write timeout, and the client read EOF.
	c := serveWith(t, srv, "", edge.DefaultTimeouts())
	ctx := context.Background()
	policy := Policy{Agent: delegate.Agent{Role: "policy", Model: router, Price: prices.Delegator}, Messages: transcript.RouteMessages,
		Temperature: scfg.Strong.Temperature, MaxTokens: scfg.Strong.MaxTokens, MaxTurns: scfg.MaxTurns, AnswerInText: true, NamesOnly: true}
	rew := world.DefaultReward()
	for seed := range int64(6) {
		p, err := d.Problem(seed)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := route.Run(ctx, p.Text, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, err := world.Verify(p.Task(), tr.Answer)
		if err != nil {
			t.Fatal(err)
		}
		correct := v.Correct && tr.Failure == ""
		strong, weak := tr.Roles[strategy.RoleStrong], tr.Roles[strategy.RoleWeak]
		want := world.RewardOf(rew, correct, world.Account{Delegator: strong.Usage, SubagentCalls: weak.Calls})
		ws, err := c.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []Stepper{ws, c.OpenMCP()} {
			pl, err := policy.Play(ctx, s, seed, nil)
			if cerr := s.Close(); cerr != nil {
				t.Errorf("close: %v", cerr)
			}
			if err != nil {
				t.Fatalf("seed %d %T: %v", seed, s, err)
			}
			if pl.Reward == nil || pl.Spend == nil || pl.Correct == nil {
				t.Fatalf("seed %d %T: played %+v", seed, s, pl)
			}
			sp := pl.Spend
			b, _ := json.Marshal(sp) // numbers always encode
			t.Logf("seed %d %T: reward %v (route %v), correct %v (%v), answer %q (%q), spend %s; route strong %+v weak %+v",
				seed, s, *pl.Reward, want, *pl.Correct, correct, pl.Answer, tr.Answer, b, strong.Usage, weak.Usage)
			if math.Abs(*pl.Reward-want) > 1e-9 || *pl.Correct != correct {
				t.Errorf("seed %d %T: reward %v correct %v, want route's %v, %v", seed, s, *pl.Reward, *pl.Correct, want, correct)
			}
			if sp.Delegator.CompletionTokens != strong.Usage.CompletionTokens || sp.Delegator.Calls != strong.Calls || sp.Subagent.Calls != weak.Calls ||
				sp.Subagent.CompletionTokens != weak.Usage.CompletionTokens || sp.Subagent.PromptTokens != weak.Usage.PromptTokens ||
				math.Abs(sp.Subagent.Dollars-weak.Cost) > 1e-12 {
				t.Errorf("seed %d %T: spend %s; want route's delegator %+v, sub-agent %+v ($%v)", seed, s, b, strong, weak.Usage, weak.Cost)
			}
			if pl.Trace.Roles["policy"].Usage != strong.Usage || math.Abs(pl.Trace.Roles["policy"].Cost-strong.Cost) > 1e-12 {
				t.Errorf("seed %d %T: the policy's calls %+v, want route's strong %+v", seed, s, pl.Trace.Roles["policy"], strong)
			}
		}
	}
}
