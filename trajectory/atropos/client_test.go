package atropos

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestBatchHead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		raw   string
		step  int
		ready bool
		bad   bool
	}{
		{"batch", `{"batch":[{"tokens":[[1]]}],"step":7}`, 7, true, false},
		{"no batch yet", `{"batch":null}`, stepUnknown, false, false},
		{"not registered", `{"status":"error","message":"Trainer not registered. Call /register first.","batch":[]}`, 0, false, true},
		{"spaced, with a step", `{"batch": [{"tokens": [[1]]}], "step": 3}`, 3, true, false},
		{"no step, as Atropos's server writes it", `{"batch": [{"tokens": [[1]]}]}`, stepUnknown, true, false},
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

// TestNextFromAtroposServer reads batches as Atropos's own server hands
// them out. It answers {"batch": null} until one is ready, then
// {"batch": [...]} without a step, each the next step.
func TestNextFromAtroposServer(t *testing.T) {
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/batch" {
			http.NotFound(w, r)
			return
		}
		if polls.Add(1)%2 == 1 {
			w.Write([]byte(`{"batch": null}`))
			return
		}
		w.Write([]byte(`{"batch": [{"tokens": [[1, 2]], "masks": [[-100, 2]], "scores": [1.0]}]}`))
	}))
	defer srv.Close()
	// A client that asks to be held (Wait) polls a server that answers at
	// once, as one that does not.
	for _, wait := range []time.Duration{0, time.Minute} {
		c := &TrainerClient{Client: Client{URL: srv.URL}, Poll: time.Millisecond, Last: 4, Wait: wait}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for want := 5; want <= 6; want++ {
			b, err := c.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if b.Step != want || len(b.Batch) != 1 || c.Last != want {
				t.Fatalf("wait %v: batch step %d with %d groups, client at %d; want step %d, 1 group", wait, b.Step, len(b.Batch), c.Last, want)
			}
		}
		cancel()
	}
}
