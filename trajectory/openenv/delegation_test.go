package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

func TestNewDelegation(t *testing.T) {
	bad := world.DefaultConfig()
	bad.MinSteps = 0
	tests := []struct {
		name string
		cfg  DelegationConfig
		want string // in the error; "" for none
	}{
		{"defaults", DelegationConfig{Subagent: fakeSolver()}, ""},
		{"no sub-agent", DelegationConfig{}, "sub-agent"},
		{"negative steps", DelegationConfig{Subagent: fakeSolver(), MaxSteps: -1}, "negative"},
		{"negative budget", DelegationConfig{Subagent: fakeSolver(), Budget: -1}, "negative"},
		{"bad world", DelegationConfig{Subagent: fakeSolver(), World: &bad}, "delegation environment"},
		{"tasks", DelegationConfig{Subagent: fakeSolver(), Tasks: []delegate.Task{{ID: "a", Answer: "1"}}, Verify: world.Verify}, ""},
		{"tasks without a verifier", DelegationConfig{Subagent: fakeSolver(), Tasks: []delegate.Task{{ID: "a", Answer: "1"}}}, "verifier"},
		{"a task without an answer", DelegationConfig{Subagent: fakeSolver(), Tasks: []delegate.Task{{ID: "a"}}, Verify: world.Verify}, "no reference answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := NewDelegation(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.want == "" && d.MaxSteps() != 8:
				t.Errorf("max steps: got %d, want 8", d.MaxSteps())
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// FuzzAction sends any bytes as an action in an episode.
// The step either answers an observation or fails with a ValidationError,
// and the episode stays usable.
func FuzzAction(f *testing.F) {
	for _, s := range []string{
		`{"type":"call_tool","tool_name":"delegate","arguments":{"question":"12*34"}}`,
		`{"type":"call_tool","tool_name":"answer","arguments":{"answer":7}}`,
		`{"type":"list_tools"}`, `{"tool_name":"x","arguments":null}`, `{"arguments":"{}"}`,
		`{"type":"call_tool","tool_name":"delegate","arguments":{"question":"\"{\\\"question\\\":1}\""}}`, `[]`, `{`, `null`,
	} {
		f.Add([]byte(s))
	}
	d, err := NewDelegation(DelegationConfig{Subagent: fakeSolver()})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, action []byte) {
		env, _ := d.New() // never fails
		ctx := context.Background()
		if _, err := env.Reset(ctx, ptr[int64](1), ""); err != nil {
			t.Fatal(err)
		}
		obs, err := env.Step(ctx, json.RawMessage(action))
		var verr *ValidationError
		if err != nil && !errors.As(err, &verr) {
			t.Fatalf("step %q: %v, want a ValidationError or none", action, err)
		}
		if err == nil {
			if _, err := obs.Result(); err != nil {
				t.Fatalf("step %q: observation: %v", action, err)
			}
		}
		if _, err := json.Marshal(env.State()); err != nil {
			t.Fatalf("state after %q: %v", action, err)
		}
	})
}

// TestDelegationTasks runs episodes over given tasks.
// A seed draws its task, the answer reaches the verifier boxed, and the reward follows it.
func TestDelegationTasks(t *testing.T) {
	tasks := []delegate.Task{
		{ID: "t0", Dataset: "gsm8k", Prompt: "What is 2+3?", Answer: "5"},
		{ID: "t1", Dataset: "gsm8k", Prompt: "What is 4*6?", Answer: "24"},
	}
	var seen []string
	verify := func(task delegate.Task, response string) (delegate.Verdict, error) {
		seen = append(seen, response)
		return delegate.Verdict{Correct: response == `\boxed{`+task.Answer+`}`, Found: true}, nil
	}
	d, err := NewDelegation(DelegationConfig{Subagent: fakeSolver(), Tasks: tasks, Verify: verify})
	if err != nil {
		t.Fatal(err)
	}
	if m := d.Metadata(); m.Name != "delegate-gsm8k" || !strings.Contains(m.Description, "2 gsm8k tasks") {
		t.Errorf("metadata: got %+v", m)
	}
	ctx := context.Background()
	tests := []struct {
		seed        int64
		answer      string
		wantTask    string
		wantCorrect bool
		wantSeen    string
	}{
		{0, "5", "What is 2+3?", true, `\boxed{5}`},
		{3, "25", "What is 4*6?", false, `\boxed{25}`},
		{1, `\boxed{24}`, "What is 4*6?", true, `\boxed{24}`},
	}
	for _, tt := range tests {
		env, _ := d.New() // New never fails
		res, err := env.Reset(ctx, &tt.seed, "")
		if err != nil {
			t.Fatal(err)
		}
		if o := res.Value.(DelegationObservation); o.Task != tt.wantTask {
			t.Errorf("seed %d: task %q, want %q", tt.seed, o.Task, tt.wantTask)
		}
		a, _ := json.Marshal(call(ToolAnswer, map[string]string{"answer": tt.answer})) // strings always encode
		res, err = env.Step(ctx, a)
		if err != nil || !res.Done || res.Reward == nil {
			t.Fatalf("seed %d: answer: %+v, %v", tt.seed, res, err)
		}
		st := env.State().(DelegationState)
		if *st.Correct != tt.wantCorrect || (*res.Reward > 0.5) != tt.wantCorrect || st.Dataset != "gsm8k" || st.Split != "" {
			t.Errorf("seed %d: state %+v, reward %v; want correct %v", tt.seed, st, *res.Reward, tt.wantCorrect)
		}
		if got := seen[len(seen)-1]; got != tt.wantSeen {
			t.Errorf("seed %d: the verifier got %q, want %q", tt.seed, got, tt.wantSeen)
		}
	}
}

// TestAccountFollowsConversation: the bill account keeps between changes
// of the conversation equals one made afresh, after a reset and after
// every kind of step: a call, a second call of the same turn, an unknown
// tool and the answer, which rewrites the last turn.
func TestAccountFollowsConversation(t *testing.T) {
	d, err := NewDelegation(DelegationConfig{Subagent: fakeSolver()})
	if err != nil {
		t.Fatal(err)
	}
	env, err := d.New()
	if err != nil {
		t.Fatal(err)
	}
	e := env.(*episode)
	check := func(after string) {
		t.Helper()
		want, wantN := transcript.Transcript{Kind: transcript.KindRoute, Messages: e.msgs, Tools: billTools}.Usage(false)
		for range 2 { // the second reads the kept bill
			if a := e.account(); a.Delegator != want || a.DelegatorCalls != wantN {
				t.Fatalf("after %s: got %+v over %d turns, want %+v over %d", after, a.Delegator, a.DelegatorCalls, want, wantN)
			}
		}
	}
	ctx := context.Background()
	seed := int64(7)
	if _, err := e.Reset(ctx, &seed, ""); err != nil {
		t.Fatal(err)
	}
	check("the reset")
	turn := map[string]any{"turn": 1}
	steps := []struct {
		name   string
		action ToolAction
	}{
		{"a call", ToolAction{Type: ActionCallTool, ToolName: ToolDelegate, Arguments: json.RawMessage(`{"question":"4*7"}`), Metadata: turn}},
		{"a second call of the turn", ToolAction{Type: ActionCallTool, ToolName: ToolDelegate, Arguments: json.RawMessage(`{"question":"12*13"}`), Metadata: turn}},
		{"an unknown tool", ToolAction{Type: ActionCallTool, ToolName: "nope", Arguments: json.RawMessage(`{}`)}},
		{"the answer", ToolAction{Type: ActionCallTool, ToolName: ToolAnswer, Arguments: json.RawMessage(`{"answer":"1"}`)}},
	}
	for _, s := range steps {
		b, err := json.Marshal(s.action)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Step(ctx, b); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		check(s.name)
	}
	if !e.done {
		t.Error("the answer did not end the episode")
	}
}
