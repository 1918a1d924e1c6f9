package atropos_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/trajectory/atropos"
)

// startGroupRun registers a trainer whose batches are groups and one
// environment, as startRun does.
func startGroupRun(t *testing.T, u string, batch, groups, groupSize int) {
	t.Helper()
	callJSON(t, "POST", u+"/register", fmt.Appendf(nil,
		`{"wandb_group": "", "wandb_project": "", "batch_size": %d, "batch_groups": %d, "max_token_len": 64, "checkpoint_dir": "", "save_checkpoint_interval": 0, "starting_step": 0, "num_steps": 10}`, batch, groups))
	callJSON(t, "GET", u+"/batch", nil)
	r := callJSON(t, "POST", u+"/register-env", fmt.Appendf(nil,
		`{"max_token_length": 64, "desired_name": "e", "weight": 1, "group_size": %d}`, groupSize))
	if r["status"] != "success" {
		t.Fatalf("register-env: %v", r)
	}
}

// A trainer registered with batch_groups gets that many groups a batch, in
// queue order, whatever their sizes. Smaller groups are not buffered,
// larger ones not refused, and /status-env counts each group as one
// group_size, so that an environment paces by groups.
func TestBatchGroups(t *testing.T) {
	backends(t, atropos.DefaultConfig(), func(t *testing.T, h *harness) {
		u := h.url
		startGroupRun(t, u, 8, 2, 4)
		wantFields(t, "info", callJSON(t, "GET", u+"/info", nil), map[string]any{"batch_size": 8, "batch_groups": 2})
		env := `, "env_id": 0`
		for _, g := range []struct{ size, tag int }{{7, 0}, {1, 1}, {12, 2}} {
			wantFields(t, fmt.Sprintf("push of %d sequences", g.size), callJSON(t, "POST", u+"/scored_data", group(g.size, g.tag, env)),
				map[string]any{"status": "received", "buffer_size": nil})
		}
		wantFields(t, "status-env", callJSON(t, "GET", u+"/status-env", []byte(`{"env_id": 0}`)),
			map[string]any{"self_queue_size": 3, "queue_size": 3, "max_group_size": 4})
		if step, tags, seqs := batchOf(t, u); step != 1 || fmt.Sprint(tags) != "[0 1]" || seqs != 8 {
			t.Errorf("first batch: step %d tags %v of %d sequences, want step 1 [0 1] of 8", step, tags, seqs)
		}
		// One group left: no batch until a second comes.
		if got := callJSON(t, "GET", u+"/batch", nil); got["batch"] != nil {
			t.Errorf("batch with one group queued: %v, want none", got)
		}
		callJSON(t, "POST", u+"/scored_data", group(3, 3, env))
		if step, tags, seqs := batchOf(t, u); step != 2 || fmt.Sprint(tags) != "[2 3]" || seqs != 15 {
			t.Errorf("second batch: step %d tags %v of %d sequences, want step 2 [2 3] of 15", step, tags, seqs)
		}
		wantFields(t, "left", callJSON(t, "GET", u+"/status-env", []byte(`{"env_id": 0}`)), map[string]any{"self_queue_size": 0, "queue_size": 0})
	})
}

// batch_groups must divide batch_size, so that a group counts as a whole
// number of sequences.
func TestBatchGroupsRefused(t *testing.T) {
	h := startMemory(t, atropos.DefaultConfig())
	for _, n := range []int{3, -1} {
		status, out := call(t, "POST", h.url+"/register", fmt.Appendf(nil,
			`{"wandb_group": "", "wandb_project": "", "batch_size": 8, "batch_groups": %d, "max_token_len": 64, "checkpoint_dir": "", "save_checkpoint_interval": 0, "starting_step": 0, "num_steps": 10}`, n))
		if status != http.StatusUnprocessableEntity || !strings.Contains(string(out), "batch_groups") {
			t.Errorf("batch_groups %d: %d %s, want 422 naming batch_groups", n, status, out)
		}
	}
}

// Groups pushed before a restart come back as the same batches: the
// registration keeps batch_groups.
func TestRestartKeepsBatchGroups(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, atropos.DefaultConfig())
	startGroupRun(t, h.url, 8, 2, 4)
	env := `, "env_id": 0`
	for _, g := range []struct{ size, tag int }{{5, 0}, {2, 1}, {9, 2}} {
		callJSON(t, "POST", h.url+"/scored_data", group(g.size, g.tag, env))
	}
	h.stop()

	h = start(t, dir, atropos.DefaultConfig())
	wantFields(t, "status-env after restart", callJSON(t, "GET", h.url+"/status-env", []byte(`{"env_id": 0}`)),
		map[string]any{"self_queue_size": 3})
	if step, tags, _ := batchOf(t, h.url); step != 1 || fmt.Sprint(tags) != "[0 1]" {
		t.Errorf("batch after restart: step %d tags %v, want step 1 [0 1]", step, tags)
	}
}

// A group with no sequences is an item with nothing to train. A trainer
// registered with batch_groups takes it as one group of a batch, counted
// by /status-env like any other, queued or in a batch assembled but not
// fetched; without batch_groups it is refused.
func TestEmptyGroups(t *testing.T) {
	empty := func(id string) []byte {
		return fmt.Appendf(nil, `{"tokens": [], "masks": [], "scores": [], "group_overrides": {"group_id": %q}, "env_id": 0}`, id)
	}
	t.Run("batch_groups", func(t *testing.T) {
		backends(t, atropos.DefaultConfig(), func(t *testing.T, h *harness) {
			u := h.url
			startGroupRun(t, u, 8, 2, 4)
			wantFields(t, "empty push", callJSON(t, "POST", u+"/scored_data", empty("a")), map[string]any{"status": "received"})
			callJSON(t, "POST", u+"/scored_data", group(3, 1, `, "env_id": 0`))
			callJSON(t, "POST", u+"/scored_data", empty("b"))
			callJSON(t, "POST", u+"/scored_data", empty("c"))
			wantFields(t, "status-env", callJSON(t, "GET", u+"/status-env", []byte(`{"env_id": 0}`)),
				map[string]any{"self_queue_size": 4, "queue_size": 4})
			status, raw := call(t, "GET", u+"/batch", nil)
			var b atropos.Batch
			if err := json.Unmarshal(raw, &b); status != http.StatusOK || err != nil {
				t.Fatalf("GET /batch: %d %s (%v)", status, raw, err)
			}
			var sizes []int
			for _, g := range b.Batch {
				sizes = append(sizes, len(g.Tokens))
			}
			if b.Step != 1 || fmt.Sprint(sizes) != "[0 3]" {
				t.Errorf("batch: step %d of groups of %v sequences, want step 1 of [0 3]", b.Step, sizes)
			}
			// The second batch, two empty groups, is assembled but not
			// fetched: still counted as queued.
			wantFields(t, "left", callJSON(t, "GET", u+"/status-env", []byte(`{"env_id": 0}`)), map[string]any{"self_queue_size": 2})
		})
	})
	t.Run("sequences", func(t *testing.T) {
		h := startMemory(t, atropos.DefaultConfig())
		startRun(t, h.url, 8, 4)
		status, out := call(t, "POST", h.url+"/scored_data", empty("a"))
		if status != http.StatusUnprocessableEntity || !strings.Contains(string(out), "at least one sequence") {
			t.Errorf("empty group: %d %s, want 422 asking for a sequence", status, out)
		}
	})
}
