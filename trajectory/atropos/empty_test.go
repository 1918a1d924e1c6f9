package atropos

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rollout"
)

// An item whose rollouts gave the pushed roles no sequence is an empty
// group. The pusher sends it to a trainer that asks for batches of
// groups, and the Source hands it on as an item with nothing to train,
// not quarantined. To a trainer counting sequences it is not sent.
func TestPushSendsEmptyGroups(t *testing.T) {
	tests := []struct {
		name        string
		batchGroups int
		queued      int    // groups the API took of the two sent
		out         string // in the pusher's closing line
	}{
		{"batch_groups", 2, 2, "0 groups refused by the API\n"},
		{"sequences", 0, 1, "1 groups without sequences not sent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := startPushAPI(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			trainer := DefaultTrainerClient()
			trainer.URL, trainer.Poll = url, 20*time.Millisecond
			reg := Registration{BatchSize: 4, BatchGroups: tt.batchGroups, MaxTokenLen: 512, NumSteps: 10, VocabSize: 272}
			if err := trainer.Register(ctx, reg); err != nil {
				t.Fatal(err)
			}
			// Starts the run; the answer is not needed. A copy: the
			// Source's client is trainer.
			starter := trainer
			go func() { _, _ = starter.Next(ctx) }()
			var out lockedBuffer
			sink, err := NewPusher(ctx, &out, PushConfig{URL: url, Name: "e", MaxTokenLen: 512, GroupSize: 2, OffPolicy: 3})
			if err != nil {
				t.Fatal(err)
			}
			empty := &rollout.GroupRecord{ID: "empty#0", Run: "run", GroupOverrides: rollout.GroupOverride{GroupSize: 2}}
			good := &rollout.GroupRecord{
				ID: "good#0", Run: "run", Tokens: [][]int{{1, 5, 3}, {1, 2, 4}}, Masks: [][]int{{-100, 5, 3}, {-100, 2, 4}},
				InferenceLogprobs: [][]float64{{1, -1, -1}, {1, -1, -1}}, Messages: make([][]delegate.Turn, 2),
				Scores: []float64{1, 0}, Advantages: []float64{1, -1}, SequenceRollout: []int{0, 1},
				Overrides: make([]rollout.Override, 2), GroupOverrides: rollout.GroupOverride{GroupSize: 2},
			}
			for _, g := range []*rollout.GroupRecord{empty, good} {
				if err := sink.Send(ctx, g); err != nil {
					t.Fatalf("send %s: %v", g.ID, err)
				}
			}
			if err := sink.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.out) {
				t.Errorf("output %q: want %q", out.String(), tt.out)
			}
			if tt.batchGroups == 0 {
				// A batch of 4 sequences: the good group waits in the queue.
				st, err := trainer.Status(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if st.QueueSize != tt.queued {
					t.Errorf("queue of %d groups, want %d", st.QueueSize, tt.queued)
				}
				return
			}
			quarantine := filepath.Join(t.TempDir(), "quarantine.jsonl")
			src := &Source{Client: &trainer, Estimator: reward.DrGRPO, Vocab: 272, Context: 512, Quarantine: quarantine}
			groups, err := src.Next(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(groups) != tt.queued {
				t.Fatalf("batch of %d groups, want %d", len(groups), tt.queued)
			}
			var empties, rollouts int
			for _, g := range groups {
				if g.Quarantined != "" {
					t.Errorf("group quarantined: %s", g.Quarantined)
				}
				if g.Empty {
					empties++
				}
				rollouts += len(g.Rollouts)
			}
			if empties != 1 || rollouts != 2 {
				t.Errorf("got %d empty groups and %d rollouts, want 1 and 2", empties, rollouts)
			}
			if _, err := os.Stat(quarantine); !os.IsNotExist(err) {
				t.Errorf("quarantine log: %v, want none written", err)
			}
		})
	}
}
