package rl

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate/nn"
)

// StateVersion is the format version of a checkpoint's state.json.
//
// Version history:
//
//	1  step, optimizer steps, model config, run config (and, from earlier
//	   builds, the item sampler's state, ignored now: Items replays it).
const StateVersion = 1

// A checkpoint is the directory OutDir/checkpoint holding
//
//	policy/      the policy's parameters (nn.Save)
//	adam_m/      AdamW's first moments, laid out like the parameters
//	adam_v/      AdamW's second moments
//	state.json   runState
//
// It is written whole under checkpoint.tmp and then renamed into place (the
// previous one moved to checkpoint.old first and removed after), so a
// crash leaves either the old or the new checkpoint, never a mix; a loader
// that finds only checkpoint.old uses it.
const (
	ckptDir    = "checkpoint"
	ckptOld    = ckptDir + ".old" // nn.ReplaceDir's previous copy
	ckptState  = "state.json"
	ckptPolicy = "policy"
	ckptM      = "adam_m"
	ckptV      = "adam_v"
)

// runState is state.json.
type runState struct {
	Version   int       `json:"version"`
	Step      int       `json:"step"`       // steps completed
	AdamSteps int       `json:"adam_steps"` // optimizer updates taken
	Model     nn.Config `json:"model"`
	Config    Config    `json:"config"` // the run's config, for the record
}

// CheckpointDir returns the directory of the checkpoint of a run in outDir.
func CheckpointDir(outDir string) string { return filepath.Join(outDir, ckptDir) }

// save writes a checkpoint of the current step (nn.ReplaceDir: the old
// one or the new one survives a crash, never a mix).
func (t *Trainer) save() error {
	err := nn.ReplaceDir(filepath.Join(t.cfg.OutDir, ckptDir), func(tmp string) error {
		meta := map[string]string{"rl_step": strconv.Itoa(t.step)}
		// The parts at once: their writes and syncs overlap, which on a
		// trainer checkpointing every step (for a policy server following
		// it) takes about half the time off each step's hand-off.
		var eg errgroup.Group
		for _, x := range []struct {
			name string
			p    *nn.Params
		}{{ckptPolicy, t.l.policy}, {ckptM, t.l.opt.M}, {ckptV, t.l.opt.V}} {
			eg.Go(func() error { return nn.Save(filepath.Join(tmp, x.name), x.p, meta) })
		}
		eg.Go(func() error {
			st := runState{Version: StateVersion, Step: t.step, AdamSteps: t.l.opt.Steps, Model: t.l.policy.Config, Config: t.cfg}
			b, err := json.MarshalIndent(st, "", "  ")
			if err != nil {
				return err
			}
			if err := os.MkdirAll(tmp, 0o755); err != nil {
				return err
			}
			return writeSynced(filepath.Join(tmp, ckptState), b)
		})
		return eg.Wait()
	})
	if err != nil {
		return fmt.Errorf("save checkpoint step %d: %w", t.step, err)
	}
	return nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return errors.Join(err, f.Sync(), f.Close())
}

// resume loads OutDir's checkpoint, if any, into the trainer: the
// parameters (in place, so the policy model sees them), the moments, the
// step. No checkpoint is a fresh start.
func (t *Trainer) resume() error {
	dir, ok := nn.CurrentDir(filepath.Join(t.cfg.OutDir, ckptDir))
	if !ok {
		return nil // nothing to resume
	}
	b, err := os.ReadFile(filepath.Join(dir, ckptState))
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	var st runState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("resume %s: %w", filepath.Join(dir, ckptState), err)
	}
	if st.Version != StateVersion {
		return fmt.Errorf("resume %s: state version %d, this build reads %d; start a new run in another out_dir", dir, st.Version, StateVersion)
	}
	if st.Model != t.l.policy.Config {
		return fmt.Errorf("resume %s: checkpoint model config %+v differs from the policy's %+v", dir, st.Model, t.l.policy.Config)
	}
	if st.Step < 0 || st.AdamSteps < 0 {
		return fmt.Errorf("resume %s: negative step %d or optimizer steps %d", dir, st.Step, st.AdamSteps)
	}
	dst := []*nn.Params{t.l.policy, t.l.opt.M, t.l.opt.V}
	loaded := make([]*nn.Params, len(dst))
	for i, name := range []string{ckptPolicy, ckptM, ckptV} {
		p, meta, err := nn.Load(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if p.Config != t.l.policy.Config {
			return fmt.Errorf("resume %s: model config %+v differs from the policy's %+v", filepath.Join(dir, name), p.Config, t.l.policy.Config)
		}
		if s := meta["rl_step"]; s != strconv.Itoa(st.Step) {
			return fmt.Errorf("resume %s: written at step %q, state.json says %d", filepath.Join(dir, name), s, st.Step)
		}
		loaded[i] = p
	}
	for i, p := range loaded {
		copy(dst[i].Data, p.Data)
	}
	t.l.opt.Steps = st.AdamSteps
	t.step = st.Step
	return nil
}
