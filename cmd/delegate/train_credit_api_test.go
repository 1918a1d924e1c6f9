package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/trajectory/atropos"
)

// TestTrainAPIRoleCredit pushes the shipped models' route rollouts to
// delegate api, on embedded NATS, with process --push. train --api
// --credit role trains on them. Its batches, read again by step through
// the trainer's source, give each sequence process's tokens and role and
// the advantage that train's in-process rule (train.RoleCredits) gives
// its sample in process's records, exactly. Tool calls are strict, so
// that every rollout has one delegator sample: without, a malformed call
// starts a second one, and the group's five sequences count as two packs
// of 4, over this trainer's batch of 4, which the API refuses
// (TestTrainAPIOversizedGroup trains on such a group, with a batch of 8).
func TestTrainAPIRoleCredit(t *testing.T) {
	endToEnd(t)
	url := startAPI(t)
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
  strict_tool_calls: true
  single: {temperature: 0}
  strong: {temperature: 1}
`
	cfg := filepath.Join(dir, "world.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	const steps = 3
	trainOut := filepath.Join(dir, "train")
	trained := make(chan error, 1)
	var trainLog string
	go func() {
		var err error
		trainLog, err = execute(t, testEnv, "train", "--api", url, "--credit", "role", "--delegator", router, "--strict-tool-calls",
			"--steps", "3", "--items", "1", "--group", "4", "--out", trainOut)
		trained <- err
	}()
	rollouts := filepath.Join(dir, "rollouts")
	got, err := execute(t, testEnv, "process", "--config", cfg, "--dataset", "world", "-n", "3", "-g", "4",
		"--strategy", "route", "--keep-ties", "--no-baseline", "--reward", "world",
		"--out", rollouts, "--progress", "none", "--push", url, "--push-offpolicy", "8")
	if err != nil {
		t.Fatalf("process --push: %v\n%s", err, got)
	}
	select {
	case err := <-trained:
		if err != nil {
			t.Fatalf("train --api --credit role: %v\n%s", err, trainLog)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("train --api did not finish %d steps; process said:\n%s", steps, got)
	}
	if ms := readMetrics(t, filepath.Join(trainOut, "metrics.jsonl")); len(ms) != steps {
		t.Fatalf("%d steps in the trainer's metrics, want %d\n%s", len(ms), steps, trainLog)
	}

	records := readGroupRecords(t, filepath.Join(rollouts, "groups.jsonl"))
	p, _, err := nn.Load(router)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := atropos.DefaultTrainerClient()
	client.URL, client.Poll = url, 50*time.Millisecond
	src := &atropos.Source{Client: &client, Estimator: reward.GRPO, Credit: reward.CreditRole,
		Vocab: p.Config.Vocab, Context: p.Config.Context, Quarantine: filepath.Join(dir, "quarantine.jsonl")}
	compared, nonzero := 0, 0
	for step := 1; step <= steps; step++ {
		client.Last = step - 1
		b, err := client.Next(ctx)
		if err != nil {
			t.Fatalf("batch of step %d: %v", step, err)
		}
		groups, err := src.Next(ctx, step)
		if err != nil {
			t.Fatalf("the trainer's groups of step %d: %v", step, err)
		}
		if len(b.Batch) != 1 || len(groups) != 1 {
			t.Fatalf("step %d: %d groups in the batch, %d from the source; want 1", step, len(b.Batch), len(groups))
		}
		sd, g := b.Batch[0], groups[0]
		id, _ := sd.GroupOverrides["group_id"].(string)
		_, gid, _ := strings.Cut(id, "/")
		rec := records[gid]
		if rec == nil {
			t.Fatalf("step %d: group %q is none process wrote", step, id)
		}
		credits, err := train.RoleCredits(reward.GRPO, rec)
		if err != nil {
			t.Fatal(err)
		}
		var want []float64
		var roles []string
		for _, e := range rec.Episodes {
			for _, sm := range e.Samples {
				roles = append(roles, sm.Role)
			}
		}
		for _, cs := range credits {
			for _, c := range cs {
				want = append(want, c.Advantage)
			}
		}
		if g.Quarantined != "" || len(g.Rollouts) != len(want) || len(sd.Tokens) != len(rec.Tokens) {
			t.Fatalf("group %s: %d sequences from the trainer (quarantined %q), %d samples and %d sequences in process",
				gid, len(g.Rollouts), g.Quarantined, len(want), len(rec.Tokens))
		}
		for i, ro := range g.Rollouts {
			ov := atropos.ReadSequenceOverride(sd.Overrides[i])
			if !slices.Equal(sd.Tokens[i], rec.Tokens[i]) || ov.Role != roles[i] {
				t.Errorf("group %s sequence %d: role %q and tokens not process's (role %q)", gid, i, ov.Role, roles[i])
			}
			if ro.Advantage != want[i] || ro.Reward != rec.Scores[i] {
				t.Errorf("group %s sequence %d: advantage %v reward %v from the trainer, %v and %v in process", gid, i, ro.Advantage, ro.Reward, want[i], rec.Scores[i])
			}
			compared++
			if want[i] != 0 {
				nonzero++
			}
		}
	}
	if compared == 0 || nonzero == 0 {
		t.Errorf("%d sequences compared, %d with an advantage other than 0: the comparison says too little", compared, nonzero)
	}
}

// TestTrainProcessesPassCredit: train --processes hands --credit role to
// its trainer, which credits the environments' groups per role.
func TestTrainProcessesPassCredit(t *testing.T) {
	cmd := newTrainCmd(testEnv, slog.New(slog.DiscardHandler))
	if err := cmd.Flags().Parse([]string{"--processes", "2", "--credit", "role"}); err != nil {
		t.Fatal(err)
	}
	top, err := newTopology(cmd.Flags(), train.DefaultConfig(), 2, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range top.children(t.TempDir(), "127.0.0.1:1", "127.0.0.1:2", nil) {
		if c.name != "trainer" {
			continue
		}
		if args := strings.Join(c.args, " "); !strings.Contains(args, "--credit role") {
			t.Errorf("the trainer's command line %q lacks --credit role", args)
		}
		return
	}
	t.Error("no trainer among the children")
}
