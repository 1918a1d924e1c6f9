package train

import "testing"

// TestNewMode checks that each mode name picks its own implementation,
// which names the model the policy starts from.
func TestNewMode(t *testing.T) {
	for _, tc := range []struct {
		name      string
		want      mode
		wantStart string
	}{
		{ModeRoute, routeMode{}, RouterModel},
		{ModeMLPO, mlpoMode{}, "delegator"},
		{ModeDecompose, decomposeMode{}, PlannerModel},
	} {
		got := newMode(tc.name, nil)
		if got != tc.want {
			t.Errorf("newMode(%q) = %T, want %T", tc.name, got, tc.want)
		}
		if s := (Config{Mode: tc.name}).StartModel(); s != tc.wantStart {
			t.Errorf("mode %s: start model %q, want %q", tc.name, s, tc.wantStart)
		}
	}
}
