package openenv

import (
	"context"
	"testing"
	"time"
)

// TestStepDeadline: calls that start within the slack share a context
// whose deadline is at most the timeout away and at least the timeout
// less the slack; a later call, or one after a cancel, gets a fresh one.
func TestStepDeadline(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		between func(cancel context.CancelFunc) // what happens between the two calls
		same    bool
	}{
		{"within the slack", 64 * time.Hour, func(context.CancelFunc) {}, true},
		{"past the slack", 64 * time.Millisecond, func(context.CancelFunc) { time.Sleep(5 * time.Millisecond) }, false},
		{"cancelled", 64 * time.Hour, func(cancel context.CancelFunc) { cancel() }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d stepDeadline
			defer d.stop()
			parent := context.Background()
			start := time.Now()
			first, cancel := d.get(parent, tt.timeout)
			tt.between(cancel)
			second, _ := d.get(parent, tt.timeout)
			if got := first == second; got != tt.same {
				t.Errorf("the second call shares the first's context: got %v, want %v", got, tt.same)
			}
			dl, ok := second.Deadline()
			if !ok || second.Err() != nil {
				t.Fatalf("the second call's context: deadline %v (%v), err %v; want a live deadline", dl, ok, second.Err())
			}
			if latest := time.Now().Add(tt.timeout); dl.After(latest) || dl.Before(latest.Add(-tt.timeout/deadlineSlack)) {
				t.Errorf("deadline %v after the start, want within the slack %v of %v", dl.Sub(start), tt.timeout/deadlineSlack, tt.timeout)
			}
		})
	}
	var d stepDeadline
	ctx, _ := d.get(context.Background(), time.Hour)
	d.stop()
	if ctx.Err() == nil {
		t.Error("stop left the last context live")
	}
}
