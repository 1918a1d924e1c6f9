package atropos

import (
	"encoding/json"
	"testing"

	"github.com/delegatelab/delegate"
)

// The typed overrides encode to what environments sent before them, byte
// for byte. They read back what a trainer uses.
func TestOverridesWire(t *testing.T) {
	v, order, yes := 3, 1, true
	calls, tokens, cost := 2.0, 31.0, 0.25
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"group", GroupOverride{GroupID: "run/t0#0", GroupSize: 2, PolicyVersion: &v}.Map(),
			`{"group_id":"run/t0#0","group_size":2,"policy_version":3}`},
		{"group with order and roles", GroupOverride{GroupID: "g", GroupSize: 1, PolicyVersion: &v, BatchOrder: &order,
			Roles: []delegate.RolePolicy{{Role: "delegator", Model: "router"}}}.Map(),
			`{"batch_order":1,"group_id":"g","group_size":1,"policy_version":3,"roles":[{"role":"delegator","model":"router","trained":false}]}`},
		{"sequence", SequenceOverride{}.Map(), `{"set_advantage_to_zero":false}`},
		{"sequence with outcome", SequenceOverride{SetAdvantageToZero: true, Correct: &yes, Delegated: &yes, Calls: &calls, Tokens: &tokens, Cost: &cost}.Map(),
			`{"correct":true,"cost":0.25,"delegated":true,"delegator_tokens":31,"set_advantage_to_zero":true,"subagent_calls":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(b); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if o, ok := tt.in.(map[string]any); ok && o[keyPolicyVersion] != nil {
				if pv := ReadGroupOverride(m).PolicyVersion; pv == nil || *pv != v {
					t.Errorf("policy version read back %v, want %d", pv, v)
				}
			}
		})
	}
}

// A trainer reads whole numbers and the right types only.
func TestReadGroupOverride(t *testing.T) {
	tests := []struct {
		name          string
		in            map[string]any
		policy, order int // -1: left out
	}{
		{"both", map[string]any{keyPolicyVersion: 4.0, keyBatchOrder: 2.0}, 4, 2},
		{"none", map[string]any{}, -1, -1},
		{"negative version", map[string]any{keyPolicyVersion: -1.0}, -1, -1},
		{"fractions", map[string]any{keyPolicyVersion: 1.5, keyBatchOrder: 0.5}, -1, -1},
		{"strings", map[string]any{keyPolicyVersion: "4", keyBatchOrder: "2"}, -1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ReadGroupOverride(tt.in)
			if got := deref(o.PolicyVersion); got != tt.policy {
				t.Errorf("policy version %d, want %d", got, tt.policy)
			}
			if got := deref(o.BatchOrder); got != tt.order {
				t.Errorf("batch order %d, want %d", got, tt.order)
			}
		})
	}
}

func deref(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}
