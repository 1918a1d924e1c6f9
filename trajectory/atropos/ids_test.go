package atropos_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/trajectory/atropos"
)

// A group the trainer could never train on is refused at the API. The 422
// detail names the field and the index. The cases are token ids out of the
// registered vocabulary (or of int32 before one is registered), sequences
// over max_token_len, and masks neither -100 nor a token id. An
// env_id must name a registered environment, -1 as much as 99.
func TestTokenIDsRefused(t *testing.T) {
	seq := func(toks string) []byte {
		return fmt.Appendf(nil, `{"tokens": [[1, 2, 3], %s], "masks": [[-100, 2, 3], %s], "scores": [0, 1], "env_id": 0}`, toks, toks)
	}
	for _, tc := range []struct {
		name   string
		vocab  string // the registration's vocab_size field, if any
		body   []byte
		status int
		loc    string // of a 422
		msg    string // a part of it
	}{
		{"within the vocabulary", `, "vocab_size": 272`, seq("[4, 271, 0]"), 200, "", ""},
		{"negative id", `, "vocab_size": 272`, seq("[4, -5, 0]"), 422, "body tokens 1 1", "negative"},
		{"id beyond the vocabulary", `, "vocab_size": 272`, seq("[4, 99999, 0]"), 422, "body tokens 1 1", "vocab_size of 272"},
		{"id beyond int64", `, "vocab_size": 272`, seq("[4, 5, 100000000000000000000000]"), 422, "body tokens 1 2", "vocab_size of 272"},
		{"id beyond int32 without a vocabulary", "", seq("[4, 2147483648, 0]"), 422, "body tokens 1 1", "int32"},
		{"large id without a vocabulary", "", seq("[4, 99999, 0]"), 200, "", ""},
		{"sequence over max_token_len", "", seq("[1, 2, 3, 4, 5, 6, 7, 8, 9]"), 422, "body tokens 1", "max_token_len of 8"},
		{"mask neither -100 nor an id", `, "vocab_size": 272`,
			[]byte(`{"tokens": [[1, 2, 3]], "masks": [[-7, 2, 3]], "scores": [0], "env_id": 0}`), 422, "body masks 0 0", "-100"},
		{"mask beyond the vocabulary", `, "vocab_size": 272`,
			[]byte(`{"tokens": [[1, 2, 3]], "masks": [[-100, 2, 300]], "scores": [0], "env_id": 0}`), 422, "body masks 0 2", "vocab_size"},
		{"distill id beyond the vocabulary", `, "vocab_size": 272`,
			[]byte(`{"tokens": [[1]], "masks": [[1]], "scores": [0], "distill_token_ids": [[[1, 2], [272]]]}`), 422, "body distill_token_ids 0 1 0", "vocab_size"},
		{"env_id -1", "", []byte(`{"tokens": [[1]], "masks": [[1]], "scores": [0], "env_id": -1}`), 400, "", "unknown env_id -1"},
		{"env_id 99", "", []byte(`{"tokens": [[1]], "masks": [[1]], "scores": [0], "env_id": 99}`), 400, "", "unknown env_id 99"},
		{"env_id null", "", []byte(`{"tokens": [[1]], "masks": [[1]], "scores": [0], "env_id": null}`), 200, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startMemory(t, atropos.DefaultConfig())
			callJSON(t, "POST", h.url+"/register", fmt.Appendf(nil,
				`{"wandb_group": "", "wandb_project": "", "batch_size": 8, "max_token_len": 8, "checkpoint_dir": "", "save_checkpoint_interval": 0, "starting_step": 0, "num_steps": 10%s}`, tc.vocab))
			callJSON(t, "GET", h.url+"/batch", nil)
			callJSON(t, "POST", h.url+"/register-env", []byte(`{"max_token_length": 8, "desired_name": "e", "weight": 1, "group_size": 2}`))
			for _, path := range []string{"/scored_data", "/scored_data_list"} {
				body := tc.body
				if path == "/scored_data_list" {
					body = append(append([]byte("["), body...), ']')
				}
				status, out := call(t, "POST", h.url+path, body)
				if status != tc.status {
					t.Fatalf("%s: status %d %s, want %d", path, status, out, tc.status)
				}
				if !strings.Contains(string(out), tc.msg) {
					t.Errorf("%s: %s, want it to say %q", path, out, tc.msg)
				}
				if tc.status != 422 {
					continue
				}
				var resp struct {
					Detail []struct {
						Loc []any `json:"loc"`
					} `json:"detail"`
				}
				if err := json.Unmarshal(out, &resp); err != nil || len(resp.Detail) != 1 {
					t.Fatalf("%s: %s: want one detail (%v)", path, out, err)
				}
				want := tc.loc
				if path == "/scored_data_list" { // the item's index after "body"
					want = strings.Replace(want, "body", "body 0", 1)
				}
				if got := strings.TrimSpace(fmt.Sprintln(resp.Detail[0].Loc...)); got != want {
					t.Errorf("%s: loc %q, want %q", path, got, want)
				}
			}
		})
	}
}
