package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/trajectory/atropos"
)

// TestTrainAPIOversizedGroup pushes a route group with more sequences than
// the environment's group_size. One rollout has two delegator samples, as
// after a malformed tool call. The API queues it at once
// as two packs, and train --api --credit role takes a step on it rather
// than waiting for ever.
func TestTrainAPIOversizedGroup(t *testing.T) {
	endToEnd(t)
	dir := t.TempDir()
	models, err := filepath.Abs("../../models")
	if err != nil {
		t.Fatal(err)
	}
	router := filepath.Join(models, "router")
	doc := `preset: world
models:
  delegator: {kind: local, checkpoint: ` + router + `, price: {input: 1, cached_input: 0.1, output: 5}}
  solver: {kind: local, checkpoint: ` + filepath.Join(models, "solver") + `, price: {input: 0.2, cached_input: 0.02, output: 1}}
roles: {default: delegator, subagent: solver, weak: solver}
strategy:
  single: {temperature: 0}
  strong: {temperature: 1}
`
	cfg := filepath.Join(dir, "world.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	rollouts := filepath.Join(dir, "rollouts")
	if got, err := execute(t, testEnv, "process", "--config", cfg, "--dataset", "world", "-n", "1", "-g", "4",
		"--strategy", "route", "--keep-ties", "--no-baseline", "--reward", "world", "--logprobs", "--out", rollouts, "--progress", "none"); err != nil {
		t.Fatalf("process: %v\n%s", err, got)
	}
	var rec *rollout.GroupRecord
	for _, r := range readGroupRecords(t, filepath.Join(rollouts, "groups.jsonl")) {
		rec = r
	}
	if rec == nil || len(rec.Rollouts) != 4 || len(rec.Episodes) != 4 {
		t.Fatalf("process wrote no group of 4 rollouts with episodes: %+v", rec)
	}
	// The shipped router repairs a malformed call in this group's first
	// rollout; should a retrained one not, the test gives it a repair.
	if len(rec.Tokens) == 4 {
		addSecondSample(t, rec)
	}
	size := len(rec.Tokens)
	if size <= 4 || size > 8 {
		t.Fatalf("group of %d sequences, want 5 to 8", size)
	}

	url := startAPI(t)
	trainOut := filepath.Join(dir, "train")
	trained := make(chan error, 1)
	var trainLog string
	go func() {
		var err error
		// A batch of 8 sequences: the group of 5 counts as two packs of 4.
		trainLog, err = execute(t, testEnv, "train", "--api", url, "--credit", "role", "--delegator", router,
			"--steps", "1", "--items", "2", "--group", "4", "--out", trainOut)
		trained <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := atropos.NewPusher(ctx, io.Discard, atropos.PushConfig{URL: url, Name: "world", Weight: 1, MaxTokenLen: 512, GroupSize: 4, OffPolicy: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Send(ctx, rec); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-trained:
		if err != nil {
			t.Fatalf("train --api --credit role: %v\n%s", err, trainLog)
		}
	case <-ctx.Done():
		t.Fatalf("train --api took no step on a group of %d sequences with group_size 4", size)
	}
	ms := readMetrics(t, filepath.Join(trainOut, "metrics.jsonl"))
	if len(ms) != 1 || ms[0].Groups != 1 || ms[0].QuarantinedGroups != 0 || ms[0].Sequences != size {
		t.Fatalf("trainer's metrics %+v, want one step of one group of %d sequences\n%s", ms, size, trainLog)
	}
}

// addSecondSample gives the rollout of g's first sequence a second
// delegator sample, a copy of its first. A repaired malformed tool call
// does so. g then holds five sequences for four rollouts.
func addSecondSample(t *testing.T, g *rollout.GroupRecord) {
	t.Helper()
	r := g.SequenceRollout[0]
	k := slices.IndexFunc(g.Rollouts, func(m rollout.Member) bool { return m.Index == r })
	if k < 0 || len(g.Episodes[k].Samples) == 0 || !g.Episodes[k].Samples[0].Trained {
		t.Fatalf("the first sequence's rollout %d has no trained sample", r)
	}
	g.Episodes[k].Samples = dupAt(g.Episodes[k].Samples, 0)
	g.Tokens, g.Masks, g.InferenceLogprobs = dupAt(g.Tokens, 0), dupAt(g.Masks, 0), dupAt(g.InferenceLogprobs, 0)
	g.Messages, g.Scores, g.Advantages = dupAt(g.Messages, 0), dupAt(g.Scores, 0), dupAt(g.Advantages, 0)
	g.SequenceRollout, g.NoTokens, g.Overrides = dupAt(g.SequenceRollout, 0), dupAt(g.NoTokens, 0), dupAt(g.Overrides, 0)
}

// dupAt inserts a copy of s[i] after it. A slice too short is left as it
// is: an optional per-sequence field the record leaves out.
func dupAt[T any](s []T, i int) []T {
	if i >= len(s) {
		return s
	}
	return slices.Insert(s, i+1, s[i])
}
