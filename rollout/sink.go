package rollout

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/delegatelab/delegate/store"
)

// sendQueue holds the written groups not yet sent, as their places in groups.jsonl.
// It keeps places, not records, so a slow sink costs no memory per group's sequences.
// Safe for concurrent use.
type sendQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	groups []store.Group
	closed bool
}

func newSendQueue() *sendQueue {
	q := &sendQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *sendQueue) push(g store.Group) {
	q.mu.Lock()
	q.groups = append(q.groups, g)
	q.mu.Unlock()
	q.cond.Signal()
}

// close says no more groups come; pop then drains what is left.
func (q *sendQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// pop returns the next group, ok false once the queue is closed and empty
// or ctx is done.
func (q *sendQueue) pop(ctx context.Context) (store.Group, bool) {
	stop := context.AfterFunc(ctx, q.cond.Broadcast)
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.groups) == 0 && !q.closed && ctx.Err() == nil {
		q.cond.Wait()
	}
	if len(q.groups) == 0 || ctx.Err() != nil {
		return store.Group{}, false
	}
	g := q.groups[0]
	q.groups = q.groups[1:]
	return g, true
}

// unsent returns a queue holding the written groups a previous run did not
// send, in the order they were written.
func (r *runner) unsent(ctx context.Context) (*sendQueue, error) {
	q := newSendQueue()
	sent, err := r.db.Sent(ctx)
	if err != nil {
		return nil, err
	}
	groups, err := r.db.Groups(ctx)
	if err != nil {
		return nil, err
	}
	var pending []store.Group
	for _, g := range groups {
		if g.Length > 0 && !sent[[2]int{g.Item, g.Group}] {
			pending = append(pending, g)
		}
	}
	// Written order is file order.
	slices.SortFunc(pending, func(a, b store.Group) int { return cmp.Compare(a.Offset, b.Offset) })
	q.groups = pending
	return q, nil
}

// sendGroups sends the queued groups to the sink one by one and records each as sent.
// It reads each record back from groups.jsonl.
// On an error it calls stop, so that the run ends too.
func (r *runner) sendGroups(ctx context.Context, stop func()) error {
	af := r.files[GroupsFile]
	for {
		g, ok := r.sendq.pop(ctx)
		if !ok {
			return ctx.Err()
		}
		line := make([]byte, g.Length)
		if _, err := af.f.ReadAt(line, g.Offset); err != nil {
			stop()
			return fmt.Errorf("read group of item %d back from %s: %w", g.Item, GroupsFile, err)
		}
		var rec GroupRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			stop()
			return fmt.Errorf("decode group of item %d from %s: %w", g.Item, GroupsFile, err)
		}
		if err := r.cfg.Sink.Send(ctx, &rec); err != nil {
			stop()
			return fmt.Errorf("send group %s: %w", rec.ID, err)
		}
		if err := r.db.MarkSent(context.WithoutCancel(ctx), g.Item, g.Group); err != nil {
			stop()
			return err
		}
	}
}
