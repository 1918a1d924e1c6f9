package api_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/delegatelab/delegate/api"
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
	srv  *api.Server
	stop func()
}

// start runs a server on dir until the test ends (or stop is called).
func start(t *testing.T, dir string, cfg api.Config) *harness {
	t.Helper()
	emb, err := api.StartEmbedded(api.EmbeddedConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := emb.Connect()
	if err != nil {
		emb.Shutdown()
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := api.New(ctx, nc, cfg, nil)
	if err != nil {
		nc.Close()
		emb.Shutdown()
		t.Fatal(err)
	}
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
		nc.Close()
		emb.Shutdown()
		http.DefaultClient.CloseIdleConnections()
	}
	t.Cleanup(h.stop)
	return h
}
