package atropos

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// lostAnswer is a store whose first publish of each group stores it but
// fails. So does a publish whose acknowledgement never came back, as when
// a JetStream cluster loses a node. The push is retried, and the store
// then reports the group a duplicate.
type lostAnswer struct {
	store
	mu   sync.Mutex
	lost map[string]bool
}

func (l *lostAnswer) add(ctx context.Context, g *group, buffered bool) (uint64, bool, error) {
	seq, dup, err := l.store.add(ctx, g, buffered)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && !dup && !l.lost[g.id] {
		l.lost[g.id] = true
		return 0, false, errors.New("publish: context deadline exceeded")
	}
	return seq, dup, err
}

// TestPushWhoseAnswerWasLost pushes a group again after the answer to
// its first push was lost. It must be queued once and handed to the
// trainer. The retry's duplicate answer once left it stored but never
// queued, and a trainer waiting for it stalled. A group pushed again after
// it was queued is still kept once.
func TestPushWhoseAnswerWasLost(t *testing.T) {
	stores := map[string]func(ctx context.Context, t *testing.T) store{
		"memory": func(context.Context, *testing.T) store { return newMemStore() },
		"jetstream": func(ctx context.Context, t *testing.T) store {
			emb, err := StartEmbedded(embeddedAt(filepath.Join(t.TempDir(), "nats")))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(emb.Shutdown)
			nc, err := emb.Connect()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			cfg := DefaultConfig()
			st, err := openJetStream(ctx, nc, nc, cfg.Prefix, cfg.Replicas, cfg.Dedup)
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cfg := DefaultConfig()
			srv, err := newServer(ctx, &lostAnswer{store: open(ctx, t), lost: map[string]bool{}}, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			defer hs.Close()
			tr := DefaultTrainerClient()
			tr.URL, tr.Poll = hs.URL, 10*time.Millisecond
			if err := tr.Register(ctx, Registration{BatchSize: 4, MaxTokenLen: 16, NumSteps: 2}); err != nil {
				t.Fatal(err)
			}
			// The trainer asks for its first batch (and so starts) while
			// the environment registers and pushes.
			type answer struct {
				b   Batch
				err error
			}
			got := make(chan answer, 1)
			go func() {
				bctx, bcancel := context.WithTimeout(ctx, 20*time.Second)
				defer bcancel()
				b, err := tr.Next(bctx)
				got <- answer{b, err}
			}()
			env := DefaultEnvClient()
			env.URL = hs.URL
			env.Env = RegisterEnv{MaxTokenLength: 16, DesiredName: "env", Weight: 1, GroupSize: 2}
			if err := env.Register(ctx); err != nil {
				t.Fatal(err)
			}
			for tag := 1; tag <= 2; tag++ {
				sd := ScoredData{Tokens: [][]int{{tag, 1}, {tag, 2}}, Masks: [][]int{{-100, 1}, {-100, 2}}, Scores: []float64{1, 0},
					GroupOverrides: map[string]any{"group_id": string(rune('a' + tag))}}
				for range 2 { // the second push of a queued group changes nothing
					if resp, err := env.Push(ctx, sd); err != nil || resp.Status != "received" {
						t.Fatalf("push group %d: %+v, %v", tag, resp, err)
					}
				}
			}
			a := <-got
			b, err := a.b, a.err
			if err != nil {
				t.Fatalf("the batch of the two groups: %v (stats %+v)", err, srv.Stats())
			}
			if len(b.Batch) != 2 || b.Batch[0].Tokens[0][0] != 1 || b.Batch[1].Tokens[0][0] != 2 {
				t.Errorf("batch %+v, want groups 1 and 2 once each", b.Batch)
			}
		})
	}
}
