package openenv

import (
	"context"
	"time"
)

// deadlineSlack is how much sooner than StepTimeout a session's reset
// or step may be cut: 1/64 of it, about 2 s of the default 2 minutes.
const deadlineSlack = 64

// stepDeadline hands out the contexts of one session's resets and steps.
// Each ends StepTimeout after its call starts, or up to
// StepTimeout/deadlineSlack sooner. One context serves the calls that
// start within that slack of each other. A context of its own a call
// cost a timer and several allocations, and the sub-agent's requests
// more under it, at every step.
// Its methods are called from one goroutine at a time.
type stepDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// get returns the context of a call that starts now, under parent, and
// the function that cancels it. The same parent must be passed each time.
func (d *stepDeadline) get(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	want := time.Now().Add(timeout)
	if d.ctx != nil {
		if dl, _ := d.ctx.Deadline(); d.ctx.Err() == nil && want.Sub(dl) <= timeout/deadlineSlack {
			return d.ctx, d.cancel
		}
		d.cancel()
	}
	d.ctx, d.cancel = context.WithDeadline(parent, want)
	return d.ctx, d.cancel
}

// stop cancels the last context, releasing its timer.
func (d *stepDeadline) stop() {
	if d.cancel != nil {
		d.cancel()
		d.ctx, d.cancel = nil, nil
	}
}
