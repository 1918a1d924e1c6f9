package openai

import (
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegatelab/delegate"
)

// endpoint is one API root of a model: its BaseURL or one of its replicas.
type endpoint struct {
	url      string // the chat completions URL
	name     string // how traces name it; "" for a model with one endpoint
	inflight atomic.Int64

	mu        sync.Mutex
	downUntil time.Time     // set aside until then
	penalty   time.Duration // how long the next failure sets it aside
}

// firstPenalty is how long a replica's first failure sets it aside.
const firstPenalty = time.Second

// pick returns the endpoint for the next attempt: the least busy of those not set aside.
// When all are set aside, it picks the earliest to come back.
// Among equally busy ones the choice rotates.
func (c *Client) pick(now time.Time) *endpoint {
	if len(c.eps) == 1 {
		return c.eps[0]
	}
	start := int(c.next.Add(1) % uint64(len(c.eps)))
	var best, soonest *endpoint
	var soonestAt time.Time
	for i := range c.eps {
		e := c.eps[(start+i)%len(c.eps)]
		e.mu.Lock()
		down := e.downUntil
		e.mu.Unlock()
		if now.Before(down) {
			if soonest == nil || down.Before(soonestAt) {
				soonest, soonestAt = e, down
			}
			continue
		}
		if best == nil || e.inflight.Load() < best.inflight.Load() {
			best = e
		}
	}
	if best == nil {
		return soonest
	}
	return best
}

// observe records an attempt's outcome.
// A failure of the replica itself sets it aside for its penalty, which doubles up to limit.
// Such failures are a connection error, a timeout, a 5xx or an undecodable body.
// A success, or a failure that says nothing of the replica's health such as a 4xx or a cancellation, clears it.
func (e *endpoint) observe(ae *delegate.APIError, limit time.Duration, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case ae != nil && ae.Type == delegate.ErrKindCanceled:
		return // the caller gave up: nothing learnt about the replica
	case ae == nil || ae.Status >= 400 && ae.Status < 500:
		e.downUntil, e.penalty = time.Time{}, 0
		return
	}
	if e.penalty == 0 {
		e.penalty = firstPenalty
	}
	e.downUntil = now.Add(e.penalty)
	e.penalty = min(2*e.penalty, max(limit, firstPenalty))
}

// displayURL is a base URL as a trace may show it: without user
// information, which can hold a password.
func displayURL(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	u.User = nil
	return u.String()
}
