package delegate

import (
	"testing"
	"time"
)

func TestCriticalPath(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	call := func(start, lat int) *Node {
		return &Node{Model: "m", Start: t0.Add(ms(start)), Latency: ms(lat)}
	}
	group := func(start, lat int, kids ...*Node) *Node {
		return &Node{Name: "g", Start: t0.Add(ms(start)), Latency: ms(lat), Children: kids}
	}
	tests := []struct {
		name      string
		n         *Node
		want      time.Duration
		wantCalls int
	}{
		{"nil", nil, 0, 0},
		{"one call", call(0, 30), ms(30), 1},
		// plan 10, then three sub-agents side by side (20, 50, 35), then 15.
		{"decompose", group(0, 100, call(0, 10), group(11, 52, call(11, 20), call(12, 50), call(12, 35)), call(64, 15)), ms(75), 3},
		// Three calls one after another: all count.
		{"sequential", group(0, 100, call(0, 10), call(10, 20), call(30, 5)), ms(35), 3},
		// A call that starts when the slow one of a pair is still running
		// joins that stage, even after the fast one ended.
		{"overlap chain", group(0, 100, call(0, 40), call(1, 5), call(20, 30)), ms(40), 1},
		// Unsorted children are sorted by start.
		{"unsorted", group(0, 100, call(50, 10), call(0, 20)), ms(30), 2},
		// A group not yet closed ends at its last child.
		{"open group", group(0, 100, group(0, 0, call(0, 25)), call(10, 5)), ms(25), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, calls := CriticalPath(tt.n)
			if got != tt.want || calls != tt.wantCalls {
				t.Errorf("CriticalPath = %v, %d calls; want %v, %d", got, calls, tt.want, tt.wantCalls)
			}
		})
	}
}
