package local_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/delegatelab/delegate"
)

// TestMemoized checks that a memoized model generates each distinct
// request once, answers a repeat with the same response, shares the
// model's count of calls (a repeat does not count) and keeps no failure.
func TestMemoized(t *testing.T) {
	m := tinyModel(t, 256)
	memo := m.Memoized()
	ctx := context.Background()
	temp, seed := 1.0, int64(5)
	ask := func(text string, seed *int64) *delegate.Request {
		return &delegate.Request{Messages: []delegate.Message{delegate.User(text)}, Temperature: &temp, Seed: seed, MaxTokens: 8}
	}
	first, err := memo.Chat(ctx, ask("a", &seed))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	again := make([]*delegate.Response, 4)
	for i := range again {
		wg.Go(func() {
			r, err := memo.Chat(ctx, ask("a", &seed))
			if err != nil {
				t.Error(err)
			}
			again[i] = r
		})
	}
	wg.Wait()
	if got, want := m.Stats().Completed, int64(1); got != want {
		t.Errorf("engine completed %d requests, want %d (one per distinct request)", got, want)
	}
	for i, r := range again {
		if r == nil || r.Text() != first.Text() || !reflect.DeepEqual(r.Choices, first.Choices) || r.Usage != first.Usage {
			t.Errorf("repeat %d differs from the first answer", i)
		}
	}
	again[0].Choices[0] = delegate.Choice{Message: delegate.Assistant("changed")}
	if r, err := memo.Chat(ctx, ask("a", &seed)); err != nil || r.Text() != first.Text() {
		t.Errorf("a caller's change reached the memo: %q, %v", r.Text(), err)
	}

	// An unseeded call is seeded by the model's count of calls, Seed 1
	// plus the calls before it: "a" was one, the repeats of "a" and "b"
	// count nothing, so "b" and then the model's own "c" get 2 and 3.
	for i, c := range []struct {
		m    delegate.Model
		text string
		id   string
	}{{memo, "b", "local-2"}, {memo, "b", "local-2"}, {m, "c", "local-3"}} {
		r, err := c.m.Chat(ctx, ask(c.text, nil))
		if err != nil {
			t.Fatal(err)
		}
		if r.ID != c.id {
			t.Errorf("call %d: id %s, want %s", i, r.ID, c.id)
		}
	}

	long := ask(strings.Repeat("x ", 300), &seed)
	for i := range 2 {
		if _, err := memo.Chat(ctx, long); err == nil {
			t.Errorf("call %d over the context: no error", i)
		}
	}
}
