package train

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/world"
)

// TestInProcessGroupsAreProcessGroups compares a step's groups two ways.
// One is the in-process trainer's, from the runner's source. The other is
// process's, rollout.Run writing groups.jsonl as a trajectory API gets it.
// With the same seeds, policy and scorer, they must be the same groups:
// the same rollouts, rewards and advantages, and training sequences with
// the same tokens, masks and logprobs. The shipped models sample at the
// trainer's temperature.
func TestInProcessGroupsAreProcessGroups(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OutDir = t.TempDir()
	cfg.RL.GroupSize, cfg.RL.ItemsPerStep = 4, 3
	r, err := newRunner(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	rcfg := cfg.RL
	rcfg.PolicyRole, rcfg.Seed = RoleDelegator, cfg.Seed
	src, err := r.source(context.Background(), rcfg)
	if err != nil {
		t.Fatal(err)
	}
	s := src.(*rollouts)
	const step = 2
	groups, err := s.Next(context.Background(), step)
	if err != nil {
		t.Fatal(err)
	}

	var problems []*world.Problem
	for _, it := range rl.NewItems(rcfg.Seed, len(r.trainSet), rcfg.ItemsPerStep).Step(step) {
		problems = append(problems, r.trainSet[it])
	}
	baseline, err := r.single(r.delegatorAgent(r.pretrained))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cfg.OutDir, "process")
	pcfg := rollout.DefaultConfig()
	pcfg.GroupSize, pcfg.Concurrency, pcfg.Estimator, pcfg.KeepTies = rcfg.GroupSize, 3, string(rcfg.Estimator), true
	pcfg.TrainRoles, pcfg.OutDir = []string{RoleDelegator}, dir
	sum, err := rollout.Run(context.Background(), pcfg, tasksOf(problems), baseline, s.policies(step, problems), s.scorer, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, rollout.GroupsFile))
	if err != nil {
		t.Fatal(err)
	}
	records := map[int]*rollout.GroupRecord{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		rec, err := rollout.DecodeGroup([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		records[rec.Item] = rec
	}
	if len(records) != len(groups) || sum.RolloutsFailed != 0 {
		t.Fatalf("process wrote %d groups (%d rollouts failed), the trainer got %d", len(records), sum.RolloutsFailed, len(groups))
	}
	var signal int
	for i, g := range groups {
		rec := records[i]
		if rec == nil || len(rec.Rollouts) != len(g.Rollouts) {
			t.Fatalf("item %d: process's group %+v, the trainer's has %d rollouts", i, rec, len(g.Rollouts))
		}
		for j, m := range rec.Rollouts {
			ro := g.Rollouts[j]
			if ro.Reward != m.Reward || ro.Advantage != m.Advantage || !ro.HasAdvantage {
				t.Errorf("item %d rollout %d: reward %v advantage %v, process's %v and %v", i, m.Index, ro.Reward, ro.Advantage, m.Reward, m.Advantage)
			}
			if m.Advantage != 0 {
				signal++
			}
			var eps []rl.Episode
			for q, k := range rec.SequenceRollout {
				if k != m.Index {
					continue
				}
				e, err := rl.FromTokens(rec.Tokens[q], rec.Masks[q], rec.InferenceLogprobs[q])
				if err != nil {
					t.Fatalf("item %d sequence %d: %v", i, q, err)
				}
				if len(e.Completion) > 0 {
					eps = append(eps, e)
				}
			}
			if len(eps) != len(ro.Episodes) {
				t.Fatalf("item %d rollout %d: %d sequences, process's %d", i, m.Index, len(ro.Episodes), len(eps))
			}
			for q, e := range eps {
				got := ro.Episodes[q]
				if !slices.Equal(got.Prompt, e.Prompt) || !slices.Equal(got.Completion, e.Completion) ||
					!slices.Equal(got.Masked, e.Masked) || !sameLogprobs(got.Behaviour, e.Behaviour) {
					t.Errorf("item %d rollout %d sequence %d differs from process's", i, m.Index, q)
				}
			}
		}
	}
	if signal == 0 {
		t.Error("every advantage is 0: the case tests too little")
	}
}

// sameLogprobs compares logprobs, NaN (a masked token) equal to NaN.
func sameLogprobs(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return x == y || (x != x && y != y) })
}

// TestRolloutsScoreAtTheirStep checks that the scorer learns the step it
// scores rollouts for, so an annealed reward anneals. The same items at
// another step are scored at that step.
func TestRolloutsScoreAtTheirStep(t *testing.T) {
	ctx := context.Background()
	cfg := bothConfig(t, 1)
	r, err := newRunner(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	src, err := r.source(ctx, r.trainerConfigs()[0])
	if err != nil {
		t.Fatal(err)
	}
	s := src.(*rollouts)
	for _, step := range []int{1, 7} {
		groups, _, _, err := s.play(ctx, step)
		if err != nil {
			t.Fatal(err)
		}
		var scored int
		for i, g := range groups {
			for _, res := range g.Rollouts {
				if res.Score == nil || res.Score.Inputs == nil {
					continue
				}
				scored++
				if got := res.Score.Inputs.Step; got != step {
					t.Errorf("step %d item %d rollout %d: scored at step %d", step, i, res.Index, got)
				}
			}
		}
		if scored == 0 {
			t.Fatalf("step %d: no rollout scored", step)
		}
	}
	if rs := s.scorer.(*rollout.RewardScorer); rs.Step != 0 {
		t.Errorf("the source's own scorer moved to step %d", rs.Step)
	}
}
