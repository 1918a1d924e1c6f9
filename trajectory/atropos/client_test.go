package atropos

import (
	"context"
	"fmt"
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
		c := DefaultTrainerClient()
		c.URL, c.Poll, c.Last, c.Wait = srv.URL, time.Millisecond, 4, wait
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

// TestClientDefaults pins the defaults that BaseEnv and the commands
// rely on.
func TestClientDefaults(t *testing.T) {
	tr, env := DefaultTrainerClient(), DefaultEnvClient()
	got := []any{DefaultClient().Retries, tr.Retries, tr.Poll, tr.Wait, env.Retries, env.Poll, env.MaxBatchesOffpolicy}
	want := []any{8, 8, time.Second, time.Duration(0), 8, time.Second, 3}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("defaults: got %v, want %v", got, want)
			break
		}
	}
}

// TestClientValidate checks that a zero means zero where it makes sense
// and is refused, like a negative, where it does not.
func TestClientValidate(t *testing.T) {
	tests := []struct {
		name    string
		trainer func(c *TrainerClient)
		env     func(c *EnvClient)
		want    string // "" for valid
	}{
		{"defaults", func(*TrainerClient) {}, func(*EnvClient) {}, ""},
		{"no url", func(c *TrainerClient) { c.URL = "" }, func(c *EnvClient) { c.URL = "" }, "atropos client: url is empty"},
		{"zero retries", func(c *TrainerClient) { c.Retries = 0 }, func(c *EnvClient) { c.Retries = 0 }, ""},
		{"negative retries", func(c *TrainerClient) { c.Retries = -1 }, func(c *EnvClient) { c.Retries = -1 }, "atropos client: retries -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := DefaultTrainerClient()
			tr.URL = "http://127.0.0.1:8000"
			tt.trainer(&tr)
			env := DefaultEnvClient()
			env.URL = "http://127.0.0.1:8000"
			tt.env(&env)
			for side, err := range map[string]error{"trainer": tr.Validate(), "env": env.Validate()} {
				if got := errText(err); got != tt.want {
					t.Errorf("%s: got %q, want %q", side, got, tt.want)
				}
			}
		})
	}
	trainer := []struct {
		name string
		edit func(c *TrainerClient)
		want string
	}{
		{"zero poll", func(c *TrainerClient) { c.Poll = 0 }, "atropos trainer client: poll 0s: want above 0"},
		{"negative poll", func(c *TrainerClient) { c.Poll = -time.Second }, "atropos trainer client: poll -1s: want above 0"},
		{"zero wait", func(c *TrainerClient) { c.Wait = 0 }, ""},
		{"negative wait", func(c *TrainerClient) { c.Wait = -time.Second }, "atropos trainer client: wait -1s is negative"},
	}
	for _, tt := range trainer {
		t.Run("trainer "+tt.name, func(t *testing.T) {
			c := DefaultTrainerClient()
			c.URL = "http://127.0.0.1:8000"
			tt.edit(&c)
			if got := errText(c.Validate()); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	env := []struct {
		name string
		edit func(c *EnvClient)
		want string
	}{
		{"one batch off-policy", func(c *EnvClient) { c.MaxBatchesOffpolicy = 1 }, ""},
		{"zero batches off-policy", func(c *EnvClient) { c.MaxBatchesOffpolicy = 0 }, "atropos env client: max_batches_offpolicy 0: want at least 1"},
		{"negative batches off-policy", func(c *EnvClient) { c.MaxBatchesOffpolicy = -1 }, "atropos env client: max_batches_offpolicy -1: want at least 1"},
		{"zero poll", func(c *EnvClient) { c.Poll = 0 }, "atropos env client: poll 0s: want above 0"},
		{"negative poll", func(c *EnvClient) { c.Poll = -time.Millisecond }, "atropos env client: poll -1ms: want above 0"},
	}
	for _, tt := range env {
		t.Run("env "+tt.name, func(t *testing.T) {
			c := DefaultEnvClient()
			c.URL = "http://127.0.0.1:8000"
			tt.edit(&c)
			if got := errText(c.Validate()); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestRetries checks on loopback that a call is tried Retries+1 times
// against a server that keeps failing: 0 tries it once.
func TestRetries(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	for _, tt := range []struct{ retries, want int }{{0, 1}, {2, 3}} {
		t.Run(fmt.Sprintf("%d retries", tt.retries), func(t *testing.T) {
			calls.Store(0)
			c := DefaultTrainerClient()
			c.URL, c.Retries = srv.URL, tt.retries
			if _, err := c.Status(context.Background()); err == nil {
				t.Fatal("Status of a server that answers 503: no error")
			}
			if got := int(calls.Load()); got != tt.want {
				t.Errorf("got %d tries, want %d", got, tt.want)
			}
		})
	}
}
