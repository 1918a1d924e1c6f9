package openenv

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/models"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// trlEnv does with this server what a class passed to TRL's environment_factory does.
// reset returns the first observation's text, and each tool is a method returning the tool's text.
// The reward is read after the episode.
// It also keeps the conversation as the policy wrote and read it.
type trlEnv struct {
	s      *Session
	reward float64
	done   bool
	msgs   []delegate.Message
	calls  int // delegate calls
}

func (e *trlEnv) reset(ctx context.Context, seed int64) (string, error) {
	res, err := e.s.Reset(ctx, ResetRequest{Seed: &seed})
	if err != nil {
		return "", err
	}
	o, err := decodeObservation(res)
	if err != nil {
		return "", err
	}
	e.reward, e.done, e.calls = 0, false, 0
	e.msgs = transcript.RouteMessages(o.Task)
	return o.Task, nil
}

// tool calls one tool and returns what the policy reads back.
func (e *trlEnv) tool(ctx context.Context, name string, args map[string]string) (string, error) {
	a := call(name, args)
	res, err := e.s.Step(ctx, a)
	if err != nil {
		return "", err
	}
	o, err := decodeObservation(res)
	if err != nil {
		return "", err
	}
	id := "call_" + strconv.Itoa(len(e.msgs)/2) // one call and one result per turn after the two prompt messages
	switch {
	case name == ToolAnswer && res.Done:
		e.msgs = append(e.msgs, delegate.Assistant(args["answer"])) // billed as route's text answer
	default:
		e.msgs = append(e.msgs, delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: id, Name: name, Arguments: string(a.Arguments)}}})
	}
	text := o.Result
	if o.Error != nil {
		text = "error: " + o.Error.Message
	}
	if name == ToolDelegate && o.Error == nil {
		e.calls++
	}
	if !res.Done {
		e.msgs = append(e.msgs, delegate.ToolResult(id, text))
	}
	e.done = res.Done
	if res.Reward != nil {
		e.reward = *res.Reward
	}
	return text, nil
}

// scriptedPolicy solves p the way the world rewards, and returns its final answer.
// It delegates the steps world.Selective picks, reading the sub-agent's answers,
// and computes the others itself.
func scriptedPolicy(ctx context.Context, t *testing.T, env *trlEnv, p *world.Problem) string {
	t.Helper()
	vals := make([]int64, len(p.Steps))
	operand := func(o world.Operand) int64 {
		if o.Ref == world.Literal {
			return o.Value
		}
		return vals[o.Ref]
	}
	for i, s := range p.Steps {
		x, y := operand(s.X), operand(s.Y)
		vals[i] = s.Op.Apply(x, y)
		if !world.Selective(p, i) {
			continue
		}
		got, err := env.tool(ctx, ToolDelegate, map[string]string{"question": world.Expr(s.Op, x, y)})
		if err != nil {
			t.Fatalf("delegate: %v", err)
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(got), 10, 64); err == nil {
			vals[i] = v // the sub-agent's answer, right or wrong
		}
	}
	ans := strconv.FormatInt(vals[len(vals)-1], 10)
	if _, err := env.tool(ctx, ToolAnswer, map[string]string{"answer": ans}); err != nil {
		t.Fatalf("answer: %v", err)
	}
	return ans
}

// TestTRLEpisodeWithShippedSolver drives episodes as a TRL environment class would.
// The sub-agent is the shipped solver and the policy is scripted.
// Each reward must be what the world's reward gives for the conversation the policy saw.
func TestTRLEpisodeWithShippedSolver(t *testing.T) {
	params, _, err := models.Load("solver")
	if err != nil {
		t.Fatal(err)
	}
	solver, err := local.New(params, local.Config{Name: "solver", MaxBatch: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer solver.Close()
	srv, d := newDelegationServer(t, DelegationConfig{Subagent: solver, Split: world.Test}, nil)
	c := serve(t, srv, "")
	ctx := context.Background()
	s, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	env := &trlEnv{s: s}

	const episodes = 8
	right := 0
	for seed := range int64(episodes) {
		task, err := env.reset(ctx, seed)
		if err != nil {
			t.Fatalf("reset %d: %v", seed, err)
		}
		p, err := d.Problem(seed)
		if err != nil || p.Text != task {
			t.Fatalf("seed %d: task %q, problem %v (%v)", seed, task, p, err)
		}
		ans := scriptedPolicy(ctx, t, env, p)
		if !env.done {
			t.Fatalf("seed %d: not done after the answer", seed)
		}
		correct := world.Correct(ans, p.Answer)
		if correct {
			right++
		}
		u, _ := transcript.Transcript{Kind: transcript.KindRoute, Messages: env.msgs, Tools: []delegate.Tool{transcript.Tool, {Name: ToolAnswer}}}.Usage(false)
		want := world.RewardOf(world.DefaultReward(), correct, world.Account{Delegator: u, SubagentCalls: env.calls})
		if math.Abs(env.reward-want) > 1e-12 {
			t.Errorf("seed %d: reward %v, want %v (correct %v, %d delegator tokens, %d calls)", seed, env.reward, want, correct, u.CompletionTokens, env.calls)
		}
		raw, err := s.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st := stateOf(t, raw)
		if st.Spend.Delegator.CompletionTokens != u.CompletionTokens || st.Spend.Delegator.PromptTokens != u.PromptTokens || st.Spend.Subagent.Calls != env.calls ||
			st.Spend.Subagent.CompletionTokens == 0 || st.Spend.CriticalPathS <= 0 || st.Spend.Dollars <= 0 {
			t.Errorf("seed %d: spend %+v, want delegator %+v, %d sub-agent calls with tokens and time", seed, st.Spend, u, env.calls)
		}
		b, _ := json.Marshal(st.Spend) // floats and ints always encode
		t.Logf("seed %d: correct %v, reward %.3f, spend %s", seed, correct, env.reward, b)
	}
	// The shipped solver is right on nearly every product (models/README.md).
	if right < episodes-2 {
		t.Errorf("%d of %d episodes right, want at least %d", right, episodes, episodes-2)
	}
}
