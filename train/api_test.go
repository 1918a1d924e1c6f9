package train

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/trajectory/atropos"
)

func TestGroupOf(t *testing.T) {
	const I = delegate.MaskIgnore
	base := func() atropos.ScoredData {
		return atropos.ScoredData{
			Tokens:            [][]int{{1, 2, 3}, {1, 2, 4}},
			Masks:             [][]int{{I, 2, 3}, {I, 2, 4}},
			Scores:            []float64{1, 0},
			InferenceLogprobs: [][]float64{{1, -0.5, -0.5}, {1, -0.5, -1}},
		}
	}
	t.Run("advantages from the scores", func(t *testing.T) {
		g, err := groupOf(base(), reward.GRPO)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Rollouts) != 2 || !(g.Rollouts[0].Advantage > 0) || !(g.Rollouts[1].Advantage < 0) || !g.Rollouts[0].HasAdvantage {
			t.Errorf("rollouts %+v: want the right one above 0, the wrong one below", g.Rollouts)
		}
		if e := g.Rollouts[0].Episodes[0]; len(e.Prompt) != 1 || e.Generated() != 2 {
			t.Errorf("episode %+v: want a 1-token prompt and 2 trained tokens", e)
		}
	})
	t.Run("advantages given, one zeroed", func(t *testing.T) {
		sd := base()
		sd.Advantages = [][]float64{{9, 0.7, 0.7}, {9, -0.7, -0.7}} // untrained positions do not count
		sd.Overrides = []map[string]any{{"set_advantage_to_zero": true}, {}}
		g, err := groupOf(sd, reward.GRPO)
		if err != nil {
			t.Fatal(err)
		}
		if g.Rollouts[0].Advantage != 0 || g.Rollouts[1].Advantage != -0.7 {
			t.Errorf("advantages %v, %v; want 0 (overridden) and -0.7", g.Rollouts[0].Advantage, g.Rollouts[1].Advantage)
		}
	})
	t.Run("what each sequence was scored from", func(t *testing.T) {
		sd := base()
		// As decoded from JSON: numbers are float64. The second sequence
		// comes from an environment that says nothing, or says it wrong.
		sd.Overrides = []map[string]any{
			{atropos.OverrideCorrect: true, atropos.OverrideDelegated: true, atropos.OverrideCalls: 2.0, atropos.OverrideTokens: 31.0, atropos.OverrideCost: 0.25},
			{atropos.OverrideCorrect: "yes", atropos.OverrideCalls: "two"},
		}
		g, err := groupOf(sd, reward.GRPO)
		if err != nil {
			t.Fatal(err)
		}
		a, b := g.Rollouts[0], g.Rollouts[1]
		want := map[string]float64{"subagent_calls": 2, "delegator_tokens": 31, "cost": 0.25}
		if !a.Correct || !a.Delegated || fmt.Sprint(a.Scalars) != fmt.Sprint(want) {
			t.Errorf("first: correct %v, delegated %v, scalars %v; want true, true, %v", a.Correct, a.Delegated, a.Scalars, want)
		}
		if b.Correct || b.Delegated || b.Scalars != nil {
			t.Errorf("second: correct %v, delegated %v, scalars %v; want nothing read", b.Correct, b.Delegated, b.Scalars)
		}
	})
	t.Run("rloo of one sequence trains nothing", func(t *testing.T) {
		sd := base()
		sd.Tokens, sd.Masks, sd.Scores, sd.InferenceLogprobs = sd.Tokens[:1], sd.Masks[:1], sd.Scores[:1], sd.InferenceLogprobs[:1]
		g, err := groupOf(sd, reward.RLOO)
		if err != nil || len(g.Rollouts) != 0 {
			t.Errorf("groupOf: %+v, %v; want an empty group", g, err)
		}
	})
	for _, tt := range []struct {
		name string
		edit func(*atropos.ScoredData)
		want string
	}{
		{"no logprobs", func(sd *atropos.ScoredData) { sd.InferenceLogprobs = nil }, "inference_logprobs"},
		{"advantages differ within a sequence", func(sd *atropos.ScoredData) { sd.Advantages = [][]float64{{0, 1, 2}, {0, 1, 1}} }, "one advantage per sequence"},
		{"a mask that is not its token", func(sd *atropos.ScoredData) { sd.Masks[1][2] = 7 }, "sequence 1: mask 7"},
		{"scores missing", func(sd *atropos.ScoredData) { sd.Scores = sd.Scores[:1] }, "1 scores"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sd := base()
			tt.edit(&sd)
			if _, err := groupOf(sd, reward.GRPO); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("groupOf: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestOrderBatch: a batch whose groups all carry batch_order is put in
// that order (stable for equal places); one where some group has none is
// left as it came.
func TestOrderBatch(t *testing.T) {
	group := func(score float64, order ...float64) atropos.ScoredData {
		sd := atropos.ScoredData{Scores: []float64{score}, GroupOverrides: map[string]any{}}
		if len(order) > 0 {
			sd.GroupOverrides["batch_order"] = order[0]
		}
		return sd
	}
	tests := []struct {
		name  string
		batch []atropos.ScoredData
		want  []float64 // the scores, in order
	}{
		{"ordered", []atropos.ScoredData{group(2, 2), group(0, 0), group(3, 3), group(1, 1)}, []float64{0, 1, 2, 3}},
		{"equal places keep their order", []atropos.ScoredData{group(1, 1), group(0, 0), group(2, 1)}, []float64{0, 1, 2}},
		{"one without a place", []atropos.ScoredData{group(2, 2), group(0), group(1, 1)}, []float64{2, 0, 1}},
		{"none", []atropos.ScoredData{group(1), group(0)}, []float64{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orderBatch(tt.batch)
			var got []float64
			for _, sd := range tt.batch {
				got = append(got, sd.Scores[0])
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("order %v, want %v", got, tt.want)
			}
		})
	}
}

// A group train --api cannot train on (a token id beyond the policy's
// vocabulary, which an API without the trainer's vocab_size passes on;
// no inference_logprobs) is quarantined: logged to quarantine.jsonl,
// counted in the step's metrics, and the step trains on the rest (a step
// of nothing but such groups is skipped) instead of failing at every
// rerun.
func TestFromAPIQuarantinesBadGroups(t *testing.T) {
	srv, err := atropos.NewInMemory(context.Background(), atropos.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// An Atropos-style trainer registered the run first, without a
	// vocab_size: the API cannot check the ids.
	first := &atropos.TrainerClient{Client: atropos.Client{URL: hs.URL}}
	if err := first.Register(ctx, atropos.Registration{BatchSize: 4, MaxTokenLen: 1024, NumSteps: 2}); err != nil {
		t.Fatal(err)
	}

	cfg := tinyConfig(t)
	cfg.RL.GroupSize, cfg.RL.ItemsPerStep, cfg.RL.Steps = 2, 2, 2
	cfg.RL.Schedule.Total = 2
	trainer := &atropos.TrainerClient{Client: atropos.Client{URL: hs.URL}, Poll: 10 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- FromAPI(ctx, cfg, trainer, nil) }()

	env := &atropos.EnvClient{Client: atropos.Client{URL: hs.URL}, Poll: 10 * time.Millisecond,
		Env: atropos.RegisterEnv{MaxTokenLength: 1024, DesiredName: "e", Weight: 1, GroupSize: 2}}
	if err := env.Register(ctx); err != nil {
		t.Fatal(err)
	}
	const I = delegate.MaskIgnore
	grp := func(a, b int, logprobs bool) atropos.ScoredData {
		sd := atropos.ScoredData{
			Tokens: [][]int{{1, a, 3}, {1, b, 4}},
			Masks:  [][]int{{I, a, 3}, {I, b, 4}},
			Scores: []float64{1, 0},
		}
		if logprobs {
			sd.InferenceLogprobs = [][]float64{{1, -2, -2}, {1, -2, -3}}
		}
		return sd
	}
	beyond := tokenizer.VocabSize + 28
	for i, g := range []atropos.ScoredData{
		grp(beyond, 5, true), grp(6, 7, false), // step 1: both quarantined
		grp(8, beyond+1, true), grp(9, 10, true), // step 2: one trained
	} {
		if _, err := env.Push(ctx, g); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("train --api: %v", err)
	}

	f, err := os.Open(filepath.Join(cfg.OutDir, rl.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := rl.ReadMetrics(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 {
		t.Fatalf("%d metrics lines, want 2", len(ms))
	}
	for i, want := range []struct {
		quarantined, groups int
		skipped             bool
	}{{2, 0, true}, {1, 1, false}} {
		m := ms[i]
		if m.QuarantinedGroups != want.quarantined || m.Groups != want.groups || m.Skipped != want.skipped {
			t.Errorf("step %d: quarantined %d, groups %d, skipped %v; want %d, %d, %v",
				m.Step, m.QuarantinedGroups, m.Groups, m.Skipped, want.quarantined, want.groups, want.skipped)
		}
	}
	if ms[1].TrainedTokens == 0 {
		t.Error("step 2 trained no token: want the good group trained")
	}

	b, err := os.ReadFile(filepath.Join(cfg.OutDir, QuarantineFile))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var rec QuarantineRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("quarantine line %q: %v", line, err)
		}
		if rec.Version != QuarantineVersion || len(rec.Data.Tokens) != 2 {
			t.Errorf("record %+v: want version %d and the group's data", rec, QuarantineVersion)
		}
		got = append(got, fmt.Sprintf("%d %s", rec.Step, rec.Reason))
	}
	want := []string{
		fmt.Sprintf("1 sequence 0: token 1 is id %d, outside the policy's vocabulary [0,%d)", beyond, tokenizer.VocabSize),
		"1 2 sequences but 0 inference_logprobs",
		fmt.Sprintf("2 sequence 1: token 1 is id %d, outside the policy's vocabulary [0,%d)", beyond+1, tokenizer.VocabSize),
	}
	if len(got) != len(want) {
		t.Fatalf("quarantined %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("record %d: %q, want it to start %q", i, got[i], want[i])
		}
	}
}
