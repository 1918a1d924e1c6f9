package rl

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/delegatelab/delegate/nn/train"
)

// A checkpoint is the directory OutDir/checkpoint, holding a training state of train.SaveState.
// policy/ holds the policy's parameters, and state.json the step and the run's config.
// A crash while saving leaves the old or the new checkpoint, never a mix.
// A loader that finds only checkpoint.old uses it.
const ckptDir = "checkpoint"

// CheckpointDir returns the directory of the checkpoint of a run in outDir.
func CheckpointDir(outDir string) string { return filepath.Join(outDir, ckptDir) }

// save writes a checkpoint of the current step.
func (t *Trainer) save() error {
	cfg, err := json.Marshal(t.cfg)
	if err != nil {
		return fmt.Errorf("save checkpoint step %d: %w", t.step, err)
	}
	st := train.State{Params: t.l.policy, Opt: t.l.opt, Step: t.step, Config: cfg}
	if err := train.SaveState(CheckpointDir(t.cfg.OutDir), st); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

// resume loads OutDir's checkpoint, if any, into the trainer: parameters, moments and step.
// Parameters load in place, so the policy model sees them.
// No checkpoint is a fresh start.
func (t *Trainer) resume() error {
	st, err := train.LoadState(CheckpointDir(t.cfg.OutDir), t.l.policy.Config)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if st == nil {
		return nil // nothing to resume
	}
	copy(t.l.policy.Data, st.Params.Data)
	copy(t.l.opt.M.Data, st.Opt.M.Data)
	copy(t.l.opt.V.Data, st.Opt.V.Data)
	t.l.opt.Steps = st.Opt.Steps
	t.step = st.Step
	return nil
}
