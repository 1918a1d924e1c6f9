package strategy

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
)

// counted wraps a fake and sums the usage of the responses it hands out.
// A test then checks the trace's totals against what the model reported.
type counted struct {
	*modeltest.Model
	mu     sync.Mutex
	usage  delegate.Usage
	calls  int
	errors int
}

func (c *counted) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	resp, err := c.Model.Chat(ctx, req)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if err != nil {
		c.errors++
	}
	if resp != nil {
		c.usage = c.usage.Add(resp.Usage)
	}
	return resp, err
}

func fake(name string, fn modeltest.Func) *counted {
	return &counted{Model: modeltest.New(name, fn)}
}

var testPrice = delegate.Price{Input: 1, CachedInput: 0.5, Output: 4}

func agent(role string, m delegate.Model) delegate.Agent {
	return delegate.Agent{Role: role, Model: m, Price: testPrice}
}

// checkRole checks that the trace's totals for role match what the fake
// handed out.
func checkRole(t *testing.T, tr *delegate.Trace, role string, c *counted) {
	t.Helper()
	got := tr.Roles[role]
	c.mu.Lock()
	defer c.mu.Unlock()
	if got.Calls != c.calls {
		t.Errorf("role %s: %d calls in the trace, want %d", role, got.Calls, c.calls)
	}
	if got.Errors != c.errors {
		t.Errorf("role %s: %d errors in the trace, want %d", role, got.Errors, c.errors)
	}
	if got.Usage != c.usage {
		t.Errorf("role %s: usage %+v in the trace, want %+v", role, got.Usage, c.usage)
	}
	if want := testPrice.Cost(c.usage); math.Abs(got.Cost-want) > 1e-12 {
		t.Errorf("role %s: cost %v, want %v", role, got.Cost, want)
	}
}

// checkTotal checks that the trace's grand total is the sum of its roles.
func checkTotal(t *testing.T, tr *delegate.Trace) {
	t.Helper()
	var sum delegate.Totals
	for _, r := range tr.Roles {
		sum.Calls += r.Calls
		sum.Usage = sum.Usage.Add(r.Usage)
	}
	if sum.Calls != tr.Total.Calls || sum.Usage != tr.Total.Usage {
		t.Errorf("total = %d calls %+v, roles sum to %d calls %+v", tr.Total.Calls, tr.Total.Usage, sum.Calls, sum.Usage)
	}
}

// child returns the child of n named name, failing the test if there is none.
func child(t *testing.T, n *delegate.Node, name string) *delegate.Node {
	t.Helper()
	for _, c := range n.Children {
		if c.Name == name {
			return c
		}
	}
	var names []string
	for _, c := range n.Children {
		names = append(names, c.Name)
	}
	t.Fatalf("node %q has no child %q (children: %s)", n.Name, name, strings.Join(names, ", "))
	return nil
}

// childNames lists the names of n's children in order.
func childNames(n *delegate.Node) []string {
	var names []string
	for _, c := range n.Children {
		names = append(names, c.Name)
	}
	return names
}

func mustNew(t *testing.T, name string, roles Roles, cfg Config) delegate.Strategy {
	t.Helper()
	s, err := New(name, roles, cfg)
	if err != nil {
		t.Fatalf("New(%q): %v", name, err)
	}
	return s
}

func mustRun(t *testing.T, s delegate.Strategy, request string) *delegate.Trace {
	t.Helper()
	tr, err := s.Run(context.Background(), request, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return tr
}

// subtaskOf returns the subtask a sub-agent request carries.
func subtaskOf(req *delegate.Request) string {
	u := modeltest.LastUser(req)
	if _, s, ok := strings.Cut(u, "Your subtask:\n"); ok {
		return s
	}
	return u
}

// planText builds a plan with the given subtasks and closing spelling.
func planText(reasoning, closing string, subtasks ...string) string {
	var b strings.Builder
	b.WriteString("<|reasoning|>\n" + reasoning + "\n</|reasoning|>\n")
	for _, s := range subtasks {
		b.WriteString("<|subtask|>\n" + s + "\n" + closing + "\n")
	}
	return b.String()
}
