package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/delegatelab/delegate"
)

// Key is the cache key of a request, as hex of a SHA-256.
// It hashes the scope, the model name and the whole request. The scope is
// where the model is served, such as its base URL. The request covers every
// generation parameter, the messages and the tools.
func Key(scope, model string, req *delegate.Request) (string, error) {
	b, err := json.Marshal(struct {
		Scope   string            `json:"scope"`
		Model   string            `json:"model"`
		Request *delegate.Request `json:"request"`
	}{scope, model, req})
	if err != nil {
		return "", fmt.Errorf("cache key of %s: %w", model, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Get returns the cached response for key, or ok false.
func (s *DB) Get(ctx context.Context, key string) (resp *delegate.Response, ok bool, err error) {
	var data []byte
	err = s.db.QueryRowContext(ctx, `SELECT data FROM responses WHERE key = ?`, key).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("cache get %s: %w", key, err)
	}
	resp = new(delegate.Response)
	if err := json.Unmarshal(data, resp); err != nil {
		return nil, false, fmt.Errorf("cache get %s: decode: %w", key, err)
	}
	return resp, true, nil
}

// Put stores resp under key, replacing any response already there.
// The same request gives the same answer, so either is right.
func (s *DB) Put(ctx context.Context, key, scope, model string, resp *delegate.Response) error {
	data, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("cache put %s: encode: %w", key, err)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO responses (key, scope, model, data, created) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET data = excluded.data, created = excluded.created`,
			key, scope, model, data, time.Now().Unix())
		if err != nil {
			return fmt.Errorf("cache put %s: %w", key, err)
		}
		return nil
	})
}

// Cacheable reports whether a request has one right answer that may be
// served again: temperature 0 or a seed.
func Cacheable(req *delegate.Request) bool {
	return req.Seed != nil || req.Temperature != nil && *req.Temperature == 0
}

// CachedModel is a delegate.Model that serves Cacheable requests from a cache.
// It stores the responses of those it passes on; errors are never cached.
// Its methods may be called from many goroutines at once.
type CachedModel struct {
	model delegate.Model
	cache *DB
	scope string

	hits, misses, bypassed atomic.Int64
}

// Cached wraps model with cache. scope says where the model is served (its
// base URL, or "local:<checkpoint>"), so that two servers with the same
// model name never share entries. The cache stays owned by the caller, who
// closes it after the last call.
func Cached(model delegate.Model, cache *DB, scope string) *CachedModel {
	return &CachedModel{model: model, cache: cache, scope: scope}
}

// Name returns the wrapped model's name.
func (m *CachedModel) Name() string { return m.model.Name() }

// Chat answers a cacheable request from the cache when it can.
// Otherwise it asks the wrapped model and stores a successful response. A
// response served from the cache carries the usage, latency and retries of
// the call that produced it, so totals of a re-run match the first run.
// Failing to read or write the cache is an error: a benchmark that believes
// it is cached must not silently pay.
func (m *CachedModel) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	if req == nil || !Cacheable(req) {
		m.bypassed.Add(1)
		return m.model.Chat(ctx, req)
	}
	key, err := Key(m.scope, m.model.Name(), req)
	if err != nil {
		return nil, err
	}
	resp, ok, err := m.cache.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if ok {
		m.hits.Add(1)
		return resp, nil
	}
	m.misses.Add(1)
	resp, err = m.model.Chat(ctx, req)
	if err != nil || resp == nil || len(resp.Choices) == 0 {
		return resp, err
	}
	// Stored even when ctx ends now: the answer is complete and paid for.
	if err := m.cache.Put(context.WithoutCancel(ctx), key, m.scope, m.model.Name(), resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// CacheStats counts a CachedModel's calls.
type CacheStats struct {
	Hits     int64 `json:"hits"`     // served from the cache
	Misses   int64 `json:"misses"`   // cacheable, asked of the model
	Bypassed int64 `json:"bypassed"` // not cacheable (sampled without a seed)
}

// Stats returns the counts so far.
func (m *CachedModel) Stats() CacheStats {
	return CacheStats{Hits: m.hits.Load(), Misses: m.misses.Load(), Bypassed: m.bypassed.Load()}
}
