package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rollout"
)

// Strategy is the strategy name of the gateway's group records.
const Strategy = "gateway"

// addFinished adds a stored session to its group. Once the group holds
// GroupSize sessions, it appends the group's records and commits them.
// It returns the records written.
func (g *Gateway) addFinished(ctx context.Context, fin *Finished) (int, error) {
	g.gmu.Lock()
	defer g.gmu.Unlock()
	g.pending[fin.Group] = append(g.pending[fin.Group], fin)
	g.held.Add(finishedBytes(fin))
	members := g.pending[fin.Group]
	if len(members) < g.cfg.GroupSize {
		return 0, nil
	}
	return g.commitGroup(ctx, fin.Group, members[:g.cfg.GroupSize])
}

// commitGroup appends the records of members, the first of the pending
// sessions of group key, and commits them. A group of fewer than
// GroupSize timed out: its records name the sessions it waited for in
// vain. The caller holds gmu.
func (g *Gateway) commitGroup(ctx context.Context, key string, members []*Finished) (int, error) {
	recs, err := Records(members, g.cfg.Estimator)
	if err != nil {
		return 0, err
	}
	var buf []byte
	for _, rec := range recs {
		rec.Run = g.run
		for i := len(members); i < g.cfg.GroupSize; i++ {
			rec.Missing = append(rec.Missing, rollout.MissedMember{ID: fmt.Sprintf("%s.missing%d", rec.ID, i), Index: i,
				Error: fmt.Sprintf("the group timed out after %v with %d of its %d sessions", g.cfg.GroupTimeout, len(members), g.cfg.GroupSize)})
		}
		line, err := json.Marshal(rec)
		if err != nil {
			return 0, fmt.Errorf("encode group %s: %w", rec.ID, err)
		}
		buf = append(append(buf, line...), '\n')
	}
	// Written and synced, then committed with the sessions it holds: a
	// crash between the two leaves bytes past the recorded length, which
	// Open removes, and the sessions ungrouped, which it groups again.
	if _, err := g.groups.WriteAt(buf, g.size); err != nil {
		return 0, fmt.Errorf("write %s: %w", GroupsFile, err)
	}
	if err := g.groups.Sync(); err != nil {
		return 0, fmt.Errorf("sync %s: %w", GroupsFile, err)
	}
	keys := make([]string, len(members))
	for i, m := range members {
		keys[i] = m.Key
	}
	if err := g.db.CommitSessionGroup(ctx, GroupsFile, g.size, int64(len(buf)), keys); err != nil {
		// The bytes past the recorded length are removed at the next Open.
		return 0, err
	}
	g.size += int64(len(buf))
	g.kickPusher()
	g.forget(key, len(members))
	return len(recs), nil
}

// forget takes the first n pending sessions of group key out of memory.
// The caller holds gmu.
func (g *Gateway) forget(key string, n int) {
	for _, m := range g.pending[key][:n] {
		g.held.Add(-finishedBytes(m))
	}
	g.pending[key] = slices.Delete(g.pending[key], 0, n)
	if len(g.pending[key]) == 0 {
		delete(g.pending, key)
	}
}

// timer closes the groups past GroupTimeout, checking ten times a
// time-out and at least every second, until ctx ends.
func (g *Gateway) timer(ctx context.Context) {
	defer close(g.timerDone)
	t := time.NewTicker(min(max(g.cfg.GroupTimeout/10, 10*time.Millisecond), time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.closeLate(ctx)
		}
	}
}

// closeLate closes each group that has waited GroupTimeout since its
// first session finished. One of at least 2 sessions is written as a
// smaller group; one of fewer is dropped: its session is stored as
// dropped and counted. The store holds the finish times, so a restart
// keeps the wait.
func (g *Gateway) closeLate(ctx context.Context) {
	g.gmu.Lock()
	defer g.gmu.Unlock()
	now := g.cfg.Now()
	for key, members := range g.pending {
		first := members[0].Finished
		for _, m := range members[1:] {
			if m.Finished.Before(first) {
				first = m.Finished
			}
		}
		if now.Sub(first) < g.cfg.GroupTimeout {
			continue
		}
		n := min(len(members), g.cfg.GroupSize)
		if n >= 2 {
			if _, err := g.commitGroup(ctx, key, members[:n]); err != nil {
				g.log.Error("write a timed-out group", "group", key, "sessions", n, "err", err)
				continue
			}
			g.metrics.timedOut.WithLabelValues("written").Inc()
			g.log.Warn("a group timed out: written with the sessions it has", "group", key, "sessions", n, "group_size", g.cfg.GroupSize)
			continue
		}
		lone := members[0].Key
		if err := g.db.DropSessions(ctx, []string{lone}); err != nil {
			g.log.Error("drop a timed-out group", "group", key, "err", err)
			continue
		}
		g.forget(key, 1) // clears members[0]
		g.metrics.timedOut.WithLabelValues("dropped").Inc()
		g.metrics.dropped.Inc()
		g.log.Warn("a group timed out with one session: dropped", "group", key, "session", short(lone), "timeout", g.cfg.GroupTimeout)
	}
}

// Records makes the group records of one group's finished sessions. It
// makes one per trained role that has samples, in the layout `delegate
// process` writes. Session i is rollout i. Each of its samples of the role
// is a sequence carrying the session's reward and advantage. A group whose
// rewards are all equal is written with zero advantages and
// set_advantage_to_zero overrides, reason equal_scores, as process does
// with --keep-ties. A record says which sequences the gateway tokenized
// (TokenizedBy), when any were.
func Records(members []*Finished, est reward.Estimator) ([]*rollout.GroupRecord, error) {
	if len(members) == 0 {
		return nil, nil
	}
	id, adv, tied, err := groupAdvantages(members, est)
	if err != nil {
		return nil, err
	}
	var out []*rollout.GroupRecord
	for _, role := range sampleRoles(members) {
		out = append(out, roleRecord(members, role, id, adv, tied))
	}
	return out, nil
}

// groupAdvantages names the group by a hash of its sessions' keys and
// estimates their advantages. tied says all rewards are equal, and then
// every advantage is zero.
func groupAdvantages(members []*Finished, est reward.Estimator) (id string, adv []float64, tied bool, err error) {
	rewards := make([]float64, len(members))
	h := sha256.New()
	for i, m := range members {
		rewards[i] = m.Reward
		h.Write([]byte(m.Key))
	}
	id = members[0].Group + "#" + hex.EncodeToString(h.Sum(nil))[:16]
	adv = make([]float64, len(members))
	tied = allEqual(rewards)
	if !tied {
		a, err := reward.Advantages(est, rewards)
		if err != nil {
			return "", nil, false, fmt.Errorf("advantages of group %s: %w", id, err)
		}
		adv = a
	}
	return id, adv, tied, nil
}

// sampleRoles lists, sorted, the roles the members' samples are of.
func sampleRoles(members []*Finished) []string {
	var roles []string
	for _, m := range members {
		for _, s := range m.Samples {
			if !slices.Contains(roles, s.Role) {
				roles = append(roles, s.Role)
			}
		}
	}
	slices.Sort(roles)
	return roles
}

// roleRecord makes the group record of one role. Every member is a
// rollout, and each of its samples of the role a sequence.
func roleRecord(members []*Finished, role, id string, adv []float64, tied bool) *rollout.GroupRecord {
	rec := &rollout.GroupRecord{Version: rollout.GroupVersion, ID: id + "." + role, TaskID: members[0].Task.ID,
		Strategy: Strategy, GroupOverrides: rollout.GroupOverride{GroupSize: len(members)}}
	if tied {
		rec.Reason = rollout.DropEqual
	}
	oldest := -1
	for i, m := range members {
		rec.Rollouts = append(rec.Rollouts, rollout.Member{ID: short(m.Key), Index: i, Reward: m.Reward, Advantage: adv[i], Outcome: roleOutcome(m, role)})
		oldest = appendSequences(rec, m, i, role, adv[i], tied, oldest)
	}
	if !slices.ContainsFunc(rec.TokenizedBy, func(by string) bool { return by != "" }) {
		rec.TokenizedBy = nil // the engine gave every id
	}
	if oldest < 0 {
		// No call says: the trainer's step when the oldest session
		// started.
		for _, m := range members {
			if v := m.PolicyVersion; v != nil && (oldest < 0 || *v < oldest) {
				oldest = *v
			}
		}
	}
	if oldest >= 0 {
		rec.PolicyVersion = oldest
	}
	return rec
}

// roleOutcome is a session's outcome seen from role: its completion
// tokens, and the calls other roles made.
func roleOutcome(m *Finished, role string) *rollout.Outcome {
	o := &rollout.Outcome{Correct: m.Correct}
	for _, c := range m.Calls {
		o.Cost += c.Cost
		if c.Role == role {
			o.Tokens += c.Usage.CompletionTokens
		} else {
			o.Calls++
		}
	}
	return o
}

// appendSequences appends the samples of role in session m, rollout i,
// to rec as sequences. It returns oldest lowered to the oldest policy
// version among them; -1 means none is known.
func appendSequences(rec *rollout.GroupRecord, m *Finished, i int, role string, adv float64, tied bool, oldest int) int {
	for _, s := range m.Samples {
		if s.Role != role {
			continue
		}
		if v := s.PolicyVersion; v != nil && (oldest < 0 || *v < oldest) {
			oldest = *v
		}
		rec.Tokens = append(rec.Tokens, s.Tokens)
		rec.Masks = append(rec.Masks, s.Masks)
		rec.InferenceLogprobs = append(rec.InferenceLogprobs, s.Logprobs)
		rec.Messages = append(rec.Messages, nonNilTurns(s.Messages))
		rec.Scores = append(rec.Scores, m.Reward)
		rec.Advantages = append(rec.Advantages, adv)
		rec.SequenceRollout = append(rec.SequenceRollout, i)
		rec.NoTokens = append(rec.NoTokens, s.NoTokens)
		rec.TokenizedBy = append(rec.TokenizedBy, s.TokenizedBy)
		rec.Overrides = append(rec.Overrides, rollout.Override{SetAdvantageToZero: tied})
	}
	return oldest
}

func allEqual(xs []float64) bool {
	for _, x := range xs[1:] {
		if x != xs[0] {
			return false
		}
	}
	return true
}

func nonNilTurns(t []delegate.Turn) []delegate.Turn {
	if t == nil {
		return []delegate.Turn{}
	}
	return t
}
