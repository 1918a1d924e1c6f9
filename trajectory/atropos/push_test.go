package atropos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/rollout"
)

// An environment under --push-sync starts its items only while the trainer
// waits for a batch. Every batch handed out must be trained on by then.
// The policy server serves the trainer's newest step, which samples each
// item it lets go.
func TestPushSyncWaitsForTheTrainer(t *testing.T) {
	url := startPushAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	trainer := DefaultTrainerClient()
	trainer.URL, trainer.Poll = url, 20*time.Millisecond
	// Two groups of G=2 sequences per batch.
	if err := trainer.Register(ctx, Registration{BatchSize: 4, MaxTokenLen: 512, NumSteps: 10}); err != nil {
		t.Fatal(err)
	}
	steps := make(chan int, 4)
	next := func() { // the trainer asks for its next batch, as after a step
		go func() {
			if b, err := trainer.Next(ctx); err == nil {
				steps <- b.Step
			}
		}()
	}
	next()
	sink, err := NewPusher(ctx, io.Discard, PushConfig{URL: url, Name: "e", MaxTokenLen: 512, GroupSize: 2, Sync: 2})
	if err != nil {
		t.Fatal(err)
	}
	sink.poll = 10 * time.Millisecond
	// The policy server, as far as the sink reads it: GET /health.
	var served atomic.Int64
	policy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"status":"ok","models":["delegator","solver"],"policy_versions":{"delegator":%d}}`, served.Load())
	}))
	defer policy.Close()
	sink.syncPolicy = policy.URL
	waits := make(chan int, 4)
	wait := func() {
		go func() {
			if v, err := sink.Wait(ctx); err == nil {
				waits <- v
			}
		}()
	}
	expect := func(what string, want int) {
		t.Helper()
		select {
		case v := <-waits:
			if v != want {
				t.Errorf("%s: an item started on step %d, want %d", what, v, want)
			}
		case <-ctx.Done():
			t.Fatalf("%s: no item started", what)
		}
	}
	held := func(what string) {
		t.Helper()
		select {
		case v := <-waits:
			t.Errorf("%s: an item started on step %d, want it held", what, v)
		case <-time.After(300 * time.Millisecond):
		}
	}
	wait()
	wait()
	expect("the trainer waits for step 1", 0)
	expect("the second of the share", 0)
	wait()
	held("the share of step 0 started")
	push(t, ctx, sink, 0)
	// An environment restarted in the middle of the step (its count
	// starts again) fills the batch beside the group queued.
	restarted, err := NewPusher(ctx, io.Discard, PushConfig{URL: url, Name: "e", MaxTokenLen: 512, GroupSize: 2, Sync: 2})
	if err != nil {
		t.Fatal(err)
	}
	restarted.syncPolicy, restarted.poll = policy.URL, 10*time.Millisecond
	if v, err := restarted.Wait(ctx); err != nil || v != 0 {
		t.Errorf("a restarted environment, one group of two queued: Wait = %d, %v; want step 0", v, err)
	}
	held("the first environment's share of step 0 started, one group queued")
	push(t, ctx, sink, 1)
	if got := <-steps; got != 1 {
		t.Fatalf("the trainer got step %d, want 1", got)
	}
	held("the trainer trains on step 1")
	next()
	held("the trainer finished step 1, the policy server serves step 0")
	served.Store(1)
	expect("the policy server serves step 1", 1)
	wait()
	expect("the second of the share of step 1", 1)

	// One group of step 1 dropped: the batch stays short, and after the
	// stall one more item starts.
	push(t, ctx, sink, 2)
	sink.mu.Lock()
	sink.stall = 400 * time.Millisecond
	longest := sink.syncLongest
	sink.mu.Unlock()
	if longest <= 0 {
		t.Errorf("no step's length measured")
	}
	wait()
	expect("the batch of step 2 short of a group", 1)
}

// push sends one group of two sequences through the sink's client.
func push(t *testing.T, ctx context.Context, s *Pusher, tag int) {
	t.Helper()
	sd := ScoredData{
		Tokens: [][]int{{1, tag}, {2, tag}}, Masks: [][]int{{-100, tag}, {-100, tag}}, Scores: []float64{0, 1},
		InferenceLogprobs: [][]float64{{1, -0.5}, {1, -0.5}},
		GroupOverrides:    GroupOverride{GroupID: fmt.Sprint("g", tag), GroupSize: 2}.Map(),
	}
	if _, err := s.env.Push(ctx, sd); err != nil {
		t.Fatal(err)
	}
}

// TestPushRedirectDropsToken registers with an API that redirects to the
// same host at another port: the token must not follow.
func TestPushRedirectDropsToken(t *testing.T) {
	got := make(chan string, 4)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		switch r.URL.Path {
		case "/register-env":
			io.WriteString(w, `{"status":"success","env_id":0}`)
		default:
			io.WriteString(w, `{"batch_size":4}`)
		}
	}))
	defer other.Close()
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer first.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := NewPusher(ctx, io.Discard, PushConfig{URL: first.URL, Token: "secret-token", Name: "e", MaxTokenLen: 512, GroupSize: 2, OffPolicy: 3}); err != nil {
		t.Fatalf("NewPusher: %v", err)
	}
	close(got)
	n := 0
	for auth := range got {
		n++
		if auth != "" {
			t.Errorf("the other port got Authorization %q; want none", auth)
		}
	}
	if n != 2 {
		t.Errorf("the other port got %d calls; want register-env and info", n)
	}
}

// A group the API refuses for what it holds is reported and not sent
// again. Here it holds a token id beyond the trainer's vocabulary. The
// environment goes on with its next group instead of failing at every
// restart.
func TestPushSkipsRefusedGroups(t *testing.T) {
	url := startPushAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	trainer := DefaultTrainerClient()
	trainer.URL, trainer.Poll = url, 20*time.Millisecond
	if err := trainer.Register(ctx, Registration{BatchSize: 4, MaxTokenLen: 512, NumSteps: 10, VocabSize: 272}); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = trainer.Next(ctx) }() // starts the run; the answer is not needed
	var out lockedBuffer
	sink, err := NewPusher(ctx, &out, PushConfig{URL: url, Name: "e", MaxTokenLen: 512, GroupSize: 2, OffPolicy: 3})
	if err != nil {
		t.Fatal(err)
	}
	record := func(id string, tok int) *rollout.GroupRecord {
		return &rollout.GroupRecord{
			ID: id, Run: "run", Tokens: [][]int{{1, tok, 3}, {1, 2, 4}}, Masks: [][]int{{-100, tok, 3}, {-100, 2, 4}},
			InferenceLogprobs: [][]float64{{1, -1, -1}, {1, -1, -1}}, Messages: make([][]delegate.Turn, 2),
			Scores: []float64{1, 0}, Advantages: []float64{1, -1}, SequenceRollout: []int{0, 1},
			Overrides: make([]rollout.Override, 2), GroupOverrides: rollout.GroupOverride{GroupSize: 2},
		}
	}
	if err := sink.Send(ctx, record("bad#0", 99999)); err != nil {
		t.Fatalf("send of a group the API refuses: %v, want it skipped", err)
	}
	if err := sink.Send(ctx, record("good#0", 5)); err != nil {
		t.Fatalf("send of the next group: %v", err)
	}
	st, err := trainer.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.QueueSize != 1 {
		t.Errorf("queue of %d groups, want the good one", st.QueueSize)
	}
	if err := sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"refused group bad#0 (422", "vocab_size of 272", "1 groups refused"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q: want %q", out.String(), want)
		}
	}
}

// startPushAPI serves an in-memory API on loopback until the test ends.
func startPushAPI(t *testing.T) string {
	t.Helper()
	srv, err := NewInMemory(context.Background(), DefaultConfig(), nil)
	if err != nil {
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
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := hs.Shutdown(ctx); err != nil {
			t.Errorf("http shutdown: %v", err)
		}
		<-done
	})
	return "http://" + ln.Addr().String()
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPushOffPolicy checks that a pusher paced by the queue needs at
// least one batch off-policy; it fails before any request.
func TestPushOffPolicy(t *testing.T) {
	for _, tt := range []struct {
		offPolicy int
		want      string
	}{
		{0, `push http://127.0.0.1:1: register: register env "e": atropos env client: max_batches_offpolicy 0: want at least 1`},
		{-1, `push http://127.0.0.1:1: register: register env "e": atropos env client: max_batches_offpolicy -1: want at least 1`},
	} {
		t.Run(fmt.Sprint(tt.offPolicy), func(t *testing.T) {
			_, err := NewPusher(context.Background(), io.Discard, PushConfig{URL: "http://127.0.0.1:1", Name: "e", MaxTokenLen: 512, GroupSize: 2, OffPolicy: tt.offPolicy})
			if err == nil || err.Error() != tt.want {
				t.Errorf("got error %v, want %q", err, tt.want)
			}
		})
	}
}
