package atropos

import (
	"context"
	"encoding/json"
	"testing"
)

// An older server buffered a group larger than its group_size for good.
// On recovery it is queued as oversized. A smaller one stays buffered.
func TestRecoverQueuesBufferedOversized(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	envs, err := json.Marshal([]envRecord{{RegisteredID: 0, Connected: true, GroupSize: 4, Weight: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.put(ctx, "envs", envs); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*group{{body: []byte(`{}`), id: "big", env: 0, size: 5}, {body: []byte(`{}`), id: "small", env: 0, size: 3}} {
		if _, _, err := st.add(ctx, g, true); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	s, err := newServer(ctx, st, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.queue) != 1 || s.queue[0].id != "big" || s.queue[0].unit != 4 || s.queue[0].released || s.queue[0].nominal() != 8 {
		t.Errorf("queue %+v, want the group of 5 alone, oversized (unit 4, nominal 8), not released", s.queue)
	}
	if b := s.buffer[0]; len(b) != 1 || b[0].id != "small" {
		t.Errorf("buffer %+v, want the group of 3", b)
	}
}
