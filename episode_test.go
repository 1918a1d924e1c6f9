package delegate

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// routeTrace is a route attempt: the delegator's two turns, the second extending the first.
// Two solver calls run side by side between them.
func routeTrace() *Trace {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	v3 := 3
	call := func(id int, role, model string, start, lat int, msgs []Message, out string, u Usage, cost float64) *Node {
		o := Assistant(out)
		return &Node{ID: id, Name: role, Role: role, Model: model, Messages: msgs, Output: &o, Usage: u, Cost: cost,
			Start: t0.Add(ms(start)), Latency: ms(lat), PolicyVersion: &v3}
	}
	task := []Message{System("route"), User("12*34 + 56*78?")}
	turn1 := call(1, "delegator", "router", 0, 100, task, "call", Usage{PromptTokens: 20, CompletionTokens: 10}, 0.5)
	s1 := call(3, "subagent", "solver", 100, 30, []Message{System("s"), User("12*34")}, "408", Usage{PromptTokens: 5, CompletionTokens: 4}, 0.01)
	s2 := call(4, "subagent", "solver", 105, 50, []Message{System("s"), User("56*78")}, "4368", Usage{PromptTokens: 5, CompletionTokens: 6}, 0.02)
	turn2 := call(5, "delegator", "router", 160, 40, append(append(append([]Message(nil), task...), Assistant("call")), ToolResult("a", "408"), ToolResult("b", "4368")),
		"4776", Usage{PromptTokens: 40, CompletionTokens: 5}, 0.25)
	tools := &Node{ID: 2, Name: "tools", Start: t0.Add(ms(100)), Latency: ms(55), Children: []*Node{s1, s2}}
	root := &Node{ID: 0, Name: "route", Start: t0, Latency: ms(200), Children: []*Node{turn1, tools, turn2}}
	return &Trace{Version: TraceVersion, Strategy: "route", Root: root, Latency: ms(210)}
}

func TestNewEpisode(t *testing.T) {
	tr := routeTrace()
	tests := []struct {
		name      string
		trained   []string
		questions []string
		roles     []string
	}{
		{"delegator trained, solver frozen", []string{"delegator"}, []string{"12*34 + 56*78?"}, []string{"delegator"}},
		{"solver trained, delegator frozen", []string{"subagent"}, []string{"12*34", "56*78"}, []string{"subagent", "subagent"}},
		{"both trained", []string{"delegator", "subagent"}, []string{"12*34 + 56*78?", "12*34", "56*78"}, []string{"delegator", "subagent", "subagent"}},
		{"nothing trained", nil, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEpisode(tr, "t1", "delegator", tc.trained)
			var questions, roles []string
			for _, s := range e.Samples {
				questions, roles = append(questions, s.Question), append(roles, s.Role)
				if !s.Trained {
					t.Errorf("sample %v: Trained false", s.Calls)
				}
				if s.PolicyVersion == nil || *s.PolicyVersion != 3 {
					t.Errorf("sample %v: policy version %v, want 3", s.Calls, s.PolicyVersion)
				}
			}
			if !reflect.DeepEqual(questions, tc.questions) || !reflect.DeepEqual(roles, tc.roles) {
				t.Errorf("samples: got questions %q roles %q, want %q %q", questions, roles, tc.questions, tc.roles)
			}
			if got := len(e.Calls); got != 4 {
				t.Errorf("calls: got %d, want 4: frozen roles' calls are counted", got)
			}
		})
	}
}

func TestNewEpisodeSpend(t *testing.T) {
	e := NewEpisode(routeTrace(), "t1", "delegator", []string{"delegator", "subagent"})
	if got, want := e.Samples[0].Calls, []int{1, 5}; !reflect.DeepEqual(got, want) {
		t.Errorf("delegator sample calls: got %v, want %v (one conversation)", got, want)
	}
	if got, want := e.Samples[0].Answer, "4776"; got != want {
		t.Errorf("delegator answer: got %q, want %q", got, want)
	}
	if got, want := e.Samples[0].Usage, (Usage{PromptTokens: 60, CompletionTokens: 15}); got != want {
		t.Errorf("delegator usage: got %+v, want %+v", got, want)
	}
	if got, want := e.Samples[0].Latency, 140*time.Millisecond; got != want {
		t.Errorf("delegator latency: got %v, want %v", got, want)
	}
	if got, want := e.Delegations, 2; got != want {
		t.Errorf("delegations: got %d, want %d", got, want)
	}
	// Turn 1, then the slower solver call, then turn 2.
	if got, want := e.CriticalPath, 190*time.Millisecond; got != want {
		t.Errorf("critical path: got %v, want %v", got, want)
	}
	if got, want := e.CriticalCalls, 3; got != want {
		t.Errorf("critical calls: got %d, want %d", got, want)
	}
	o := e.Outcome
	if o.Tokens != 15 || o.Calls != 2 || o.Latency != 210*time.Millisecond {
		t.Errorf("outcome: got tokens %d calls %d latency %v, want 15, 2, 210ms", o.Tokens, o.Calls, o.Latency)
	}
	if got, want := o.Roles["subagent"], (RoleSpend{Calls: 2, Usage: Usage{PromptTokens: 10, CompletionTokens: 10}, Dollars: 0.03}); got != want {
		t.Errorf("subagent spend: got %+v, want %+v", got, want)
	}
	if got, want := o.Cost, 0.78; got < want-1e-12 || got > want+1e-12 {
		t.Errorf("cost: got %v, want %v", got, want)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var back Episode
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, e) {
		t.Errorf("JSON round trip: got %+v, want %+v", back, *e)
	}
}

func TestEpisodePolicies(t *testing.T) {
	v3 := 3
	tests := []struct {
		name    string
		trained []string
		want    []RolePolicy
	}{
		{"solver trained", []string{"subagent"}, []RolePolicy{
			{Role: "delegator", Model: "router"},
			{Role: "subagent", Model: "solver", Trained: true, PolicyVersion: &v3},
		}},
		{"a trained role that made no call", []string{"delegator", "critic"}, []RolePolicy{
			{Role: "delegator", Model: "router", Trained: true, PolicyVersion: &v3},
			{Role: "subagent", Model: "solver"},
			{Role: "critic", Trained: true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NewEpisode(routeTrace(), "t1", "delegator", tc.trained).Policies()
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMergePolicies(t *testing.T) {
	v2, v5 := 2, 5
	a := []RolePolicy{{Role: "delegator", Model: "router", PolicyVersion: &v5}}
	b := []RolePolicy{{Role: "delegator", Model: "other", Trained: true, PolicyVersion: &v2}, {Role: "subagent", Model: "solver"}}
	got := MergePolicies(a, b)
	want := []RolePolicy{{Role: "delegator", Model: "router", Trained: true, PolicyVersion: &v2}, {Role: "subagent", Model: "solver"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
