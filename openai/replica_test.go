package openai

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
)

// counting serves okBody (after delay) or status, counting its requests.
type counting struct {
	hits   atomic.Int64
	status int
	delay  time.Duration
}

func (c *counting) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	c.hits.Add(1)
	time.Sleep(c.delay)
	w.Header().Set("Content-Type", "application/json")
	if c.status != 0 {
		w.WriteHeader(c.status)
		w.Write([]byte(`{"error":{"message":"down","type":"server_error"}}`))
		return
	}
	w.Write([]byte(okBody))
}

func replicaClient(t *testing.T, urls ...string) *Client {
	t.Helper()
	c, err := New(testConfig(urls[0]+"/v1", func(c *Config) { c.Replicas, c.MaxRetries = suffix(urls[1:], "/v1"), 3 }),
		WithSleep(func(context.Context, time.Duration) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func suffix(xs []string, s string) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x+s)
	}
	return out
}

// TestReplicaFailingSetAside checks that a replica answering 500 is tried once and set aside.
// The healthy one then serves every request, and the response names it.
func TestReplicaFailingSetAside(t *testing.T) {
	bad, good := &counting{status: http.StatusInternalServerError}, &counting{}
	bs, gs := httptest.NewServer(bad), httptest.NewServer(good)
	t.Cleanup(bs.Close)
	t.Cleanup(gs.Close)
	c := replicaClient(t, bs.URL, gs.URL)
	for i := range 20 {
		resp, err := c.Chat(context.Background(), userReq("hi"))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if resp.Endpoint != gs.URL+"/v1" {
			t.Fatalf("request %d answered by %q, want %q", i, resp.Endpoint, gs.URL+"/v1")
		}
	}
	if n := bad.hits.Load(); n != 1 {
		t.Errorf("the failing replica got %d requests, want 1 (then set aside)", n)
	}
	if n := good.hits.Load(); n != 20 {
		t.Errorf("the healthy replica got %d requests, want 20", n)
	}
}

// TestReplicaLeastBusy: concurrent requests spread over equally fast
// replicas, each getting some.
func TestReplicaLeastBusy(t *testing.T) {
	a, b := &counting{delay: 30 * time.Millisecond}, &counting{delay: 30 * time.Millisecond}
	as, bs := httptest.NewServer(a), httptest.NewServer(b)
	t.Cleanup(as.Close)
	t.Cleanup(bs.Close)
	c := replicaClient(t, as.URL, bs.URL)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Chat(context.Background(), userReq("hi")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if a.hits.Load() < 4 || b.hits.Load() < 4 {
		t.Errorf("requests split %d / %d over two idle replicas, want both busy", a.hits.Load(), b.hits.Load())
	}
}

// TestReplicaComesBack: a replica set aside is picked again once its
// penalty has passed, and every further failure doubles the penalty.
func TestReplicaComesBack(t *testing.T) {
	c, err := New(testConfig("http://127.0.0.1:1/v1", func(c *Config) { c.Replicas = []string{"http://127.0.0.1:2/v1"} }))
	if err != nil {
		t.Fatal(err)
	}
	first, second := c.eps[0], c.eps[1]
	now := time.Unix(1000, 0)
	down := &delegate.APIError{Status: http.StatusBadGateway}
	first.observe(down, 30*time.Second, now)
	for range 4 {
		if got := c.pick(now.Add(500 * time.Millisecond)); got != second {
			t.Fatalf("picked the replica set aside")
		}
	}
	if got := c.pick(now.Add(1100 * time.Millisecond)); got != first && got != second {
		t.Fatalf("picked nothing")
	}
	second.observe(down, 30*time.Second, now)
	if got := c.pick(now.Add(10 * time.Millisecond)); got != first {
		t.Errorf("both set aside: picked %q, want the one back first", got.url)
	}
	first.observe(down, 30*time.Second, now.Add(2*time.Second))
	if want := now.Add(2*time.Second + 2*time.Second); !first.downUntil.Equal(want) {
		t.Errorf("second failure sets aside until %v, want %v (doubled)", first.downUntil, want)
	}
	first.observe(nil, 30*time.Second, now.Add(5*time.Second))
	if !first.downUntil.IsZero() || first.penalty != 0 {
		t.Errorf("a success did not clear the penalty")
	}
	if err := testConfig("http://a/v1", func(c *Config) { c.Replicas = []string{"ftp://b"} }).Validate(); err == nil {
		t.Error("a replica with a bad scheme was accepted")
	}
}
