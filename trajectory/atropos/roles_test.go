package atropos_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/trajectory/atropos"
)

func TestGroupRoles(t *testing.T) {
	v := 4
	tests := []struct {
		name string
		raw  string
		want []delegate.RolePolicy
		ok   bool
	}{
		{"two roles", `[{"role":"delegator","model":"router"},{"role":"subagent","model":"solver","trained":true,"policy_version":4}]`,
			[]delegate.RolePolicy{{Role: "delegator", Model: "router"}, {Role: "subagent", Model: "solver", Trained: true, PolicyVersion: &v}}, true},
		{"empty", `[]`, []delegate.RolePolicy{}, true},
		{"not a list", `{"role":"x"}`, nil, false},
		{"unknown key", `[{"role":"x","weights":1}]`, nil, false},
		{"trained not a bool", `[{"role":"x","trained":"yes"}]`, nil, false},
		{"no role", `[{"model":"m"}]`, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := atropos.GroupRoles(json.RawMessage(tc.raw))
			if (err == nil) != tc.ok {
				t.Fatalf("got error %v, want ok %v", err, tc.ok)
			}
			if tc.ok && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
