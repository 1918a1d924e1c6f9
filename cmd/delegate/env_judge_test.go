package main

import (
	"context"
	"errors"
	"testing"

	"github.com/delegatelab/delegate"
)

// TestEnvBaselines runs each task's baseline once, keeps the last max
// answers, and runs a failed one again.
func TestEnvBaselines(t *testing.T) {
	runs := map[string]int{}
	fail := map[string]bool{"bad": true}
	b := &envBaselines{max: 2, run: func(_ context.Context, t delegate.Task) (string, error) {
		runs[t.ID]++
		if fail[t.ID] {
			return "", errors.New("scripted failure")
		}
		return "answer to " + t.ID, nil
	}}
	tests := []struct {
		id       string
		wantRuns int // of this task, after the call
		wantErr  bool
	}{
		{"a", 1, false},
		{"a", 1, false}, // kept
		{"b", 1, false},
		{"c", 1, false}, // evicts a
		{"a", 2, false}, // ran again
		{"bad", 1, true},
		{"bad", 2, true}, // a failure is not kept
	}
	for i, tt := range tests {
		got, err := b.answer(context.Background(), delegate.Task{ID: tt.id})
		if (err != nil) != tt.wantErr || (err == nil && got != "answer to "+tt.id) {
			t.Errorf("call %d (%s): got %q, %v; want error %v", i, tt.id, got, err, tt.wantErr)
		}
		if runs[tt.id] != tt.wantRuns {
			t.Errorf("call %d (%s): %d runs, want %d", i, tt.id, runs[tt.id], tt.wantRuns)
		}
		if len(b.m) > b.max || len(b.order) != len(b.m) {
			t.Errorf("call %d: %d answers kept in an order of %d, want at most %d", i, len(b.m), len(b.order), b.max)
		}
	}
}
