package train

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/models"
	"github.com/delegatelab/delegate/nn"
)

// The trace roles of every arm and rollout. Tokens, calls and prices line up
// across arms whatever the strategy. The delegator in the main seat (route's
// strong, single's single, lead's leader) is RoleDelegator; the sub-agents
// (route's weak, lead's peers) are RoleSubagent; the solver answering a whole
// problem alone is RoleSolver.
const (
	RoleDelegator = "delegator"
	RoleSubagent  = "subagent"
	RoleSolver    = "solver"
)

// loadCheckpoint loads an nn checkpoint directory and names it in errors.
// With dir "" it loads the shipped model named what from the binary. With
// dir "shipped:NAME" it loads the shipped model NAME.
func loadCheckpoint(what, dir string) (*nn.Params, error) {
	if name, ok := strings.CutPrefix(dir, ShippedPrefix); ok {
		what, dir = name, ""
	}
	load := func() (*nn.Params, map[string]string, error) { return nn.Load(dir) }
	if dir == "" {
		load = func() (*nn.Params, map[string]string, error) { return models.Load(what) }
	}
	p, _, err := load()
	if err != nil {
		return nil, fmt.Errorf("load %s checkpoint %s: %w", what, dir, err)
	}
	return p, nil
}

// checkpointName is how tables and notes name a checkpoint setting.
func checkpointName(dir string) string {
	if dir == "" {
		return "shipped (embedded)"
	}
	return dir
}

// conversation reports the prompt tokens a provider would price as cached.
// It does so on each response of one conversation's model. They are the
// longest common prefix of the prompt with the previous call's prompt and
// generated tokens. A prefix under minCached tokens counts none, as real
// APIs cache only long prefixes. It asks for logprobs to know the
// generated token ids, and leaves them in the response: a trainer may
// need them. It is the one wrapper on a delegator's call path; a trained
// seat's sampling is its agent's delegate.Sampler, which Recorder.Call
// applies before. The calls of one conversation are sequential; one
// conversation per value (make one per run).
type conversation struct {
	m         delegate.Model
	minCached int
	mu        sync.Mutex
	prev      []int // the previous call's prompt and generated ids
}

// newConversation is the conversation of m, one per run.
func newConversation(m delegate.Model, minCached int) *conversation {
	return &conversation{m: m, minCached: minCached}
}

func (c *conversation) Name() string { return c.m.Name() }

func (c *conversation) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	r := *req
	r.Logprobs = true
	resp, err := c.m.Chat(ctx, &r)
	if err != nil || resp == nil {
		return resp, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := resp.PromptTokenIDs
	n := 0
	for n < len(ids) && n < len(c.prev) && ids[n] == c.prev[n] {
		n++
	}
	if n < c.minCached {
		n = 0
	}
	resp.Usage.CachedTokens = n
	if len(resp.Choices) > 0 {
		next := append([]int(nil), ids...)
		for _, lp := range resp.Choices[0].Logprobs {
			next = append(next, lp.TokenID)
		}
		c.prev = next
	}
	return resp, nil
}
