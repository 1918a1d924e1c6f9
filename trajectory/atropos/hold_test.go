package atropos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/delegatelab/delegate/trajectory/atropos"
)

// answer is one request's outcome, from a goroutine.
type answer struct {
	status int
	body   map[string]any
	took   time.Duration
}

// callAsync sends a request from a goroutine; its answer comes on the
// channel.
func callAsync(t *testing.T, method, url string, body []byte) <-chan answer {
	t.Helper()
	out := make(chan answer, 1)
	go func() {
		start := time.Now()
		status, b := call(t, method, url, body)
		a := answer{status: status, took: time.Since(start)}
		if err := json.Unmarshal(b, &a.body); err != nil {
			a.body = map[string]any{"undecodable": string(b)}
		}
		out <- a
	}()
	return out
}

// waitHeld waits until the server holds n requests.
func waitHeld(t *testing.T, h *harness, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.srv.Stats().Held != n {
		if time.Now().After(deadline) {
			t.Fatalf("the server holds %d requests, want %d", h.srv.Stats().Held, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBatchWaitAnswersOnceTheBatchIsReady checks that GET /batch?wait=S is
// held until the push that fills the batch. A held request does not count
// against MaxConcurrent: with one slot, the pushes still go through.
func TestBatchWaitAnswersOnceTheBatchIsReady(t *testing.T) {
	backends(t, config(func(c *atropos.Config) { c.MaxConcurrent = 1 }), func(t *testing.T, h *harness) {
		startRun(t, h.url, 4, 2)
		got := callAsync(t, "GET", h.url+"/batch?step=1&wait=30", nil)
		waitHeld(t, h, 1)
		wantFields(t, "first push", callJSON(t, "POST", h.url+"/scored_data", group(2, 1, `, "env_id": 0`)), map[string]any{"status": "received"})
		// Half a batch wakes the request, which finds no batch and waits on.
		waitHeld(t, h, 1)
		select {
		case a := <-got:
			t.Fatalf("answered with half a batch queued: %d %v", a.status, a.body)
		default:
		}
		wantFields(t, "second push", callJSON(t, "POST", h.url+"/scored_data", group(2, 2, `, "env_id": 0`)), map[string]any{"status": "received"})
		a := <-got
		if batch, _ := a.body["batch"].([]any); a.status != http.StatusOK || len(batch) != 2 || fmt.Sprint(a.body["step"]) != "1" {
			t.Fatalf("held batch: %d %v, want 2 groups at step 1", a.status, a.body)
		}
		waitHeld(t, h, 0)
	})
}

// TestBatchWaitEndsEmptyAfterItsBound checks a wait with no batch. It ends
// with {"batch": null}, as an unheld ask with nothing ready, and not
// before the wait is over.
func TestBatchWaitEndsEmptyAfterItsBound(t *testing.T) {
	backends(t, atropos.DefaultConfig(), func(t *testing.T, h *harness) {
		startRun(t, h.url, 4, 2)
		a := <-callAsync(t, "GET", h.url+"/batch?wait=0.2", nil)
		if a.status != http.StatusOK || a.body["batch"] != nil || len(a.body) != 1 {
			t.Fatalf("after the wait: %d %v, want {\"batch\": null}", a.status, a.body)
		}
		if a.took < 200*time.Millisecond {
			t.Errorf("answered after %v, before its wait of 200ms", a.took)
		}
		if n := h.srv.Stats().Held; n != 0 {
			t.Errorf("%d requests still held", n)
		}
	})
}

// TestStatusEnvAfterStep checks GET /status-env?after_step=N&wait=S. It is
// held until the trainer asks for the batch after step N+1's, having finished
// N+1, then says so; with the trainer past N already it answers at once; with
// nothing new it answers after S with the status then.
func TestStatusEnvAfterStep(t *testing.T) {
	h := startMemory(t, atropos.DefaultConfig())
	startRun(t, h.url, 2, 2)
	env := []byte(`{"env_id": 0}`)
	got := callAsync(t, "GET", h.url+"/status-env?after_step=0&wait=30", env)
	waitHeld(t, h, 1)
	callJSON(t, "POST", h.url+"/scored_data", group(2, 1, `, "env_id": 0`))
	if b, _ := callJSON(t, "GET", h.url+"/batch?step=1", nil)["batch"].([]any); len(b) != 1 {
		t.Fatal("no batch of step 1")
	}
	// Step 1 handed out: the trainer has not finished it yet.
	waitHeld(t, h, 1)
	callJSON(t, "GET", h.url+"/batch?step=2", nil) // finished step 1
	a := <-got
	wantFields(t, "held status-env", a.body, map[string]any{"trainer_step": 1, "current_step": 1, "queue_size": 0})

	wantFields(t, "past the step already", callJSON(t, "GET", h.url+"/status-env?after_step=0&wait=30", env), map[string]any{"trainer_step": 1})
	a = <-callAsync(t, "GET", h.url+"/status-env?after_step=1&wait=0.2", env)
	wantFields(t, "after the wait", a.body, map[string]any{"trainer_step": 1, "current_step": 1})
	if a.took < 200*time.Millisecond {
		t.Errorf("answered after %v, before its wait of 200ms", a.took)
	}
}

// TestHeldRequestsBounded: past MaxHeld a request that asks to wait is
// answered at once, as without a wait.
func TestHeldRequestsBounded(t *testing.T) {
	h := startMemory(t, config(func(c *atropos.Config) { c.MaxHeld = 1 }))
	startRun(t, h.url, 4, 2)
	first := callAsync(t, "GET", h.url+"/batch?wait=30", nil)
	waitHeld(t, h, 1)
	a := <-callAsync(t, "GET", h.url+"/status-env?after_step=5&wait=30", []byte(`{"env_id": 0}`))
	wantFields(t, "status-env past the bound", a.body, map[string]any{"trainer_step": 0})
	callJSON(t, "POST", h.url+"/scored_data", group(2, 1, `, "env_id": 0`))
	callJSON(t, "POST", h.url+"/scored_data", group(2, 2, `, "env_id": 0`))
	if b, _ := (<-first).body["batch"].([]any); len(b) != 2 {
		t.Fatalf("held batch has %d groups, want 2", len(b))
	}
}

func TestWaitParameterChecked(t *testing.T) {
	h := startMemory(t, config(func(c *atropos.Config) { c.MaxWait = 5 * time.Second }))
	startRun(t, h.url, 4, 2)
	for _, q := range []string{"/batch?wait=x", "/batch?wait=-1", "/batch?wait=6", "/batch?wait=NaN",
		"/status-env?wait=6", "/status-env?after_step=x&wait=1"} {
		if status, out := call(t, "GET", h.url+q, []byte(`{"env_id": 0}`)); status != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s, want 400", q, status, out)
		}
	}
	if err := config(func(c *atropos.Config) { c.MaxWait = 10 * time.Minute }).Validate(); err == nil {
		t.Error("a max wait past the write timeout validated")
	}
}

// TestTrainerClientWaits checks that a TrainerClient with Wait gets each
// batch from a held request. An environment pacing itself by StatusAfter
// pushes them.
func TestTrainerClientWaits(t *testing.T) {
	h := startMemory(t, atropos.DefaultConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := atropos.DefaultTrainerClient()
	tr.URL, tr.Wait, tr.Poll = h.url, 10*time.Second, time.Hour
	if err := tr.Register(ctx, atropos.Registration{BatchSize: 2, MaxTokenLen: 64, NumSteps: 3}); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 1)
	go func() {
		env := atropos.DefaultEnvClient()
		env.URL, env.Poll = h.url, time.Millisecond
		env.Env = atropos.RegisterEnv{MaxTokenLength: 64, DesiredName: "e", Weight: 1, GroupSize: 2}
		if err := env.Register(ctx); err != nil {
			errs <- err
			return
		}
		for step := 0; step < 3; step++ {
			// Wait until the trainer has finished the step before.
			for {
				st, err := env.StatusAfter(ctx, step-1, 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				if st.TrainerStep >= step {
					break
				}
			}
			var g atropos.ScoredData
			if err := json.Unmarshal(group(2, step, ""), &g); err != nil {
				errs <- err
				return
			}
			if _, err := env.Push(ctx, g); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for want := 1; want <= 3; want++ {
		b, err := tr.Next(ctx) // Poll is an hour: only held requests get here in time
		if err != nil {
			t.Fatal(err)
		}
		if b.Step != want || len(b.Batch) != 1 || b.Batch[0].Tokens[0][0] != want-1 {
			t.Fatalf("batch of step %d with %d groups, want step %d with the group pushed for it", b.Step, len(b.Batch), want)
		}
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// TestHeldRequestEndsOnShutdown checks that shutdown answers a held
// request, as at the end of its wait. The request must not hold the
// shutdown for its wait.
func TestHeldRequestEndsOnShutdown(t *testing.T) {
	h := startMemory(t, atropos.DefaultConfig())
	startRun(t, h.url, 4, 2)
	got := callAsync(t, "GET", h.url+"/batch?wait=50", nil)
	waitHeld(t, h, 1)
	h.stop() // fails the test past its 10 s
	if a := <-got; a.status != http.StatusOK || a.body["batch"] != nil || len(a.body) != 1 {
		t.Errorf("held batch at shutdown: %d %v, want {\"batch\": null}", a.status, a.body)
	}
}
