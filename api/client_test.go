package api

import "testing"

func TestBatchHead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		raw   string
		step  int
		ready bool
		bad   bool
	}{
		{"batch", `{"batch":[{"tokens":[[1]]}],"step":7}`, 7, true, false},
		{"no batch yet", `{"batch":null}`, 0, false, false},
		{"not registered", `{"status":"error","message":"Trainer not registered. Call /register first.","batch":[]}`, 0, false, true},
		{"spaced, as Atropos writes it", `{"batch": [{"tokens": [[1]]}], "step": 3}`, 3, true, false},
		{"no step", `{"batch":[{"tokens":[[1]]}]}`, 0, true, false},
		{"step text inside a group", `{"batch":[{"messages":[[{"role":"u","content":"],\"step\":9"}]]}],"step":2}`, 2, true, false},
		{"tail not a number", `{"batch":[{"tokens":[[1]]}],"step":"x"}`, 0, false, true},
		{"not JSON", `<html>`, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step, ready, err := batchHead([]byte(tc.raw))
			if (err != nil) != tc.bad {
				t.Fatalf("err = %v, want bad=%v", err, tc.bad)
			}
			if !tc.bad && (step != tc.step || ready != tc.ready) {
				t.Errorf("got step %d ready %v, want step %d ready %v", step, ready, tc.step, tc.ready)
			}
		})
	}
}
