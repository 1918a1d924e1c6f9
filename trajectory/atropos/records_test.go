package atropos

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
)

// TestRecordGroupIsTheAPIsGroup checks that a group record converted in
// process is the group a trainer gets for it through the API: pushed as
// process --push pushes it, fetched and converted by Source. A record
// with a token beyond the policy's vocabulary is refused by both.
func TestRecordGroupIsTheAPIsGroup(t *testing.T) {
	const I = delegate.MaskIgnore
	correct := true
	rec := &rollout.GroupRecord{Version: rollout.GroupVersion, ID: "t1#0123456789abcdef.delegator", TaskID: "t1", Strategy: "gateway", Run: "run",
		GroupOverrides: rollout.GroupOverride{GroupSize: 2}, PolicyVersion: 1,
		Rollouts: []rollout.Member{{ID: "a", Index: 0, Reward: 1, Advantage: 1, Outcome: &rollout.Outcome{Correct: &correct, Calls: 1, Tokens: 2}},
			{ID: "b", Index: 1, Reward: 0, Advantage: -1, Outcome: &rollout.Outcome{Tokens: 2}}},
		Tokens: [][]int{{1, 5, 3}, {1, 6, 4}}, Masks: [][]int{{I, 5, 3}, {I, 6, 4}},
		InferenceLogprobs: [][]float64{{1, -2, -2}, {1, -2, -3}}, Messages: [][]delegate.Turn{{}, {}},
		Scores: []float64{1, 0}, Advantages: []float64{1, -1}, SequenceRollout: []int{0, 1}, NoTokens: []string{"", ""},
		Overrides: []rollout.Override{{}, {}}}
	const vocab, ctxLen = 100, 64
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := NewInMemory(ctx, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	trainer := DefaultTrainerClient()
	trainer.URL, trainer.Poll = hs.URL, 10*time.Millisecond
	if err := trainer.Register(ctx, Registration{BatchSize: 2, MaxTokenLen: ctxLen, NumSteps: 3, StartingStep: 1}); err != nil {
		t.Fatal(err)
	}
	// The trainer asks for its batch first: an environment registers once
	// a trainer has started.
	src := &Source{Client: &trainer, Estimator: reward.GRPO, Vocab: vocab, Context: ctxLen, Quarantine: filepath.Join(t.TempDir(), "q.jsonl")}
	type batch struct {
		groups []rl.Group
		err    error
	}
	fetched := make(chan batch, 1)
	go func() {
		g, err := src.Next(ctx, 2)
		fetched <- batch{g, err}
	}()
	env := DefaultEnvClient()
	env.URL, env.Poll = hs.URL, 10*time.Millisecond
	env.Env = RegisterEnv{MaxTokenLength: ctxLen, DesiredName: "gateway", Weight: 1, GroupSize: 2}
	if err := env.Register(ctx); err != nil {
		t.Fatal(err)
	}
	sd, err := ScoredDataOf(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Push(ctx, sd); err != nil {
		t.Fatal(err)
	}
	b := <-fetched
	if b.err != nil {
		t.Fatal(b.err)
	}
	want := b.groups
	if len(want) != 1 {
		t.Fatalf("the API's batch holds %d groups, want 1", len(want))
	}
	got, gotSD, err := RecordGroup(rec, 2, reward.GRPO, reward.CreditTask, vocab, ctxLen)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want[0]) {
		t.Errorf("in process: %+v\nthrough the API: %+v", got, want[0])
	}
	if got.Staleness != 0 || len(got.Rollouts) != 2 || got.Rollouts[0].Advantage != 1 || !got.Rollouts[0].Correct || !got.Rollouts[0].Delegated {
		t.Errorf("group %+v: want on policy at step 2, advantages 1 and -1, the first right and delegating", got)
	}
	if !reflect.DeepEqual(gotSD.Tokens, sd.Tokens) {
		t.Errorf("the converted ScoredData holds tokens %v, want %v", gotSD.Tokens, sd.Tokens)
	}
	if _, _, err := RecordGroup(rec, 2, reward.GRPO, reward.CreditTask, 5, ctxLen); err == nil {
		t.Error("a token beyond the vocabulary: no error")
	}
}
