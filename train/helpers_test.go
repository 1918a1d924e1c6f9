package train

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/tokenizer"
)

// tinyCheckpoint writes a randomly initialised tiny model to dir/name.
func tinyCheckpoint(t *testing.T, dir, name string, seed uint64) string {
	t.Helper()
	cfg := nn.Config{Vocab: tokenizer.VocabSize, Dim: 16, Layers: 1, Heads: 2, KVHeads: 1, Hidden: 32, Context: 1024}.WithDefaults()
	p, err := nn.Alloc(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Init(seed)
	path := filepath.Join(dir, name)
	if err := nn.Save(path, p, map[string]string{"what": name}); err != nil {
		t.Fatal(err)
	}
	return path
}

// tinyConfig is a run of a few quick steps on tiny random models.
func tinyConfig(t *testing.T) Config {
	t.Helper()
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Solver = tinyCheckpoint(t, dir, "solver", 1)
	cfg.Delegator = tinyCheckpoint(t, dir, "delegator", 2)
	cfg.OutDir = filepath.Join(dir, "run")
	cfg.TrainTime = time.Minute
	cfg.RL.GroupSize, cfg.RL.ItemsPerStep, cfg.RL.Steps = 4, 2, 3
	cfg.RL.Schedule.Warmup, cfg.RL.Schedule.Total = 0, 3
	cfg.RL.Schedule.MaxLR, cfg.RL.Schedule.MinLR = 1e-2, 1e-2
	cfg.RL.MaxNewTokens = 6
	cfg.RL.Concurrency = 8
	cfg.RL.CheckpointEvery = 1
	cfg.RL.LogprobCheckEvery = 1
	cfg.TrainProblems = 16
	cfg.EvalItems = 6
	cfg.RuleItems = 3
	cfg.EvalConcurrency = 6
	cfg.MaxTurns = 2
	return cfg
}
