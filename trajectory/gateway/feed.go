package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/delegatelab/delegate/rollout"
)

// Feed hands group records to a trainer in the same process. Set it as
// Config.Sink: the gateway sends it every committed record in file order,
// and it queues them for Next. Wait paces sessions by the queue. Its
// methods may run concurrently.
type Feed struct {
	limit int

	mu      sync.Mutex
	queue   []*rollout.GroupRecord
	version int
	closed  bool
	// changed is closed, and replaced, when the queue, version or closed
	// changes.
	changed chan struct{}
}

// ErrFeedClosed is Next's and Wait's error once the feed is closed.
var ErrFeedClosed = errors.New("gateway feed: closed")

// NewFeed returns a feed whose Wait lets a session start while fewer than
// limit records wait for the trainer; limit 0 never waits.
func NewFeed(limit int) *Feed {
	return &Feed{limit: max(limit, 0), changed: make(chan struct{})}
}

// notify wakes the waiters. The caller holds f.mu.
func (f *Feed) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Wait implements rollout.Sink. It returns once the queue has room, with
// the policy version new sessions sample (SetVersion).
func (f *Feed) Wait(ctx context.Context) (int, error) {
	for {
		f.mu.Lock()
		v, n, closed, changed := f.version, len(f.queue), f.closed, f.changed
		f.mu.Unlock()
		switch {
		case closed:
			return 0, ErrFeedClosed
		case f.limit == 0 || n < f.limit:
			return v, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Send implements rollout.Sink: it queues rec for Next. It never blocks.
func (f *Feed) Send(_ context.Context, rec *rollout.GroupRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrFeedClosed
	}
	f.queue = append(f.queue, rec)
	f.notify()
	return nil
}

// Next removes and returns the oldest queued record, waiting for one.
func (f *Feed) Next(ctx context.Context) (*rollout.GroupRecord, error) {
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return nil, ErrFeedClosed
		}
		if len(f.queue) > 0 {
			rec := f.queue[0]
			f.queue[0] = nil
			f.queue = f.queue[1:]
			f.notify()
			f.mu.Unlock()
			return rec, nil
		}
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// SetVersion sets the policy version Wait returns: the trainer's steps
// whose updates the served policy holds.
func (f *Feed) SetVersion(v int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version = v
	f.notify()
}

// Queued returns the records waiting for Next.
func (f *Feed) Queued() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue)
}

// Close ends the feed: Wait, Send and Next fail from then on. Queued
// records are dropped; ReadSent finds them again.
func (f *Feed) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.queue = nil
	f.notify()
}

// ReadSent returns the group records in dir that a gateway sent to its
// Config.Sink before it stopped, in file order. They are the records of
// GroupsFile up to the length PushedFile holds, less those the gateway does
// not send (no token ids). A trainer fed in process reads them before Open
// to take up those it had not trained on; the gateway sends only later
// ones. No PushedFile: none.
func ReadSent(dir string) ([]*rollout.GroupRecord, error) {
	b, err := os.ReadFile(filepath.Join(dir, PushedFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read sent groups: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("read sent groups: %s holds %q, not a length", filepath.Join(dir, PushedFile), b)
	}
	path := filepath.Join(dir, GroupsFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read sent groups: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(io.LimitReader(f, n))
	var out []*rollout.GroupRecord
	var at int64
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read sent groups: %s at %d: %w (the sent length %d cuts a record)", path, at, err, n)
		}
		rec, err := rollout.DecodeGroup(line)
		if err != nil {
			return nil, fmt.Errorf("read sent groups: %s at %d: %w", path, at, err)
		}
		at += int64(len(line))
		if noTokens(rec) == "" {
			out = append(out, rec)
		}
	}
	return out, nil
}
