package train

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/trajectory/atropos"
)

// A group train --api cannot train on is quarantined. Such a group holds a
// token id beyond the policy's vocabulary, which an API without the
// trainer's vocab_size passes on, or has no inference_logprobs. It is
// logged to quarantine.jsonl and counted in the step's metrics. The step
// trains on the rest instead of failing at every rerun; a step of nothing
// but such groups is skipped.
func TestFromAPIQuarantinesBadGroups(t *testing.T) {
	srv, err := atropos.NewInMemory(context.Background(), atropos.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// An Atropos-style trainer registered the run first, without a
	// vocab_size: the API cannot check the ids.
	first := atropos.DefaultTrainerClient()
	first.URL = hs.URL
	if err := first.Register(ctx, atropos.Registration{BatchSize: 4, MaxTokenLen: 1024, NumSteps: 2}); err != nil {
		t.Fatal(err)
	}

	cfg := tinyConfig(t)
	cfg.RL.GroupSize, cfg.RL.ItemsPerStep, cfg.RL.Steps = 2, 2, 2
	cfg.RL.Schedule.Total = 2
	trainer := atropos.DefaultTrainerClient()
	trainer.URL, trainer.Poll = hs.URL, 10*time.Millisecond
	done := make(chan error, 1)
	go func() { done <- FromAPI(ctx, cfg, &trainer, nil) }()

	env := atropos.DefaultEnvClient()
	env.URL, env.Poll = hs.URL, 10*time.Millisecond
	env.Env = atropos.RegisterEnv{MaxTokenLength: 1024, DesiredName: "e", Weight: 1, GroupSize: 2}
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
		var rec atropos.QuarantineRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("quarantine line %q: %v", line, err)
		}
		if rec.Version != atropos.QuarantineVersion || len(rec.Data.Tokens) != 2 {
			t.Errorf("record %+v: want version %d and the group's data", rec, atropos.QuarantineVersion)
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
