package strategy

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate"
)

// lead has K peers answer, a leader aggregate, and T rounds of refinement.
type lead struct {
	leader delegate.Agent
	peers  []delegate.Agent
	cfg    Config
	p      prompts
}

func (l *lead) Name() string { return NameLead }

// Run plays rounds 0..Rounds. In each, the K peers answer concurrently. In
// round 0 they answer independently; in later rounds each refines its own
// last answer given the leader's last output. Then the leader reads the
// question and every peer's latest response and writes its reasoning and an
// <answer>. The answer is the last leader output's <answer>. A failed peer
// call is stated in its response's place. A failed leader call ends the
// run, keeping the previous round's answer. Events go to events, which may
// be nil, by non-blocking sends; the caller owns the channel.
func (l *lead) Run(ctx context.Context, request string, events chan<- delegate.Event) (*delegate.Trace, error) {
	rec := delegate.NewRecorder(NameLead, request, events)
	k := l.cfg.Peers
	convs := make([][]delegate.Message, k) // each peer's conversation so far
	answers := make([]string, k)           // each peer's latest response
	var leaderOut, answer string
	var fail delegate.Failure
	for t := 0; t <= l.cfg.Rounds; t++ {
		g := rec.Group(nil, RoundNode(t))
		if err := l.peerRound(ctx, rec, g, request, t, leaderOut, convs, answers); err != nil {
			rec.EndGroup(g)
			return panicked(rec, NameLead, answer, err)
		}
		if ctx.Err() != nil {
			rec.EndGroup(g)
			return finishRun(ctx, rec, NameLead, answer, delegate.Failure{})
		}
		peers := make([]PeerAnswer, k)
		for i, a := range answers {
			peers[i] = PeerAnswer{Index: i + 1, Answer: a}
		}
		msgs, err := l.p.messages("leader_system", "leader_user", PromptData{
			Request: request, K: k, Round: t, Peers: peers, Previous: leaderOut,
		})
		if err != nil {
			rec.EndGroup(g)
			return finishRun(ctx, rec, NameLead, answer, delegate.Failed(delegate.FailurePrompt, "%v", err))
		}
		resp, err := chat(ctx, rec, g, NodeLeader, l.leader, l.cfg.Leader.request(0, msgs))
		rec.EndGroup(g)
		if err != nil {
			return finishRun(ctx, rec, NameLead, answer, delegate.Failed(delegate.FailureCall, "%s: %v", RoundNode(t), err))
		}
		leaderOut = resp.Text()
		var ok bool
		answer, ok = delegate.AnswerTag(leaderOut)
		fail = delegate.Failure{}
		switch {
		case resp.Choices[0].FinishReason == delegate.FinishLength:
			if !ok {
				answer = strings.TrimSpace(leaderOut)
			}
			fail = delegate.Failed(delegate.FailureTruncated, "%s in %s stopped at max_tokens", NodeLeader, RoundNode(t))
		case !ok:
			answer = strings.TrimSpace(leaderOut)
			fail = delegate.Failed(delegate.FailureAnswerFormat, "%s in %s gave no <answer>; the whole reply is the answer", NodeLeader, RoundNode(t))
		}
	}
	return finishRun(ctx, rec, NameLead, answer, fail)
}

// peerRound runs the K peers of round t concurrently; peer i writes only
// convs[i] and answers[i]. Only a panic is returned.
func (l *lead) peerRound(ctx context.Context, rec *delegate.Recorder, g *delegate.Node, request string, t int, leaderOut string, convs [][]delegate.Message, answers []string) error {
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(len(convs))
	for i := range convs {
		eg.Go(func() error {
			return protect(func() error {
				answers[i] = l.peer(gctx, rec, g, request, t, i, leaderOut, &convs[i])
				return nil
			})
		})
	}
	if err := eg.Wait(); err != nil {
		return fmt.Errorf("%s peers: %w", RoundNode(t), err)
	}
	return nil
}

// peer runs peer i (from 0) in round t and returns its response, or its
// failure stated. conv holds the peer's conversation and is extended.
func (l *lead) peer(ctx context.Context, rec *delegate.Recorder, g *delegate.Node, request string, t, i int, leaderOut string, conv *[]delegate.Message) string {
	agent := l.peers[i%len(l.peers)]
	d := PromptData{Request: request, Index: i + 1, K: l.cfg.Peers, Round: t, Leader: leaderOut}
	var msgs []delegate.Message
	if t == 0 {
		m, err := l.p.messages("peer_system", "peer_user", d)
		if err != nil {
			return fmt.Sprintf("[peer %d failed: %v]", i+1, err)
		}
		msgs = m
	} else {
		refine, err := l.p.render("peer_refine", d)
		if err != nil {
			return fmt.Sprintf("[peer %d failed: %v]", i+1, err)
		}
		msgs = append(append([]delegate.Message(nil), *conv...), delegate.User(refine))
	}
	resp, err := chat(ctx, rec, g, PeerNode(i+1), agent, l.cfg.Peer.request(i, msgs))
	if err != nil {
		*conv = msgs
		return fmt.Sprintf("[peer %d failed: %v]", i+1, err)
	}
	text := resp.Text()
	*conv = append(msgs, delegate.Assistant(text))
	return text
}
