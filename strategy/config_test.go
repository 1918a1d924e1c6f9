package strategy

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
)

func TestDefaultConfigValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	c := DefaultConfig()
	if c.MinSubtasks != 3 || c.MaxSubtasks != 5 || c.MaxTurns != 8 || c.Peers != 3 || c.Rounds != 1 || !c.SubagentContext || c.SubagentRetries != 1 {
		t.Errorf("defaults = %+v, want min 3, max 5, max_turns 8, peers 3, rounds 1, subagent_context, 1 retry", c)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantKey string
	}{
		{"negative temperature", func(c *Config) { c.Plan.Temperature = -0.1 }, "plan.temperature"},
		{"temperature too high", func(c *Config) { c.Leader.Temperature = 2.5 }, "leader.temperature"},
		{"NaN temperature", func(c *Config) { c.Weak.Temperature = math.NaN() }, "weak.temperature"},
		{"negative max_tokens", func(c *Config) { c.Strong.MaxTokens = -1 }, "strong.max_tokens"},
		{"no sub-agent budget", func(c *Config) { c.Subagent.MaxTokens = 0 }, "subagent.max_tokens"},
		{"min above max", func(c *Config) { c.MinSubtasks = 6 }, "min_subtasks"},
		{"zero max subtasks", func(c *Config) { c.MaxSubtasks = 0 }, "max_subtasks"},
		{"zero concurrency", func(c *Config) { c.SubagentConcurrency = 0 }, "subagent_concurrency"},
		{"negative retries", func(c *Config) { c.SubagentRetries = -1 }, "subagent_retries"},
		{"zero max turns", func(c *Config) { c.MaxTurns = 0 }, "max_turns"},
		{"zero tool concurrency", func(c *Config) { c.ToolConcurrency = 0 }, "tool_concurrency"},
		{"unknown tool result", func(c *Config) { c.ToolResult = "summary" }, "tool_result"},
		{"zero peers", func(c *Config) { c.Peers = 0 }, "peers"},
		{"negative rounds", func(c *Config) { c.Rounds = -1 }, "rounds"},
		{"unknown prompt", func(c *Config) { c.Prompts = map[string]string{"planner_system": "x"} }, "prompts.planner_system: no such template"},
		{"prompt syntax", func(c *Config) { c.Prompts = map[string]string{"plan_user": "{{.Request"} }, "prompts.plan_user"},
		{"prompt unknown field", func(c *Config) { c.Prompts = map[string]string{"plan_user": "{{.Nope}}"} }, "prompts.plan_user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.wantKey) {
				t.Errorf("Validate() = %v, want an error naming %q", err, tt.wantKey)
			}
			if _, nerr := New(NameSingle, Roles{Single: agent("", fake("m", modeltest.Reply("x")))}, c); nerr == nil {
				t.Error("New accepted an invalid config")
			}
		})
	}
}

func TestConfigTags(t *testing.T) {
	b, err := json.Marshal(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"single", "plan", "subagent", "aggregate", "strong", "weak", "peer", "leader",
		"min_subtasks", "max_subtasks", "subagent_concurrency", "subagent_context", "subagent_retries",
		"max_turns", "tool_concurrency", "tool_result", "peers", "rounds"} {
		if _, ok := m[key]; !ok {
			t.Errorf("JSON of DefaultConfig lacks key %q", key)
		}
	}
	if _, ok := m["plan"].(map[string]any)["max_tokens"]; !ok {
		t.Error(`JSON of a stage lacks "max_tokens"`)
	}
}

func TestPromptOverride(t *testing.T) {
	m := fake("m", modeltest.Reply("Final answer: 1"))
	cfg := DefaultConfig()
	cfg.Prompts = map[string]string{"single_system": "Answer {{.Request | len}}-byte requests tersely."}
	mustRun(t, mustNew(t, NameSingle, Roles{Single: agent("", m)}, cfg), "abc")
	if got := modeltest.SystemPrompt(m.Requests()[0]); got != "Answer 3-byte requests tersely." {
		t.Errorf("system prompt = %q, want the override rendered", got)
	}
}

func TestPromptNames(t *testing.T) {
	want := []string{"aggregate_system", "aggregate_user", "leader_system", "leader_user", "peer_refine", "peer_system",
		"peer_user", "plan_system", "plan_user", "route_system", "route_user", "single_system", "single_user",
		"subagent_system", "subagent_user", "weak_system", "weak_user"}
	if got := PromptNames(); !slices.Equal(got, want) {
		t.Errorf("PromptNames() = %v, want %v", got, want)
	}
	for _, n := range want {
		text, ok := DefaultPrompt(n)
		if !ok {
			t.Fatalf("DefaultPrompt(%q) missing", n)
		}
		if err := checkPrompt(n, text); err != nil {
			t.Errorf("embedded %s: %v", n, err)
		}
	}
	if p, _ := DefaultPrompt("plan_system"); !strings.Contains(p, "<|end_subtask|>") || !strings.Contains(p, "</|reasoning|>") {
		t.Errorf("plan prompt does not teach closing tags that ParsePlan accepts:\n%s", p)
	}
}

func TestNew(t *testing.T) {
	m := fake("m", modeltest.Reply("x"))
	a := agent("", m)
	tests := []struct {
		name    string
		roles   Roles
		cfg     func(*Config)
		wantErr string
	}{
		{name: NameSingle, roles: Roles{Single: a}},
		{name: NameDecompose, roles: Roles{Delegator: a, Subagent: a}},
		{name: NameRoute, roles: Roles{Strong: a, Weak: a}},
		{name: NameLead, roles: Roles{Leader: a, Peers: []delegate.Agent{a, a, a}}},
		{name: "debate", wantErr: `unknown strategy`},
		{name: NameSingle, roles: Roles{Delegator: a}, wantErr: "missing role single"},
		{name: NameDecompose, roles: Roles{Delegator: a}, wantErr: "missing role subagent"},
		{name: NameDecompose, roles: Roles{Subagent: a}, wantErr: "missing role delegator"},
		{name: NameRoute, roles: Roles{Strong: a}, wantErr: "missing role weak"},
		{name: NameRoute, roles: Roles{Weak: a}, wantErr: "missing role strong"},
		{name: NameLead, roles: Roles{Peers: []delegate.Agent{a}}, wantErr: "missing role leader"},
		{name: NameLead, roles: Roles{Leader: a}, wantErr: "missing role peers"},
		{name: NameLead, roles: Roles{Leader: a, Peers: []delegate.Agent{a, {}}}, wantErr: "missing role peers[1]"},
		{name: NameLead, roles: Roles{Leader: a, Peers: []delegate.Agent{a, a, a, a}}, wantErr: "4 peer agents given but peers is 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" "+tt.wantErr, func(t *testing.T) {
			cfg := DefaultConfig()
			s, err := New(tt.name, tt.roles, cfg)
			if tt.wantErr == "" {
				if err != nil || s.Name() != tt.name {
					t.Errorf("New(%q) = %v, %v; want the strategy", tt.name, s, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.name) {
				t.Errorf("New(%q) error = %v, want one naming %q and the strategy", tt.name, err, tt.wantErr)
			}
		})
	}
	if got := Names(); !slices.Equal(got, []string{"single", "decompose", "route", "lead"}) {
		t.Errorf("Names() = %v", got)
	}
}
