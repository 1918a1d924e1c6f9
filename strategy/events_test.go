package strategy

import (
	"context"
	"testing"

	"github.com/delegatelab/delegate"
)

func countNodes(n *delegate.Node) int {
	c := 0
	for _, ch := range n.Children {
		c += 1 + countNodes(ch)
	}
	return c
}

func TestEvents(t *testing.T) {
	delegator, subagent := decomposeFixture("<|end_subtask|>")
	s := mustNew(t, NameDecompose, decomposeRoles(delegator, subagent), DefaultConfig())
	events := make(chan delegate.Event, 100)
	tr, err := s.Run(context.Background(), testRequest, events)
	if err != nil {
		t.Fatal(err)
	}
	close(events)
	nodes := countNodes(tr.Root) // plan, delegator, subagents, 3 sub-agents, aggregate, delegator
	if nodes != 8 {
		t.Fatalf("trace has %d nodes, want 8", nodes)
	}
	started := map[int]bool{}
	finished := map[int]delegate.Event{}
	for ev := range events {
		switch ev.Kind {
		case delegate.EventStart:
			started[ev.ID] = true
		case delegate.EventFinish:
			if !started[ev.ID] {
				t.Errorf("node %d (%s) finished before it started", ev.ID, ev.Name)
			}
			finished[ev.ID] = ev
		}
	}
	if len(started) != nodes || len(finished) != nodes {
		t.Errorf("%d starts and %d finishes, want %d each", len(started), len(finished), nodes)
	}
	var calls int
	for _, ev := range finished {
		if ev.Model != "" {
			calls++
			if ev.Usage.CompletionTokens == 0 || ev.Depth != 2 {
				t.Errorf("call event %s: usage %+v depth %d, want usage and depth 2", ev.Name, ev.Usage, ev.Depth)
			}
		}
	}
	if calls != 5 {
		t.Errorf("%d call finish events, want 5", calls)
	}
	if tr.DroppedEvents != 0 {
		t.Errorf("dropped %d events with room for all", tr.DroppedEvents)
	}
}

func TestFullEventChannelNeverBlocks(t *testing.T) {
	strong, weak := routeFixture()
	s := mustNew(t, NameRoute, routeRoles(strong, weak), DefaultConfig())
	events := make(chan delegate.Event) // nobody reads it
	tr, err := s.Run(context.Background(), mathRequest, events)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Answer != "45" {
		t.Errorf("answer = %q, want 45", tr.Answer)
	}
	if want := int64(2 * countNodes(tr.Root)); tr.DroppedEvents != want {
		t.Errorf("dropped events = %d, want %d (every start and finish)", tr.DroppedEvents, want)
	}
}
