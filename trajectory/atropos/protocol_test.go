package atropos_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/trajectory/atropos"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b)
}

// call sends one request and returns the status and body.
func call(t *testing.T, method, url string, body []byte, header ...string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// callJSON sends a request, wants 200 and decodes the answer.
func callJSON(t *testing.T, method, url string, body []byte) map[string]any {
	t.Helper()
	status, out := call(t, method, url, body)
	if status != http.StatusOK {
		t.Fatalf("%s %s: status %d: %s", method, url, status, out)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("%s %s: %v: %s", method, url, err, out)
	}
	return m
}

func wantFields(t *testing.T, what string, got map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Errorf("%s: %s = %v, want %v (all: %v)", what, k, got[k], v, got)
		}
	}
}

// group builds a group of n sequences whose content depends on tag.
func group(n, tag int, extra string) []byte {
	var tok, mask, score []string
	for i := range n {
		tok = append(tok, fmt.Sprintf("[%d, %d, %d]", tag, i, 7))
		mask = append(mask, fmt.Sprintf("[-100, %d, %d]", i, 7))
		score = append(score, fmt.Sprintf("%d.0", i%2))
	}
	return fmt.Appendf(nil, `{"tokens": [%s], "masks": [%s], "scores": [%s]%s}`,
		strings.Join(tok, ", "), strings.Join(mask, ", "), strings.Join(score, ", "), extra)
}

func TestProtocolFlow(t *testing.T) {
	h := start(t, t.TempDir(), atropos.DefaultConfig())
	u := h.url

	wantFields(t, "GET /", callJSON(t, "GET", u+"/", nil), map[string]any{"message": "AtroposLib API"})
	wantFields(t, "status before register", callJSON(t, "GET", u+"/status", nil), map[string]any{"current_step": 0, "queue_size": 0})
	wantFields(t, "info before register", callJSON(t, "GET", u+"/info", nil), map[string]any{"batch_size": -1, "max_token_len": -1})
	wantFields(t, "wandb_info before register", callJSON(t, "GET", u+"/wandb_info", nil), map[string]any{"group": nil, "project": nil})
	wantFields(t, "batch before register", callJSON(t, "GET", u+"/batch", nil), map[string]any{
		"status": "error", "message": "Trainer not registered. Call /register first.", "batch": []any{}})

	status, out := call(t, "POST", u+"/register", fixture(t, "register.json"))
	if status != 200 || !bytes.HasPrefix(out, []byte(`{"uuid":`)) || bytes.Contains(out, []byte(`"uuid":"`)) {
		t.Fatalf("register: %d %s, want {\"uuid\": <128-bit integer>}", status, out)
	}
	wantFields(t, "register-env before the first batch", callJSON(t, "POST", u+"/register-env", fixture(t, "register_env.json")),
		map[string]any{"status": "wait for trainer to start"})
	wantFields(t, "first batch", callJSON(t, "GET", u+"/batch", nil), map[string]any{"batch": nil})

	wantFields(t, "register-env", callJSON(t, "POST", u+"/register-env", fixture(t, "register_env.json")), map[string]any{
		"status": "success", "env_id": 0, "wandb_name": "gsm8k_0", "checkpoint_dir": "ckpt",
		"starting_step": 0, "checkpoint_interval": 10, "num_steps": 100})
	wantFields(t, "second env", callJSON(t, "POST", u+"/register-env",
		[]byte(`{"max_token_length": 2048, "desired_name": "gsm8k", "weight": 3.0, "group_size": 4, "min_batch_allocation": 0.25}`)),
		map[string]any{"status": "success", "env_id": 1, "wandb_name": "gsm8k_1"})
	wantFields(t, "wandb_info", callJSON(t, "GET", u+"/wandb_info", nil), map[string]any{"group": "grp", "project": "proj"})
	wantFields(t, "info", callJSON(t, "GET", u+"/info", nil), map[string]any{"batch_size": 8, "max_token_len": 2048})

	wantFields(t, "scored_data", callJSON(t, "POST", u+"/scored_data", group(4, 1, `, "env_id": 0`)), map[string]any{"status": "received"})
	wantFields(t, "status", callJSON(t, "GET", u+"/status", nil), map[string]any{"current_step": 0, "queue_size": 1})
	// A JSON body on a GET, as BaseEnv sends it.
	wantFields(t, "status-env", callJSON(t, "GET", u+"/status-env", []byte(`{"env_id": 0}`)), map[string]any{
		"current_step": 0, "queue_size": 1, "self_queue_size": 1, "max_group_size": 4,
		"unallocated_fraction": 0.75, "env_weight": 0.25})
	wantFields(t, "status-env of the other env", callJSON(t, "GET", u+"/status-env", []byte(`{"env_id": 1}`)), map[string]any{
		"queue_size": 1, "self_queue_size": 0, "env_weight": 0.75})
	latest := callJSON(t, "GET", u+"/latest_example", nil)
	if fmt.Sprint(latest["tokens"]) != "[[1 0 7] [1 1 7] [1 2 7] [1 3 7]]" || latest["advantages"] != nil {
		t.Errorf("latest_example = %v", latest)
	}

	wantFields(t, "scored_data_list", callJSON(t, "POST", u+"/scored_data_list",
		[]byte("["+string(group(4, 2, `, "env_id": 1`))+"]")), map[string]any{"status": "received", "groups_processed": 1})
	b := callJSON(t, "GET", u+"/batch", nil)
	if batch, _ := b["batch"].([]any); len(batch) != 2 || fmt.Sprint(b["step"]) != "1" {
		t.Fatalf("batch = %v, want 2 groups at step 1", b)
	}
	wantFields(t, "status after the batch", callJSON(t, "GET", u+"/status", nil), map[string]any{"current_step": 1, "queue_size": 0})
	status, again := call(t, "GET", u+"/batch?step=1", nil)
	if status != 200 || !strings.Contains(string(again), `"step":1`) {
		t.Errorf("batch?step=1: %d %s", status, again)
	}
	for _, q := range []string{"step=0", "step=3", "step=x"} {
		if status, out := call(t, "GET", u+"/batch?"+q, nil); status != http.StatusBadRequest {
			t.Errorf("batch?%s: %d %s, want 400", q, status, out)
		}
	}
	wantFields(t, "no batch", callJSON(t, "GET", u+"/batch", nil), map[string]any{"batch": nil})

	wantFields(t, "disconnect", callJSON(t, "POST", u+"/disconnect-env", []byte(`{"env_id": 1}`)), map[string]any{"status": "success"})
	wantFields(t, "disconnect unknown", callJSON(t, "POST", u+"/disconnect-env", []byte(`{"env_id": 9}`)), map[string]any{"status": "failure"})
	wantFields(t, "status-env after disconnect", callJSON(t, "GET", u+"/status-env", []byte(`{"env_id": 0}`)), map[string]any{
		"unallocated_fraction": 1, "env_weight": 1})

	// Without a token the reset is refused: a web page could send it.
	if status, out := call(t, "GET", u+"/reset_data", nil); status != http.StatusMethodNotAllowed {
		t.Errorf("GET /reset_data: %d %s, want 405", status, out)
	}
	if status, out := call(t, "POST", u+"/reset_data", nil); status != http.StatusForbidden {
		t.Errorf("POST /reset_data without a token: %d %s, want 403", status, out)
	}
	if status, _ := call(t, "POST", u+"/batch", nil); status != http.StatusMethodNotAllowed {
		t.Errorf("POST /batch: %d, want 405", status)
	}
}

// TestReset empties a run's queue and registrations with POST
// /reset_data and the server's token.
func TestReset(t *testing.T) {
	h := start(t, t.TempDir(), config(func(c *atropos.Config) { c.Token = "tok" }))
	auth := []string{"Authorization", "Bearer tok"}
	callAuth := func(method, url string, body []byte) map[string]any {
		t.Helper()
		status, out := call(t, method, url, body, auth...)
		var m map[string]any
		if err := json.Unmarshal(out, &m); status != 200 || err != nil {
			t.Fatalf("%s %s: %d %s", method, url, status, out)
		}
		return m
	}
	callAuth("POST", h.url+"/register", fixture(t, "register.json"))
	callAuth("POST", h.url+"/register-env", []byte(`{"max_token_length": 64, "desired_name": "e", "weight": 1, "group_size": 4}`))
	callAuth("POST", h.url+"/scored_data", group(4, 1, ""))
	wantFields(t, "status before reset", callAuth("GET", h.url+"/status", nil), map[string]any{"queue_size": 1})
	status, out := call(t, "POST", h.url+"/reset_data", nil, auth...)
	if status != 200 || string(out) != "Reset successful" {
		t.Fatalf("reset_data: %d %q", status, out)
	}
	wantFields(t, "status after reset", callAuth("GET", h.url+"/status", nil), map[string]any{"current_step": 0, "queue_size": 0})
	wantFields(t, "batch after reset", callAuth("GET", h.url+"/batch", nil), map[string]any{"status": "error"})
}

// TestBrowserPagesAreRefused sends what a local web page can send to a
// loopback API without a token. That is GET /batch, which hands a batch
// out, from a cross-site page, a group as text/plain, and any request
// through a rebound DNS name.
func TestBrowserPagesAreRefused(t *testing.T) {
	h := start(t, t.TempDir(), atropos.DefaultConfig())
	startRun(t, h.url, 4, 2)
	for _, tc := range []struct {
		name, method, path string
		header             []string
		want               int
	}{
		{"cross-site GET /batch", "GET", "/batch", []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"text/plain group", "POST", "/scored_data", []string{"Content-Type", "text/plain"}, 415},
		{"foreign Origin", "POST", "/scored_data", []string{"Origin", "http://evil.example", "Content-Type", "application/json"}, 403},
	} {
		status, out := call(t, tc.method, h.url+tc.path, group(2, 1, ""), tc.header...)
		if status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, status, out, tc.want)
		}
	}
	req, err := http.NewRequest("GET", h.url+"/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "rebound.example:8000"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("rebound Host: %d, want 403", resp.StatusCode)
	}
	wantFields(t, "nothing queued", callJSON(t, "GET", h.url+"/status", nil), map[string]any{"queue_size": 0})
}

// startRun registers a trainer (batch size batch), starts it and registers
// one environment of groupSize.
func startRun(t *testing.T, u string, batch, groupSize int) {
	t.Helper()
	callJSON(t, "POST", u+"/register", fmt.Appendf(nil,
		`{"wandb_group": "", "wandb_project": "", "batch_size": %d, "max_token_len": 64, "checkpoint_dir": "", "save_checkpoint_interval": 0, "starting_step": 0, "num_steps": 10}`, batch))
	callJSON(t, "GET", u+"/batch", nil)
	r := callJSON(t, "POST", u+"/register-env", fmt.Appendf(nil,
		`{"max_token_length": 64, "desired_name": "e", "weight": 1, "group_size": %d}`, groupSize))
	if r["status"] != "success" {
		t.Fatalf("register-env: %v", r)
	}
}

func TestScoredDataPassesEveryFieldThrough(t *testing.T) {
	h := start(t, t.TempDir(), atropos.DefaultConfig())
	startRun(t, h.url, 2, 2)
	wantFields(t, "scored_data", callJSON(t, "POST", h.url+"/scored_data", fixture(t, "scored_data_full.json")), map[string]any{"status": "received"})
	_, got := call(t, "GET", h.url+"/latest_example", nil)
	if want := fixture(t, "scored_data_full_stored.json"); !bytes.Equal(got, want) {
		t.Errorf("latest_example:\n got %s\nwant %s", got, want)
	}
	_, got = call(t, "GET", h.url+"/batch", nil)
	if want := `{"batch":[` + string(fixture(t, "scored_data_full_stored.json")) + `],"step":1}`; string(got) != want {
		t.Errorf("batch:\n got %s\nwant %s", got, want)
	}
}

func TestSchemaViolations(t *testing.T) {
	h := start(t, t.TempDir(), atropos.DefaultConfig())
	startRun(t, h.url, 8, 2)
	for _, tc := range []struct {
		file string
		loc  string
	}{
		{"missing_scores.json", "body scores"},
		{"masks_length.json", "body masks 1"},
		{"masks_count.json", "body masks"},
		{"scores_count.json", "body scores"},
		{"tokens_string.json", "body tokens 0 1"},
		{"tokens_float.json", "body tokens 0 1"},
		{"scores_string.json", "body scores 0"},
		{"message_content.json", "body messages 0 0"},
		{"logprobs_null.json", "body inference_logprobs 0 1"},
		{"group_overrides_list.json", "body group_overrides"},
		{"group_overrides_roles.json", "body group_overrides roles"},
		{"group_overrides_roles_unnamed.json", "body group_overrides roles"},
		{"overrides_role_number.json", "body overrides 1 role"},
		{"overrides_sample_correct.json", "body overrides 0 sample_correct"},
		{"overrides_question_without_role.json", "body overrides 0 role"},
		{"env_id_string.json", "body env_id"},
		{"empty_group.json", "body tokens"},
		{"not_object.json", "body"},
		{"messages_malformed.json", "body messages"},
		{"unknown_malformed.json", "body extra"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			status, out := call(t, "POST", h.url+"/scored_data", fixture(t, filepath.Join("invalid", tc.file)))
			var resp struct {
				Detail []struct {
					Loc []any  `json:"loc"`
					Msg string `json:"msg"`
				} `json:"detail"`
			}
			if status != http.StatusUnprocessableEntity || json.Unmarshal(out, &resp) != nil || len(resp.Detail) != 1 {
				t.Fatalf("status %d %s, want 422 with one detail", status, out)
			}
			loc := strings.Trim(fmt.Sprint(resp.Detail[0].Loc), "[]")
			if loc != tc.loc || resp.Detail[0].Msg == "" {
				t.Errorf("loc %q msg %q, want loc %q", loc, resp.Detail[0].Msg, tc.loc)
			}
		})
	}
	t.Run("list names the item", func(t *testing.T) {
		body := "[" + string(group(2, 1, "")) + "," + string(fixture(t, "invalid/scores_count.json")) + "]"
		status, out := call(t, "POST", h.url+"/scored_data_list", []byte(body))
		if status != 422 || !strings.Contains(string(out), `"loc":["body",1,"scores"]`) {
			t.Errorf("%d %s", status, out)
		}
		wantFields(t, "nothing stored", callJSON(t, "GET", h.url+"/status", nil), map[string]any{"queue_size": 0})
	})
	for _, tc := range []struct{ name, body, loc string }{
		{"list not a list", string(group(2, 1, "")), `"loc":["body"]`},
		{"list item null", "[null]", `"loc":["body",0]`},
		{"list item malformed", `[{"tokens": [[1]]`, `"loc":["body"]`},
		{"list trailing data", "[] []", `"loc":["body"]`},
		{"list missing comma", "[" + string(group(2, 1, "")) + " " + string(group(2, 2, "")) + "]", `"loc":["body"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := call(t, "POST", h.url+"/scored_data_list", []byte(tc.body))
			if status != 422 || !strings.Contains(string(out), tc.loc) {
				t.Errorf("%d %s, want 422 at %s", status, out, tc.loc)
			}
		})
	}
	for _, tc := range []struct{ path, body, want string }{
		{"/scored_data", string(group(2, 1, `, "env_id": 5`)), "unknown env_id 5"},
		{"/status-env", `{"env_id": 3}`, "unknown env_id 3"},
	} {
		method := "POST"
		if tc.path == "/status-env" {
			method = "GET"
		}
		if status, out := call(t, method, h.url+tc.path, []byte(tc.body)); status != 400 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: %d %s, want 400 %q", tc.path, status, out, tc.want)
		}
	}
	for _, tc := range []struct{ path, body, loc string }{
		{"/register", `{"wandb_group": "", "wandb_project": ""}`, `["body","batch_size"]`},
		{"/register-env", `{"max_token_length": 1, "desired_name": "x", "weight": "heavy", "group_size": 2}`, `["body","weight"]`},
		{"/disconnect-env", `{}`, `["body","env_id"]`},
	} {
		if status, out := call(t, "POST", h.url+tc.path, []byte(tc.body)); status != 422 || !strings.Contains(string(out), tc.loc) {
			t.Errorf("%s: %d %s, want 422 at %s", tc.path, status, out, tc.loc)
		}
	}
}

func TestBufferedOddSizes(t *testing.T) {
	backends(t, atropos.DefaultConfig(), func(t *testing.T, h *harness) {
		u := h.url
		startRun(t, u, 8, 4)
		env := `, "env_id": 0`
		for i, want := range []map[string]any{
			{"status": "buffered", "buffer_size": 2},
			{"status": "buffered", "buffer_size": 5},
			{"status": "buffered", "buffer_size": 3}, // 2 + 2 released, 3 waits
		} {
			size := []int{2, 3, 2}[i]
			wantFields(t, fmt.Sprintf("push %d", i), callJSON(t, "POST", u+"/scored_data", group(size, i, env)), want)
		}
		wantFields(t, "status", callJSON(t, "GET", u+"/status", nil), map[string]any{"queue_size": 2})
		wantFields(t, "list", callJSON(t, "POST", u+"/scored_data_list", []byte("["+string(group(1, 9, env))+"]")),
			map[string]any{"status": "received", "groups_processed": 1, "buffered": 1, "last_buffer_size": 0})
		// Queue: 2, 2, 3, 1. No pack of 4 from the 3 and the 1 alone.
		wantFields(t, "no batch yet", callJSON(t, "GET", u+"/batch", nil), map[string]any{"batch": nil})
		callJSON(t, "POST", u+"/scored_data", group(4, 20, env))
		callJSON(t, "POST", u+"/scored_data", group(4, 21, env))
		var b atropos.Batch
		_, raw := call(t, "GET", u+"/batch", nil)
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Fatal(err)
		}
		var sizes []int
		for _, g := range b.Batch {
			sizes = append(sizes, len(g.Tokens))
		}
		if fmt.Sprint(sizes) != "[2 2 4]" || b.Step != 1 {
			t.Errorf("batch sizes %v step %d, want [2 2 4] at step 1 (whole groups, packs of the largest size)", sizes, b.Step)
		}
	})
}

func TestDuplicatesDropped(t *testing.T) {
	backends(t, atropos.DefaultConfig(), func(t *testing.T, h *harness) {
		startRun(t, h.url, 8, 2)
		for _, g := range [][]byte{
			group(2, 1, `, "env_id": 0, "group_overrides": {"group_id": "a"}`),
			group(2, 2, `, "env_id": 0, "group_overrides": {"group_id": "a"}`), // same id, other content
			group(2, 3, `, "env_id": 0`),
			group(2, 3, `, "env_id": 0`), // same content
		} {
			wantFields(t, "push", callJSON(t, "POST", h.url+"/scored_data", g), map[string]any{"status": "received"})
		}
		wantFields(t, "status", callJSON(t, "GET", h.url+"/status", nil), map[string]any{"queue_size": 2})
		wantFields(t, "info", callJSON(t, "GET", h.url+"/info", nil), map[string]any{"duplicates_dropped": 2})
	})
}

func TestStaleGroupsDropped(t *testing.T) {
	backends(t, config(func(c *atropos.Config) { c.MaxStaleness = 1 }), func(t *testing.T, h *harness) {
		u := h.url
		startRun(t, u, 2, 2)
		pv := func(tag, v int) []byte {
			return group(2, tag, fmt.Sprintf(`, "env_id": 0, "group_overrides": {"policy_version": %d}`, v))
		}
		callJSON(t, "POST", u+"/scored_data", pv(1, 0))
		wantFields(t, "step 1", callJSON(t, "GET", u+"/batch", nil), map[string]any{"step": 1})
		callJSON(t, "POST", u+"/scored_data", pv(2, 0))
		wantFields(t, "step 2: one step behind is kept", callJSON(t, "GET", u+"/batch", nil), map[string]any{"step": 2})
		callJSON(t, "POST", u+"/scored_data", pv(3, 0))
		callJSON(t, "POST", u+"/scored_data", pv(4, 2))
		b := callJSON(t, "GET", u+"/batch", nil)
		batch, _ := b["batch"].([]any)
		if len(batch) != 1 || fmt.Sprint(batch[0].(map[string]any)["group_overrides"]) != "map[policy_version:2]" {
			t.Errorf("step 3 batch = %v, want only the policy_version 2 group", b)
		}
		wantFields(t, "info", callJSON(t, "GET", u+"/info", nil), map[string]any{"stale_dropped": 1, "max_staleness": 1})
	})
}

func TestBearerToken(t *testing.T) {
	h := start(t, t.TempDir(), config(func(c *atropos.Config) { c.Token = "s3cret-token" }))
	for _, tc := range []struct {
		header []string
		want   int
	}{
		{nil, 401},
		{[]string{"Authorization", "Bearer wrong"}, 401},
		{[]string{"Authorization", "s3cret-token"}, 401},
		{[]string{"Authorization", "Bearer s3cret-token"}, 200},
	} {
		for _, path := range []string{"/status", "/metrics"} {
			status, out := call(t, "GET", h.url+path, nil, tc.header...)
			if status != tc.want {
				t.Errorf("%s %v: %d %s, want %d", path, tc.header, status, out, tc.want)
			}
			if strings.Contains(string(out), "s3cret") {
				t.Errorf("%s: answer shows the token: %s", path, out)
			}
		}
	}
}

func TestBodyLimits(t *testing.T) {
	h := start(t, t.TempDir(), config(func(c *atropos.Config) { c.MaxBody, c.MaxDecompressed = 4096, 8192 }))
	startRun(t, h.url, 8, 2)
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(b)
		_ = zw.Close()
		return buf.Bytes()
	}
	big := group(2, 1, `, "env_id": 0, "generation_params": {"pad": "`+strings.Repeat("x", 5000)+`"}`)
	huge := group(2, 1, `, "env_id": 0, "generation_params": {"pad": "`+strings.Repeat("x", 9000)+`"}`)
	for _, tc := range []struct {
		name   string
		body   []byte
		header []string
		want   int
	}{
		{"over max body", big, nil, 413},
		{"gzip within bounds", gz(big), []string{"Content-Encoding", "gzip"}, 200},
		// A gzip body may be several members, each compressed apart.
		{"gzip in two members", append(gz(big[:100]), gz(big[100:])...), []string{"Content-Encoding", "gzip"}, 200},
		{"gzip in two members over max decompressed", append(gz(huge[:100]), gz(huge[100:])...), []string{"Content-Encoding", "gzip"}, 413},
		{"gzip over max decompressed", gz(huge), []string{"Content-Encoding", "gzip"}, 413},
		{"invalid gzip", []byte("not gzip at all"), []string{"Content-Encoding", "gzip"}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, out := call(t, "POST", h.url+"/scored_data", tc.body, tc.header...); status != tc.want {
				t.Errorf("status %d %s, want %d", status, out, tc.want)
			}
		})
	}
}

// TestPublishConn checks that with WithPublishConn the groups go out on
// that connection. The rest, state and batches read back, use the other.
func TestPublishConn(t *testing.T) {
	emb, err := atropos.StartEmbedded(embedded(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := emb.Connect()
	if err != nil {
		emb.Shutdown()
		t.Fatal(err)
	}
	pc, err := emb.Connect()
	if err != nil {
		nc.Close()
		emb.Shutdown()
		t.Fatal(err)
	}
	srv, err := atropos.New(context.Background(), nc, atropos.DefaultConfig(), nil, atropos.WithPublishConn(pc))
	if err != nil {
		t.Fatal(err)
	}
	h := serveHTTP(t, srv, func() {
		pc.Close()
		nc.Close()
		emb.Shutdown()
	})
	startRun(t, h.url, 2, 2)
	pad := strings.Repeat("x", 200_000)
	before, beforePub := nc.Stats().OutBytes, pc.Stats().OutBytes
	callJSON(t, "POST", h.url+"/scored_data", group(2, 1, `, "env_id": 0, "generation_params": {"pad": "`+pad+`"}`))
	if got := pc.Stats().OutBytes - beforePub; got < uint64(len(pad)) {
		t.Errorf("publish connection sent %d bytes for a group of over %d", got, len(pad))
	}
	if got := nc.Stats().OutBytes - before; got >= uint64(len(pad)) {
		t.Errorf("the other connection sent %d bytes: the group went out on it", got)
	}
	if b := callJSON(t, "GET", h.url+"/batch", nil); fmt.Sprint(b["step"]) != "1" {
		t.Errorf("batch = %v", b)
	}
	if got := nc.Stats().InBytes; got < uint64(len(pad)) {
		t.Errorf("the batch was read back over the publish connection (the other got %d bytes)", got)
	}
}
