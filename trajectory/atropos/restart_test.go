package atropos_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate/trajectory/atropos"
)

// tagsOf returns the tag (first token) of each group of a batch answer.
func tagsOf(t *testing.T, raw []byte) (int, []int) {
	t.Helper()
	var b atropos.Batch
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	var tags []int
	for _, g := range b.Batch {
		tags = append(tags, g.Tokens[0][0])
	}
	return b.Step, tags
}

func TestRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, atropos.DefaultConfig())
	startRun(t, h.url, 4, 2)
	for tag := range 5 {
		callJSON(t, "POST", h.url+"/scored_data", group(2, tag, `, "env_id": 0`))
	}
	wantFields(t, "odd group", callJSON(t, "POST", h.url+"/scored_data", group(1, 50, `, "env_id": 0`)), map[string]any{"status": "buffered", "buffer_size": 1})
	_, raw := call(t, "GET", h.url+"/batch", nil)
	if step, tags := tagsOf(t, raw); step != 1 || fmt.Sprint(tags) != "[0 1]" {
		t.Fatalf("step %d tags %v, want step 1 [0 1]", step, tags)
	}
	h.stop()

	h = start(t, dir, atropos.DefaultConfig())
	u := h.url
	// Two batches were assembled (Atropos counts both in current_step),
	// one is left to send; group 4 waits in the queue.
	wantFields(t, "status after restart", callJSON(t, "GET", u+"/status", nil), map[string]any{"current_step": 2, "queue_size": 1})
	// The environment's queue, as it paces by it, is what the trainer has
	// not fetched: the two groups of the assembled batch 2 and group 4.
	wantFields(t, "env still registered", callJSON(t, "GET", u+"/status-env", []byte(`{"env_id": 0}`)), map[string]any{"self_queue_size": 3, "queue_size": 3})
	_, raw = call(t, "GET", u+"/batch", nil)
	if step, tags := tagsOf(t, raw); step != 2 || fmt.Sprint(tags) != "[2 3]" {
		t.Errorf("step %d tags %v, want step 2 [2 3]", step, tags)
	}
	_, raw = call(t, "GET", u+"/batch?step=1", nil)
	if step, tags := tagsOf(t, raw); step != 1 || fmt.Sprint(tags) != "[0 1]" {
		t.Errorf("again: step %d tags %v, want step 1 [0 1]", step, tags)
	}
	wantFields(t, "second odd group releases both", callJSON(t, "POST", u+"/scored_data", group(1, 51, `, "env_id": 0`)),
		map[string]any{"status": "buffered", "buffer_size": 0})
	wantFields(t, "resent group is a duplicate", callJSON(t, "POST", u+"/scored_data", group(2, 0, `, "env_id": 0`)), map[string]any{"status": "received"})
	wantFields(t, "info", callJSON(t, "GET", u+"/info", nil), map[string]any{"duplicates_dropped": 1})
	_, raw = call(t, "GET", u+"/batch", nil)
	if step, tags := tagsOf(t, raw); step != 3 || fmt.Sprint(tags) != "[4 50 51]" {
		t.Errorf("step %d tags %v, want step 3 [4 50 51]", step, tags)
	}
}

func TestClients(t *testing.T) {
	h := start(t, t.TempDir(), config(func(c *atropos.Config) { c.Token = "tok" }))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const envs, groupsPerEnv, groupSize, batchSize = 2, 12, 4, 8
	tr := atropos.DefaultTrainerClient()
	tr.URL, tr.Token, tr.Poll = h.url, "tok", 10*time.Millisecond
	if err := tr.Register(ctx, atropos.Registration{BatchSize: batchSize, MaxTokenLen: 64, NumSteps: 10}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var pushed []int
	g, gctx := errgroup.WithContext(ctx)
	for e := range envs {
		g.Go(func() error {
			ec := atropos.DefaultEnvClient()
			ec.URL, ec.Token, ec.Poll, ec.MaxBatchesOffpolicy = h.url, "tok", 10*time.Millisecond, 1
			ec.Env = atropos.RegisterEnv{MaxTokenLength: 64, DesiredName: "env", Weight: 1, GroupSize: groupSize}
			if err := ec.Register(gctx); err != nil {
				return err
			}
			if ec.BatchSize != batchSize || ec.Start.WandbName != fmt.Sprintf("env_%d", ec.ID) {
				return fmt.Errorf("env %d: batch size %d, start %+v", e, ec.BatchSize, ec.Start)
			}
			for i := range groupsPerEnv {
				if _, err := ec.Wait(gctx); err != nil {
					return err
				}
				tag := 100*e + i
				sd := atropos.ScoredData{Scores: make([]float64, groupSize)}
				for s := range groupSize {
					sd.Tokens = append(sd.Tokens, []int{tag, s})
					sd.Masks = append(sd.Masks, []int{-100, s})
				}
				var resp atropos.ScoredResponse
				var err error
				if i%2 == 0 {
					resp, err = ec.Push(gctx, sd)
				} else { // the same, encoded and compressed by the caller
					id := ec.ID
					sd.EnvID = &id
					body, merr := json.Marshal(sd)
					if merr != nil {
						return merr
					}
					var gz bytes.Buffer
					zw := gzip.NewWriter(&gz)
					_, _ = zw.Write(body) // writes to a bytes.Buffer do not fail
					_ = zw.Close()
					resp, err = ec.PushGzip(gctx, gz.Bytes())
				}
				if err != nil {
					return err
				}
				if resp.Status != "received" {
					return fmt.Errorf("push: %+v", resp)
				}
				mu.Lock()
				pushed = append(pushed, tag)
				mu.Unlock()
			}
			return ec.Disconnect(gctx)
		})
	}
	var got []int
	for len(got) < envs*groupsPerEnv {
		b, err := tr.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, sd := range b.Batch {
			got = append(got, sd.Tokens[0][0])
			n += len(sd.Tokens)
		}
		if n != batchSize || b.Step != tr.Last {
			t.Fatalf("step %d: %d sequences, want %d", b.Step, n, batchSize)
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	sort.Ints(got)
	sort.Ints(pushed)
	if fmt.Sprint(got) != fmt.Sprint(pushed) {
		t.Errorf("delivered %v\n   pushed %v", got, pushed)
	}
}

func TestOldStepsPruned(t *testing.T) {
	backends(t, config(func(c *atropos.Config) { c.KeepSteps = 2 }), func(t *testing.T, h *harness) {
		startRun(t, h.url, 2, 2)
		for tag := range 4 {
			callJSON(t, "POST", h.url+"/scored_data", group(2, tag, `, "env_id": 0`))
			callJSON(t, "GET", h.url+"/batch", nil)
		}
		if status, out := call(t, "GET", h.url+"/batch?step=2", nil); status != 410 {
			t.Errorf("step 2 of 4 with 2 kept: %d %s, want 410", status, out)
		}
		_, raw := call(t, "GET", h.url+"/batch?step=3", nil)
		if step, tags := tagsOf(t, raw); step != 3 || fmt.Sprint(tags) != "[2]" {
			t.Errorf("step 3: step %d tags %v", step, tags)
		}
	})
}

// TestRestartPrunesLeftSteps restarts with more steps handed out than
// kept, as after a crash before pruning. Every step beyond the kept one is
// pruned, whatever order the store lists them in.
func TestRestartPrunesLeftSteps(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, config(func(c *atropos.Config) { c.KeepSteps = 20 }))
	startRun(t, h.url, 2, 2)
	const steps = 12
	for tag := range steps {
		callJSON(t, "POST", h.url+"/scored_data", group(2, tag, `, "env_id": 0`))
		callJSON(t, "GET", h.url+"/batch", nil)
	}
	h.stop()

	h = start(t, dir, config(func(c *atropos.Config) { c.KeepSteps = 1 }))
	for step := 1; step < steps; step++ {
		if status, out := call(t, "GET", fmt.Sprintf("%s/batch?step=%d", h.url, step), nil); status != 410 {
			t.Errorf("step %d of %d with 1 kept, after a restart: %d %s, want 410", step, steps, status, out)
		}
	}
	_, raw := call(t, "GET", fmt.Sprintf("%s/batch?step=%d", h.url, steps), nil)
	if step, tags := tagsOf(t, raw); step != steps || fmt.Sprint(tags) != fmt.Sprint([]int{steps - 1}) {
		t.Errorf("step %d: step %d tags %v", steps, step, tags)
	}
}

// TestStatusEnvCountsAssembledBatches checks that /status-env's queue is
// what the trainer has not fetched. A batch assembled ahead of the trainer
// counts until fetched. So an environment pacing by it, as BaseEnv does,
// stops at max_batches_offpolicy batches ahead.
func TestStatusEnvCountsAssembledBatches(t *testing.T) {
	h := start(t, t.TempDir(), atropos.DefaultConfig())
	startRun(t, h.url, 4, 2)
	for tag := range 4 {
		callJSON(t, "POST", h.url+"/scored_data", group(2, tag, `, "env_id": 0`))
	}
	env := []byte(`{"env_id": 0}`)
	wantFields(t, "before any fetch", callJSON(t, "GET", h.url+"/status-env", env), map[string]any{"self_queue_size": 4})
	call(t, "GET", h.url+"/batch", nil) // assembles steps 1 and 2, sends 1
	wantFields(t, "step 2 assembled, not fetched", callJSON(t, "GET", h.url+"/status-env", env), map[string]any{"current_step": 2, "self_queue_size": 2})
	call(t, "GET", h.url+"/batch", nil)
	wantFields(t, "both fetched", callJSON(t, "GET", h.url+"/status-env", env), map[string]any{"self_queue_size": 0})
}

// trainer_step follows the trainer's asks. Asking for step N says it has
// finished the steps before N, a re-fetch after a crash included. A
// restarted server knows nothing until the trainer asks again.
func TestStatusEnvTrainerStep(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, atropos.DefaultConfig())
	startRun(t, h.url, 4, 2) // the trainer has asked for step 1
	env := []byte(`{"env_id": 0}`)
	wantFields(t, "no batch yet", callJSON(t, "GET", h.url+"/status-env", env), map[string]any{"current_step": 0, "trainer_step": 0, "queue_size": 0})
	for tag := range 4 {
		callJSON(t, "POST", h.url+"/scored_data", group(2, tag, `, "env_id": 0`))
	}
	call(t, "GET", h.url+"/batch?step=1", nil) // assembles steps 1 and 2, sends 1
	wantFields(t, "step 1 handed out", callJSON(t, "GET", h.url+"/status-env", env), map[string]any{"current_step": 2, "trainer_step": 0})
	call(t, "GET", h.url+"/batch?step=2", nil)
	wantFields(t, "step 2 asked for", callJSON(t, "GET", h.url+"/status-env", env), map[string]any{"current_step": 2, "trainer_step": 1, "queue_size": 0})
	call(t, "GET", h.url+"/batch?step=3", nil) // nothing yet: the trainer waits
	wantFields(t, "step 3 asked for", callJSON(t, "GET", h.url+"/status-env", env), map[string]any{"current_step": 2, "trainer_step": 2})
	call(t, "GET", h.url+"/batch?step=2", nil) // a resumed trainer never goes back
	wantFields(t, "step 2 fetched again", callJSON(t, "GET", h.url+"/status-env", env), map[string]any{"trainer_step": 2})

	h.stop()
	h = start(t, dir, atropos.DefaultConfig())
	wantFields(t, "restarted", callJSON(t, "GET", h.url+"/status-env", env), map[string]any{"current_step": 2, "trainer_step": 0})
	call(t, "GET", h.url+"/batch?step=2", nil) // a trainer resumed from step 1's checkpoint
	wantFields(t, "after the trainer's re-fetch", callJSON(t, "GET", h.url+"/status-env", env), map[string]any{"trainer_step": 1})
}
