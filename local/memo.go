package local

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/delegatelab/delegate"
)

// Memoized returns a model that serves each distinct request once and
// repeats its response. It shares m's engine, weights and count of calls
// (a repeated request does not count). It is for frozen weights, whose
// answer to a request under a seed never changes: a frozen peer's answer
// to a problem is then computed once for every rollout and table row. A
// request in flight is waited for, not sent twice; failed calls are not
// kept. Only Chat is memoized; Close stops m's engine too.
func (m *Model) Memoized() *Model {
	return &Model{cfg: m.cfg, params: m.params, engine: m.engine, codec: m.codec, limit: m.limit, calls: m.calls,
		memo: &memo{in: map[string]*memoEntry{}}}
}

// memo holds a memoized model's responses by request. Safe for
// concurrent use.
type memo struct {
	mu sync.Mutex
	in map[string]*memoEntry
}

type memoEntry struct {
	done chan struct{}
	resp *delegate.Response
	err  error
}

// chat answers req from the memo, or with call once for every request
// equal to it.
func (c *memo) chat(ctx context.Context, req *delegate.Request, call func() (*delegate.Response, error)) (*delegate.Response, error) {
	key, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("memo key: %w", err)
	}
	k := string(key)
	for {
		c.mu.Lock()
		e, ok := c.in[k]
		if !ok {
			e = &memoEntry{done: make(chan struct{})}
			c.in[k] = e
			c.mu.Unlock()
			e.resp, e.err = call()
			if e.err != nil {
				c.mu.Lock()
				delete(c.in, k)
				c.mu.Unlock()
			}
			close(e.done)
			return copyResponse(e.resp), e.err
		}
		c.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err == nil {
			return copyResponse(e.resp), nil
		}
		// The call that was in flight failed; try ourselves.
	}
}

// copyResponse is r with its own Choices, which a caller may replace.
func copyResponse(r *delegate.Response) *delegate.Response {
	if r == nil {
		return nil
	}
	c := *r
	c.Choices = slices.Clone(r.Choices)
	return &c
}
