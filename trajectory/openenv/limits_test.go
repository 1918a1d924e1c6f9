package openenv

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/world"
)

// TestDelegationEpisodeTime ends episodes at their time limit. A call
// after the limit does not run; a sub-agent call running at the limit is
// cut, as a timeout tool error. Either way the episode ends unanswered.
func TestDelegationEpisodeTime(t *testing.T) {
	stuck := modeltest.New("stuck", func(ctx context.Context, _ *delegate.Request) (*delegate.Response, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	tests := []struct {
		name      string
		sub       delegate.Model
		limit     time.Duration
		wait      time.Duration // before the call
		tool      string
		wantError string // the call's error type; "" for none
	}{
		{"answer after the limit", fakeSolver(), 20 * time.Millisecond, 40 * time.Millisecond, ToolAnswer, ""},
		{"delegate after the limit", fakeSolver(), 20 * time.Millisecond, 40 * time.Millisecond, ToolDelegate, ""},
		{"a call cut at the limit", stuck, 50 * time.Millisecond, 0, ToolDelegate, ToolTimeout},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := NewDelegation(DelegationConfig{Subagent: tt.sub, Split: world.Test, EpisodeTime: tt.limit})
			if err != nil {
				t.Fatal(err)
			}
			p, err := d.Problem(1)
			if err != nil {
				t.Fatal(err)
			}
			env, _ := d.New() // never fails
			if _, err := env.Reset(ctx, ptr[int64](1), ""); err != nil {
				t.Fatal(err)
			}
			time.Sleep(tt.wait)
			args := map[string]any{"answer": p.Answer}
			if tt.tool == ToolDelegate {
				args = map[string]any{"question": p.Steps[0].Expr()}
			}
			a, _ := json.Marshal(call(tt.tool, args))
			res, err := env.Step(ctx, a)
			if err != nil {
				t.Fatal(err)
			}
			o := res.Value.(DelegationObservation)
			st := env.State().(DelegationState)
			if !res.Done || st.Correct == nil || *st.Correct || !strings.Contains(o.Result, "passed without an answer") {
				t.Errorf("got done %v, correct %v, result %q; want the episode ended unanswered", res.Done, st.Correct, o.Result)
			}
			gotError := ""
			if o.Error != nil {
				gotError = o.Error.ErrorType
			}
			if gotError != tt.wantError || st.Spend.Subagent.Calls != 0 {
				t.Errorf("error %+v, sub-agent calls %d; want error type %q and no call answered", o.Error, st.Spend.Subagent.Calls, tt.wantError)
			}
		})
	}
	if _, err := NewDelegation(DelegationConfig{Subagent: fakeSolver(), EpisodeTime: -time.Second}); err == nil || !strings.Contains(err.Error(), "episode time") {
		t.Errorf("a negative episode time: got %v, want an error naming it", err)
	}
}
