package atropos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// store keeps the groups and the server's state. Methods may run
// concurrently.
type store interface {
	// add stores a group under its id and returns its sequence. dup
	// reports that a group with the same id was already stored.
	add(ctx context.Context, g *group, buffered bool) (seq uint64, dup bool, err error)
	// body returns a stored group's body; errGone if it was removed.
	body(ctx context.Context, seq uint64) ([]byte, error)
	remove(ctx context.Context, seq uint64) error
	// removeBelow removes every group stored under a sequence below seq.
	removeBelow(ctx context.Context, seq uint64) error
	// scan calls fn for every stored group in sequence order.
	scan(ctx context.Context, fn func(q queued, buffered bool)) error
	put(ctx context.Context, key string, val []byte) error
	// get returns nil, nil for a missing key.
	get(ctx context.Context, key string) ([]byte, error)
	del(ctx context.Context, key string) error
	keys(ctx context.Context) ([]string, error)
	reset(ctx context.Context) error
	// maxGroup is the largest group body the store takes, in bytes.
	maxGroup() int
	// copies reports whether add keeps a copy of the group's body rather
	// than the body itself, which the caller may then reuse once add
	// returns.
	copies() bool
}

var errGone = errors.New("group no longer stored")

// Header names of a stored group's metadata, so that a restart rebuilds
// the queue from headers alone.
const (
	hdrGroup    = "Delegate-Group"
	hdrEnv      = "Delegate-Env"
	hdrSize     = "Delegate-Size"
	hdrPolicy   = "Delegate-Policy"
	hdrBuffered = "Delegate-Buffered"
)

// jsStore keeps groups in a JetStream stream and state in a key-value
// bucket. Each group is one message, with Nats-Msg-Id = group id.
type jsStore struct {
	js      jetstream.JetStream
	pub     jetstream.JetStream // for add: js, or on a connection of its own
	stream  jetstream.Stream
	kv      jetstream.KeyValue
	subject string
	limit   int
}

// openJetStream creates or opens the stream and bucket named by prefix.
// Groups are published on pub; everything else goes through nc.
func openJetStream(ctx context.Context, nc, pub *nats.Conn, prefix string, replicas int, dedup time.Duration) (*jsStore, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	pjs := js
	if pub != nc {
		if pjs, err = jetstream.New(pub); err != nil {
			return nil, fmt.Errorf("jetstream on the publish connection: %w", err)
		}
	}
	subject := strings.ToLower(prefix) + ".groups"
	limit := int(min(nc.MaxPayload(), pub.MaxPayload())) - 4096 // headers
	stream, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        prefix + "_GROUPS",
		Description: "delegate api: scored groups (Atropos ScoredData), one message each",
		Subjects:    []string{subject + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Retention:   jetstream.LimitsPolicy,
		Duplicates:  dedup,
		Discard:     jetstream.DiscardNew,
		AllowDirect: true,
	})
	if err != nil {
		return nil, fmt.Errorf("create stream %s_GROUPS: %w", prefix, err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      prefix + "_STATE",
		Description: "delegate api: trainer, environments, batches by step",
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		History:     1,
	})
	if err != nil {
		return nil, fmt.Errorf("create key-value bucket %s_STATE: %w", prefix, err)
	}
	return &jsStore{js: js, pub: pjs, stream: stream, kv: kv, subject: subject, limit: limit}, nil
}

func (s *jsStore) maxGroup() int { return s.limit }

// copies is true: the publish has sent the body by the time it returns.
func (s *jsStore) copies() bool { return true }

func (s *jsStore) add(ctx context.Context, g *group, buffered bool) (uint64, bool, error) {
	env := "none"
	if g.env >= 0 {
		env = strconv.Itoa(g.env)
	}
	m := nats.NewMsg(s.subject + "." + env)
	m.Data = g.body
	m.Header.Set(hdrGroup, g.id)
	m.Header.Set(hdrEnv, strconv.Itoa(g.env))
	m.Header.Set(hdrSize, strconv.Itoa(g.size))
	if g.hasPolicy {
		m.Header.Set(hdrPolicy, strconv.FormatInt(g.policy, 10))
	}
	if buffered {
		m.Header.Set(hdrBuffered, "1")
	}
	ack, err := s.pub.PublishMsg(ctx, m, jetstream.WithMsgID(g.id))
	if err != nil {
		return 0, false, fmt.Errorf("publish group %s: %w", g.id, err)
	}
	return ack.Sequence, ack.Duplicate, nil
}

func (s *jsStore) body(ctx context.Context, seq uint64) ([]byte, error) {
	m, err := s.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, errGone
	}
	if err != nil {
		return nil, fmt.Errorf("get group %d: %w", seq, err)
	}
	return m.Data, nil
}

func (s *jsStore) remove(ctx context.Context, seq uint64) error {
	err := s.stream.DeleteMsg(ctx, seq)
	// Already gone (purged, or deleted before a crash) is success. The
	// client folds the server's API error into text here
	// (ErrMsgDeleteUnsuccessful + description), so the text is all there
	// is to look at.
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && !strings.Contains(err.Error(), "not found") {
		return fmt.Errorf("delete group %d: %w", seq, err)
	}
	return nil
}

func (s *jsStore) removeBelow(ctx context.Context, seq uint64) error {
	if err := s.stream.Purge(ctx, jetstream.WithPurgeSequence(seq)); err != nil {
		return fmt.Errorf("purge groups below %d: %w", seq, err)
	}
	return nil
}

func (s *jsStore) scan(ctx context.Context, fn func(queued, bool)) error {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream info: %w", err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	last := info.State.LastSeq
	cons, err := s.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{HeadersOnly: true})
	if err != nil {
		return fmt.Errorf("scan groups: %w", err)
	}
	empty := 0
	for {
		batch, err := cons.FetchNoWait(512)
		if err != nil {
			return fmt.Errorf("scan groups: %w", err)
		}
		got, done := 0, false
		var ferr error
		for m := range batch.Messages() { // drained whole so the fetch ends
			got++
			if done || ferr != nil {
				continue
			}
			meta, err := m.Metadata()
			if err != nil {
				ferr = fmt.Errorf("scan groups: %w", err)
				continue
			}
			q, buffered, err := fromHeaders(meta.Sequence.Stream, m.Headers())
			if err != nil {
				ferr = err
				continue
			}
			fn(q, buffered)
			done = meta.Sequence.Stream >= last
		}
		switch {
		case ferr != nil:
			return ferr
		case done:
			return nil
		case batch.Error() != nil:
			return fmt.Errorf("scan groups: %w", batch.Error())
		case got == 0:
			if empty++; empty > 50 {
				return fmt.Errorf("scan groups: stream ended before sequence %d", last)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func fromHeaders(seq uint64, h nats.Header) (queued, bool, error) {
	q := queued{seq: seq, id: h.Get(hdrGroup)}
	var err error
	if q.env, err = strconv.Atoi(h.Get(hdrEnv)); err != nil {
		return q, false, fmt.Errorf("group %d: header %s: %w", seq, hdrEnv, err)
	}
	if q.size, err = strconv.Atoi(h.Get(hdrSize)); err != nil {
		return q, false, fmt.Errorf("group %d: header %s: %w", seq, hdrSize, err)
	}
	if p := h.Get(hdrPolicy); p != "" {
		if q.policy, err = strconv.ParseInt(p, 10, 64); err != nil {
			return q, false, fmt.Errorf("group %d: header %s: %w", seq, hdrPolicy, err)
		}
		q.hasPolicy = true
	}
	return q, h.Get(hdrBuffered) == "1", nil
}

func (s *jsStore) put(ctx context.Context, key string, val []byte) error {
	if _, err := s.kv.Put(ctx, key, val); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

func (s *jsStore) get(ctx context.Context, key string) ([]byte, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return e.Value(), nil
}

func (s *jsStore) del(ctx context.Context, key string) error {
	if err := s.kv.Purge(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

func (s *jsStore) keys(ctx context.Context) ([]string, error) {
	ks, err := s.kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return ks, nil
}

func (s *jsStore) reset(ctx context.Context) error {
	if err := s.stream.Purge(ctx); err != nil {
		return fmt.Errorf("purge groups: %w", err)
	}
	ks, err := s.keys(ctx)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if err := s.del(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// memStore keeps everything in memory, as Atropos does: nothing survives
// the process. It is the floor the durable store is measured against.
type memStore struct {
	mu     sync.Mutex
	next   uint64
	groups map[uint64]memGroup
	ids    map[string]uint64
	kv     map[string][]byte
}

type memGroup struct {
	q        queued
	buffered bool
	body     []byte
}

func newMemStore() *memStore {
	return &memStore{groups: map[uint64]memGroup{}, ids: map[string]uint64{}, kv: map[string][]byte{}}
}

func (m *memStore) maxGroup() int { return 1 << 30 }

func (m *memStore) copies() bool { return false }

func (m *memStore) add(_ context.Context, g *group, buffered bool) (uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if seq, ok := m.ids[g.id]; ok {
		return seq, true, nil
	}
	m.next++
	m.ids[g.id] = m.next
	m.groups[m.next] = memGroup{
		q:        queued{seq: m.next, id: g.id, env: g.env, size: g.size, policy: g.policy, hasPolicy: g.hasPolicy},
		buffered: buffered, body: g.body,
	}
	return m.next, false, nil
}

func (m *memStore) body(_ context.Context, seq uint64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.groups[seq]
	if !ok {
		return nil, errGone
	}
	return g.body, nil
}

func (m *memStore) remove(_ context.Context, seq uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g, ok := m.groups[seq]; ok {
		delete(m.ids, g.q.id)
		delete(m.groups, seq)
	}
	return nil
}

func (m *memStore) removeBelow(_ context.Context, seq uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for s, g := range m.groups {
		if s < seq {
			delete(m.ids, g.q.id)
			delete(m.groups, s)
		}
	}
	return nil
}

func (m *memStore) scan(_ context.Context, fn func(queued, bool)) error {
	m.mu.Lock()
	seqs := slices.Sorted(maps.Keys(m.groups))
	gs := make([]memGroup, len(seqs))
	for i, s := range seqs {
		gs[i] = m.groups[s]
	}
	m.mu.Unlock()
	for _, g := range gs {
		fn(g.q, g.buffered)
	}
	return nil
}

func (m *memStore) put(_ context.Context, key string, val []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kv[key] = slices.Clone(val)
	return nil
}

func (m *memStore) get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.kv[key], nil
}

func (m *memStore) del(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.kv, key)
	return nil
}

func (m *memStore) keys(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.kv)), nil
}

func (m *memStore) reset(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.groups, m.ids, m.kv = map[uint64]memGroup{}, map[string]uint64{}, map[string][]byte{}
	return nil
}
