package atropos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate/trajectory/atropos"
)

const childAddrEnv = "DELEGATE_API_TEST_ADDR"

// runChild is the API server as a child process: embedded NATS on dir,
// HTTP on $DELEGATE_API_TEST_ADDR, until SIGTERM (or SIGKILL).
func runChild(dir string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	emb, err := atropos.StartEmbedded(embedded(dir))
	if err != nil {
		return fail(err)
	}
	defer emb.Shutdown()
	nc, err := emb.Connect()
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	pc, err := emb.Connect()
	if err != nil {
		return fail(err)
	}
	defer pc.Close()
	srv, err := atropos.New(context.Background(), nc, config(func(c *atropos.Config) { c.KeepSteps = 4 }), nil, atropos.WithPublishConn(pc))
	if err != nil {
		return fail(err)
	}
	var ln net.Listener
	for range 100 { // the killed process's port may linger a moment
		if ln, err = net.Listen("tcp", os.Getenv(childAddrEnv)); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return fail(err)
	}
	hs := srv.HTTPServer(srv.Handler())
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		<-sig
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx) // best effort: the parent only waits for the exit
	}()
	if err := hs.Serve(ln); err != http.ErrServerClosed {
		return fail(err)
	}
	return 0
}

// child is a running API server process.
type child struct {
	cmd *exec.Cmd
	url string
}

func startChild(t *testing.T, dir, addr string) *child {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(dir, "child.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+filepath.Join(dir, "data"), childAddrEnv+"="+addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, url: "http://" + addr}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(c.url + "/status")
		if err == nil {
			resp.Body.Close()
			return c
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			log, _ := os.ReadFile(filepath.Join(dir, "child.log"))
			t.Fatalf("child not serving after 30s: %v\n%s", err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait() // "signal: killed" is the expected outcome
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestCrashRecovery runs the API as a child process while environments
// push and a trainer pulls. It SIGKILLs the API at random moments and
// restarts it on the same data directory. Every group an environment saw
// acknowledged must be delivered exactly once, and nothing twice.
func TestCrashRecovery(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	c := startChild(t, dir, addr)
	defer func() {
		if c != nil {
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			_ = c.cmd.Wait()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const envs, groupsPerEnv, groupSize, batchSize = 3, 40, 2, 4
	client := func() atropos.Client {
		cl := atropos.DefaultClient()
		cl.URL, cl.Retries, cl.HTTP = c.url, 40, &http.Client{Timeout: 10 * time.Second}
		return cl
	}
	tr := atropos.DefaultTrainerClient()
	tr.Client, tr.Poll = client(), 5*time.Millisecond
	if err := tr.Register(ctx, atropos.Registration{BatchSize: batchSize, MaxTokenLen: 64, NumSteps: 1000}); err != nil {
		t.Fatal(err)
	}

	l := newLedger()
	g, gctx := errgroup.WithContext(ctx)
	for e := range envs {
		g.Go(func() error {
			ec := atropos.DefaultEnvClient()
			ec.Client, ec.Poll = client(), 5*time.Millisecond
			ec.Env = atropos.RegisterEnv{MaxTokenLength: 64, DesiredName: "crash", Weight: 1, GroupSize: groupSize}
			if err := ec.Register(gctx); err != nil {
				return err
			}
			for i := range groupsPerEnv {
				tag := 1000*(e+1) + i
				sd := atropos.ScoredData{Tokens: [][]int{{tag, 1}, {tag, 2}}, Masks: [][]int{{-100, 1}, {-100, 2}}, Scores: []float64{1, 0}}
				if _, err := ec.Push(gctx, sd); err != nil {
					return fmt.Errorf("env %d group %d: %w", e, i, err)
				}
				l.ack(tag)
			}
			return nil
		})
	}
	trainerDone := make(chan error, 1)
	go func() { trainerDone <- l.drain(ctx, &tr, envs*groupsPerEnv) }()

	var atKill []int // groups acknowledged when each kill came
	for k := range 3 {
		// Kill at a random point of each third of the pushes.
		third := envs * groupsPerEnv / 3
		at := k*third + rand.IntN(third)
		atKill = append(atKill, l.waitAcked(at))
		c.kill(t)
		c = startChild(t, dir, addr)
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := <-trainerDone; err != nil {
		t.Fatal(err)
	}
	l.check(t, envs*groupsPerEnv)
	if atKill[0] >= envs*groupsPerEnv {
		t.Errorf("the first kill came after all %d pushes (%v): the test proved nothing", envs*groupsPerEnv, atKill)
	}
	t.Logf("kills after %v acknowledged groups; %d groups, trainer at step %d", atKill, envs*groupsPerEnv, tr.Last)
}
