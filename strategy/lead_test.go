package strategy

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
)

func TestLeadHappyPath(t *testing.T) {
	leader, peer := leadFixture()
	cfg := DefaultConfig()
	seed := int64(10)
	cfg.Peer.Seed = &seed
	roles := Roles{Leader: agent(RoleLeader, leader), Peers: []delegate.Agent{agent(RolePeer, peer)}}
	tr := mustRun(t, mustNew(t, NameLead, roles, cfg), mathRequest)
	if tr.Answer != "45 pens" || tr.Failure != "" {
		t.Fatalf("answer, failure = %q, %q; want \"45 pens\", none", tr.Answer, tr.Failure)
	}
	if got, want := childNames(tr.Root), []string{"round 0", "round 1"}; !slices.Equal(got, want) {
		t.Errorf("rounds = %v, want %v", got, want)
	}
	for _, round := range []string{"round 0", "round 1"} {
		names := childNames(child(t, tr.Root, round))
		if len(names) != 4 || names[3] != NodeLeader {
			t.Errorf("%s = %v, want 3 peers then the leader", round, names)
		}
		slices.Sort(names)
		if want := []string{NodeLeader, "peer 1", "peer 2", "peer 3"}; !slices.Equal(names, want) {
			t.Errorf("%s = %v, want %v", round, names, want)
		}
	}

	// Round 0: three independent answers with seeds 10, 11, 12; round 1:
	// each peer's own answer followed by the leader's round-0 output.
	preqs := peer.Requests()
	if len(preqs) != 6 {
		t.Fatalf("peers got %d requests, want 6", len(preqs))
	}
	var seeds []int64
	for _, r := range preqs[:3] {
		if len(r.Messages) != 2 || modeltest.LastUser(r) != mathRequest {
			t.Errorf("round-0 peer request = %+v, want system + the question", r.Messages)
		}
		seeds = append(seeds, *r.Seed)
	}
	slices.Sort(seeds)
	if !slices.Equal(seeds, []int64{10, 11, 12}) {
		t.Errorf("round-0 peer seeds = %v, want 10, 11, 12", seeds)
	}
	for _, r := range preqs[3:] {
		m := r.Messages
		if len(m) != 4 || m[2].Role != delegate.RoleAssistant || !strings.Contains(m[2].Content, "<answer>45</answer>") {
			t.Fatalf("round-1 peer request = %+v, want system, question, own answer, refinement", m)
		}
		if !strings.Contains(m[3].Content, "All three agents computed 42 + 3. <answer>45</answer>") {
			t.Errorf("refinement prompt lacks the leader's output:\n%s", m[3].Content)
		}
	}

	lreqs := leader.Requests()
	if len(lreqs) != 2 {
		t.Fatalf("leader got %d requests, want 2", len(lreqs))
	}
	r0 := modeltest.LastUser(lreqs[0])
	for _, want := range []string{mathRequest, "Agent 1's response:\n6 * 7 = 42", "Agent 3's response:\n6 * 7 = 42"} {
		if !strings.Contains(r0, want) {
			t.Errorf("round-0 leader prompt lacks %q:\n%s", want, r0)
		}
	}
	if strings.Contains(r0, "previous aggregation") {
		t.Errorf("round-0 leader prompt mentions a previous aggregation:\n%s", r0)
	}
	if !strings.Contains(modeltest.SystemPrompt(lreqs[0]), "team of 3 agents") {
		t.Errorf("leader system prompt does not give K:\n%s", modeltest.SystemPrompt(lreqs[0]))
	}
	r1 := modeltest.LastUser(lreqs[1])
	for _, want := range []string{"Agent 2's response:\nThe leader agrees with 45", "Your previous aggregation:\nAll three agents computed"} {
		if !strings.Contains(r1, want) {
			t.Errorf("round-1 leader prompt lacks %q:\n%s", want, r1)
		}
	}
	checkRole(t, tr, RoleLeader, leader)
	checkRole(t, tr, RolePeer, peer)
	checkTotal(t, tr)
}

func TestLeadPeerAgentsCycle(t *testing.T) {
	leader, _ := leadFixture()
	a := fake("peer-a", modeltest.Reply("<answer>1</answer>"))
	b := fake("peer-b", modeltest.Reply("<answer>2</answer>"))
	cfg := DefaultConfig()
	cfg.Rounds = 0
	roles := Roles{Leader: agent(RoleLeader, leader), Peers: []delegate.Agent{agent(RolePeer, a), agent(RolePeer, b)}}
	tr := mustRun(t, mustNew(t, NameLead, roles, cfg), mathRequest)
	if a.Calls() != 2 || b.Calls() != 1 {
		t.Errorf("calls a, b = %d, %d; want 2, 1 (peer 3 is the first agent again)", a.Calls(), b.Calls())
	}
	if tr.Answer != "45" {
		t.Errorf("answer = %q, want 45 (round 0 only)", tr.Answer)
	}
	if got := tr.Roles[RolePeer].Calls; got != 3 {
		t.Errorf("peer calls in the trace = %d, want 3", got)
	}
}

func TestLeadFailures(t *testing.T) {
	t.Run("a peer fails", func(t *testing.T) {
		leader, _ := leadFixture()
		peer := fake("peer", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
			if *req.Seed == 1 { // the second peer
				return nil, &delegate.APIError{Status: 500}
			}
			return modeltest.Text("<answer>45</answer>"), nil
		})
		cfg := DefaultConfig()
		cfg.Rounds = 0
		seed := int64(0)
		cfg.Peer.Seed = &seed
		tr := mustRun(t, mustNew(t, NameLead, Roles{Leader: agent(RoleLeader, leader), Peers: []delegate.Agent{agent(RolePeer, peer)}}, cfg), mathRequest)
		if tr.Answer != "45" || tr.Failure != "" {
			t.Errorf("answer, failure = %q, %q; want the run to go on", tr.Answer, tr.Failure)
		}
		if p := modeltest.LastUser(leader.Requests()[0]); !strings.Contains(p, "Agent 2's response:\n[peer 2 failed: ") {
			t.Errorf("leader prompt does not state peer 2's failure:\n%s", p)
		}
		checkRole(t, tr, RolePeer, peer)
	})
	t.Run("leader gives no answer tag", func(t *testing.T) {
		leader := fake("leader", modeltest.Reply("I think 45."))
		_, peer := leadFixture()
		cfg := DefaultConfig()
		tr := mustRun(t, mustNew(t, NameLead, Roles{Leader: agent(RoleLeader, leader), Peers: []delegate.Agent{agent(RolePeer, peer)}}, cfg), mathRequest)
		if tr.Answer != "I think 45." || tr.FailureKind != delegate.FailureAnswerFormat {
			t.Errorf("answer, failure = %q, %q; want the whole reply and kind %q", tr.Answer, tr.Failure, delegate.FailureAnswerFormat)
		}
	})
	t.Run("leader fails in round 1", func(t *testing.T) {
		leader := fake("leader", modeltest.Script(modeltest.Text("<answer>45</answer>")))
		_, peer := leadFixture()
		tr := mustRun(t, mustNew(t, NameLead, Roles{Leader: agent(RoleLeader, leader), Peers: []delegate.Agent{agent(RolePeer, peer)}}, DefaultConfig()), mathRequest)
		if tr.Answer != "45" || tr.FailureKind != delegate.FailureCall || !strings.Contains(tr.Failure, "round 1") {
			t.Errorf("answer, failure = %q, %q; want round 0's answer kept and a call failure in round 1", tr.Answer, tr.Failure)
		}
	})
}
