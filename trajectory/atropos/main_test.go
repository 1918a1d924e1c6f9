package atropos_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/delegatelab/delegate/trajectory/atropos"
)

// childEnv switches the test binary into a child API server process
// (see TestCrashRecovery).
const childEnv = "DELEGATE_API_TEST_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(runChild(dir))
	}
	goleak.VerifyTestMain(m)
}

// harness is one API server on loopback over an embedded NATS server.
type harness struct {
	url  string
	srv  *atropos.Server
	stop func()
}

// config is DefaultConfig changed by set.
func config(set func(c *atropos.Config)) atropos.Config {
	c := atropos.DefaultConfig()
	set(&c)
	return c
}

// embedded is DefaultEmbeddedConfig storing in dir.
func embedded(dir string) atropos.EmbeddedConfig {
	c := atropos.DefaultEmbeddedConfig()
	c.Dir = dir
	return c
}

// startMemory runs the in-memory server (the perf floor) until the test
// ends.
func startMemory(t *testing.T, cfg atropos.Config) *harness {
	t.Helper()
	srv, err := atropos.NewInMemory(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return serveHTTP(t, srv, func() {})
}

// backends runs fn against the durable server and the in-memory one: both
// must answer alike.
func backends(t *testing.T, cfg atropos.Config, fn func(t *testing.T, h *harness)) {
	t.Run("jetstream", func(t *testing.T) { fn(t, start(t, t.TempDir(), cfg)) })
	t.Run("memory", func(t *testing.T) { fn(t, startMemory(t, cfg)) })
}

// start runs a server on dir until the test ends (or stop is called).
func start(t *testing.T, dir string, cfg atropos.Config) *harness {
	t.Helper()
	emb, err := atropos.StartEmbedded(embedded(dir))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := emb.Connect()
	if err != nil {
		emb.Shutdown()
		t.Fatal(err)
	}
	pc, err := emb.Connect() // pushes publish on a connection of their own, as delegate api runs
	if err != nil {
		nc.Close()
		emb.Shutdown()
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := atropos.New(ctx, nc, cfg, nil, atropos.WithPublishConn(pc))
	if err != nil {
		pc.Close()
		nc.Close()
		emb.Shutdown()
		t.Fatal(err)
	}
	return serveHTTP(t, srv, func() {
		pc.Close()
		nc.Close()
		emb.Shutdown()
	})
}

// serveHTTP serves srv on loopback until the test ends; closeStore runs
// after the HTTP server has stopped.
func serveHTTP(t *testing.T, srv *atropos.Server, closeStore func()) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer(srv.Handler())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln) // ErrServerClosed after Shutdown
	}()
	stopped := false
	h := &harness{url: "http://" + ln.Addr().String(), srv: srv}
	h.stop = func() {
		if stopped {
			return
		}
		stopped = true
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			t.Errorf("http shutdown: %v", err)
		}
		<-done
		closeStore()
		http.DefaultClient.CloseIdleConnections()
	}
	t.Cleanup(h.stop)
	return h
}

// ledger records which groups the environments had acknowledged, and how
// often the trainer was handed each. It serves the tests of exactly-once
// delivery across failures. A group is tagged by its first token.
type ledger struct {
	mu        sync.Mutex
	acked     map[int]bool
	delivered map[int]int
}

func newLedger() *ledger { return &ledger{acked: map[int]bool{}, delivered: map[int]int{}} }

func (l *ledger) ack(tag int) {
	l.mu.Lock()
	l.acked[tag] = true
	l.mu.Unlock()
}

// waitAcked waits until at least n groups are acknowledged and returns
// how many are.
func (l *ledger) waitAcked(n int) int {
	for {
		l.mu.Lock()
		got := len(l.acked)
		l.mu.Unlock()
		if got >= n {
			return got
		}
		time.Sleep(time.Millisecond)
	}
}

// drain takes batches from tr until it has been handed want groups.
func (l *ledger) drain(ctx context.Context, tr *atropos.TrainerClient, want int) error {
	for total := 0; total < want; {
		b, err := tr.Next(ctx)
		if err != nil {
			return err
		}
		l.mu.Lock()
		for _, sd := range b.Batch {
			l.delivered[sd.Tokens[0][0]]++
			total++
		}
		l.mu.Unlock()
	}
	return nil
}

// check fails t unless want groups were acknowledged and each of them,
// and nothing else, was delivered exactly once.
func (l *ledger) check(t *testing.T, want int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.acked) != want {
		t.Fatalf("%d groups acknowledged, want %d", len(l.acked), want)
	}
	for tag := range l.acked {
		if n := l.delivered[tag]; n != 1 {
			t.Errorf("group %d delivered %d times, want once", tag, n)
		}
	}
	for tag, n := range l.delivered {
		if !l.acked[tag] {
			t.Errorf("group %d delivered %d times but never pushed", tag, n)
		}
	}
}
