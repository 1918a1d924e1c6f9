package atropos_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/internal/edge/edgetest"
	"github.com/delegatelab/delegate/trajectory/atropos"
)

// batchOf fetches the next batch and returns its step, tags and the
// sequences it holds.
func batchOf(t *testing.T, u string) (step int, tags []int, seqs int) {
	t.Helper()
	status, raw := call(t, "GET", u+"/batch", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /batch: %d %s", status, raw)
	}
	var b atropos.Batch
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	for _, g := range b.Batch {
		tags = append(tags, g.Tokens[0][0])
		seqs += len(g.Tokens)
	}
	return b.Step, tags, seqs
}

// A group larger than its environment's group_size is queued at once. It
// is handed out in a batch of at most batch_size sequences, taking two
// packs. One that could never fit a batch is refused.
func TestOversizedGroupQueued(t *testing.T) {
	backends(t, atropos.DefaultConfig(), func(t *testing.T, h *harness) {
		u := h.url
		startRun(t, u, 8, 4)
		env := `, "env_id": 0`
		for _, g := range []struct{ size, tag int }{{4, 0}, {5, 1}, {4, 2}, {4, 3}} {
			got := callJSON(t, "POST", u+"/scored_data", group(g.size, g.tag, env))
			if got["status"] != "received" || got["buffer_size"] != nil {
				t.Errorf("push of %d sequences: %v, want received, no buffer_size", g.size, got)
			}
		}
		status, out := call(t, "POST", u+"/scored_data", group(9, 9, env))
		if status != http.StatusUnprocessableEntity || !strings.Contains(string(out), "9 sequences") || !strings.Contains(string(out), "batch_size of 8") {
			t.Errorf("push of 9 sequences: %d %s, want 422 naming 9 and batch_size 8", status, out)
		}
		// Queued: 4, 5 (two packs), 4, 4: five packs of 4, not of 5.
		wantFields(t, "status-env", callJSON(t, "GET", u+"/status-env", []byte(`{"env_id": 0}`)),
			map[string]any{"self_queue_size": 5, "queue_size": 5, "max_group_size": 4})
		checkMetrics(t, "after the pushes", edgetest.Scrape(t, u, ""), []wantMetric{
			{"delegate_api_groups_received_total", nil, 4},
			{"delegate_api_groups_oversized_total", nil, 1},
			{"delegate_api_groups_buffered_total", nil, 0},
			{"delegate_api_pushes_refused_total", []string{"status", "422"}, 1},
		})
		for _, want := range []struct {
			step int
			tags string
			seqs int
		}{{1, "[0 2]", 8}, {2, "[1]", 5}} {
			step, tags, seqs := batchOf(t, u)
			if step != want.step || fmt.Sprint(tags) != want.tags || seqs != want.seqs {
				t.Errorf("batch: step %d tags %v of %d sequences, want step %d %s of %d", step, tags, seqs, want.step, want.tags, want.seqs)
			}
		}
		wantFields(t, "left", callJSON(t, "GET", u+"/status-env", []byte(`{"env_id": 0}`)), map[string]any{"self_queue_size": 1})
	})
}

// An oversized group stored before a restart is queued again after it.
// That holds whether it was queued or in a batch assembled but not
// fetched.
func TestRestartKeepsOversized(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, atropos.DefaultConfig())
	startRun(t, h.url, 8, 4)
	env := `, "env_id": 0`
	for _, g := range []struct{ size, tag int }{{4, 0}, {4, 2}, {5, 1}} {
		callJSON(t, "POST", h.url+"/scored_data", group(g.size, g.tag, env))
	}
	if step, tags, _ := batchOf(t, h.url); step != 1 || fmt.Sprint(tags) != "[0 2]" {
		t.Fatalf("step %d tags %v, want step 1 [0 2]", step, tags)
	}
	wantFields(t, "late oversized group", callJSON(t, "POST", h.url+"/scored_data", group(6, 3, env)), map[string]any{"status": "received"})
	h.stop()

	h = start(t, dir, atropos.DefaultConfig())
	u := h.url
	// Step 2 (the 5) is assembled, the 6 queued: two packs each.
	wantFields(t, "status-env after restart", callJSON(t, "GET", u+"/status-env", []byte(`{"env_id": 0}`)),
		map[string]any{"current_step": 2, "self_queue_size": 4, "max_group_size": 4})
	for _, want := range []struct {
		step int
		tags string
		seqs int
	}{{2, "[1]", 5}, {3, "[3]", 6}} {
		step, tags, seqs := batchOf(t, u)
		if step != want.step || fmt.Sprint(tags) != want.tags || seqs != want.seqs {
			t.Errorf("batch: step %d tags %v of %d sequences, want step %d %s of %d", step, tags, seqs, want.step, want.tags, want.seqs)
		}
	}
	wantFields(t, "all fetched", callJSON(t, "GET", u+"/status-env", []byte(`{"env_id": 0}`)), map[string]any{"self_queue_size": 0})
}
