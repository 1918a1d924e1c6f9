package atropos

import (
	"reflect"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/rollout"
)

// A group's roles travel to the API in group_overrides.roles.
func TestScoredDataRoles(t *testing.T) {
	roles := []delegate.RolePolicy{{Role: "delegator", Model: "router"}, {Role: "subagent", Model: "solver", Trained: true}}
	tests := []struct {
		name  string
		roles []delegate.RolePolicy
		want  any
	}{
		{"with roles", roles, roles},
		{"without", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &rollout.GroupRecord{ID: "t0#0", Tokens: [][]int{{1, 2}}, Masks: [][]int{{-100, 2}}, InferenceLogprobs: [][]float64{{1, -0.5}},
				Scores: []float64{1}, Advantages: []float64{0}, SequenceRollout: []int{0}, NoTokens: []string{""}, Messages: [][]delegate.Turn{{}},
				Overrides: []rollout.Override{{}}, GroupOverrides: rollout.GroupOverride{GroupSize: 1, Roles: tc.roles}}
			sd, err := ScoredDataOf(g)
			if err != nil {
				t.Fatal(err)
			}
			if got := sd.GroupOverrides[keyRoles]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}
