package atropos_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate/trajectory/atropos"
)

// TestClusterNodeLoss runs the API on a three-node JetStream cluster of
// embedded servers, with 3 replicas of stream and bucket. It stops one
// node mid-run. Pushes and pulls must go on with nothing lost.
func TestClusterNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test in -short mode")
	}
	dir := t.TempDir()
	const nodes = 3
	var clientURLs, routes, clusterAddrs, clientAddrs []string
	for range nodes {
		ca, ra := freeAddr(t), freeAddr(t)
		clientAddrs, clusterAddrs = append(clientAddrs, ca), append(clusterAddrs, ra)
		clientURLs = append(clientURLs, "nats://"+ca)
		routes = append(routes, "nats-route://"+ra)
	}
	var embs []*atropos.Embedded
	for i := range nodes {
		ec := embedded(filepath.Join(dir, fmt.Sprint("n", i)))
		ec.Name, ec.Listen = fmt.Sprint("n", i), clientAddrs[i]
		ec.ClusterName, ec.ClusterListen, ec.Routes = "delegate-test", clusterAddrs[i], routes
		e, err := atropos.StartEmbedded(ec)
		if err != nil {
			t.Fatal(err)
		}
		embs = append(embs, e)
	}
	stopped := make([]bool, nodes)
	defer func() {
		for i, e := range embs {
			if !stopped[i] {
				e.Shutdown()
			}
		}
	}()
	nc, err := nats.Connect(strings.Join(clientURLs, ","), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var srv *atropos.Server
	for { // the cluster elects its JetStream leader first
		nctx, ncancel := context.WithTimeout(ctx, 5*time.Second)
		srv, err = atropos.New(nctx, nc, config(func(c *atropos.Config) { c.Replicas = 3 }), nil)
		ncancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("api on the cluster: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer(srv.Handler())
	go func() { _ = hs.Serve(ln) }() // ErrServerClosed after Shutdown
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = hs.Shutdown(sctx) // the test's verdict is in already
	}()
	url := "http://" + ln.Addr().String()

	const envs, groupsPerEnv, batchSize = 2, 30, 4
	client := atropos.DefaultClient()
	client.URL, client.Retries = url, 40
	tr := atropos.DefaultTrainerClient()
	tr.Client, tr.Poll = client, 5*time.Millisecond
	if err := tr.Register(ctx, atropos.Registration{BatchSize: batchSize, MaxTokenLen: 64, NumSteps: 100}); err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	g, gctx := errgroup.WithContext(ctx)
	for e := range envs {
		g.Go(func() error {
			ec := atropos.DefaultEnvClient()
			ec.Client, ec.Poll = client, 5*time.Millisecond
			ec.Env = atropos.RegisterEnv{MaxTokenLength: 64, DesiredName: "c", Weight: 1, GroupSize: 2}
			if err := ec.Register(gctx); err != nil {
				return err
			}
			for i := range groupsPerEnv {
				tag := 1000*(e+1) + i
				if _, err := ec.Push(gctx, atropos.ScoredData{Tokens: [][]int{{tag}, {tag}}, Masks: [][]int{{tag}, {tag}}, Scores: []float64{1, 0}}); err != nil {
					return err
				}
				l.ack(tag)
				time.Sleep(2 * time.Millisecond)
			}
			return nil
		})
	}
	g.Go(func() error { return l.drain(gctx, &tr, envs*groupsPerEnv) })
	l.waitAcked(envs * groupsPerEnv / 3)
	embs[0].Shutdown() // the node the API connected to first
	stopped[0] = true
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	l.check(t, envs*groupsPerEnv)
}
