package train

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

// StateVersion is the format version of a training state's state.json.
//
// Version history:
//
//	0  pretrain's SFT state: weights/, adam_m/, adam_v/ and no state.json;
//	   each part's metadata holds sft_step and sft_steps. Read, not written.
//	1  rl's checkpoint: policy/, adam_m/, adam_v/, state.json. Read, not written.
//	2  version 1 shared by rl and SFT, with the schedule's length ("total").
const StateVersion = 2

// A training state is a directory holding four parts.
//
//	policy/      the parameters (nn.Save)
//	adam_m/      AdamW's first moments, laid out like the parameters
//	adam_v/      AdamW's second moments
//	state.json   stateFile
//
// Each part's metadata carries the step under stepMeta, which the loader
// checks against state.json. nn.ReplaceDir writes it whole and swaps it in,
// so a crash leaves the old or the new state, never a mix.
const (
	stateFileName = "state.json"
	statePolicy   = "policy"
	stateM        = "adam_m"
	stateV        = "adam_v"
	// stepMeta is named for its first writer. local's reloader reads it
	// from policy/ as the version of the weights it serves.
	stepMeta = "rl_step"

	// Version 0's names.
	v0Weights  = "weights"
	v0StepMeta = "sft_step"
	v0Steps    = "sft_steps"
)

// State is a training run's resumable state.
type State struct {
	Params *nn.Params
	Opt    *AdamState // moments and optimizer steps
	Step   int        // the caller's steps completed
	// Total is the schedule's length when the caller has fixed it, 0
	// otherwise.
	Total int
	// Config is the caller's config, kept for the record.
	Config json.RawMessage
}

// stateFile is state.json.
type stateFile struct {
	Version   int             `json:"version"`
	Step      int             `json:"step"`
	AdamSteps int             `json:"adam_steps"`
	Total     int             `json:"total,omitempty"`
	Model     nn.Config       `json:"model"`
	Config    json.RawMessage `json:"config,omitempty"`
}

// SaveState writes s to dir, replacing what is there.
func SaveState(dir string, s State) error {
	err := nn.ReplaceDir(dir, func(tmp string) error {
		meta := map[string]string{stepMeta: strconv.Itoa(s.Step)}
		// The parts at once: their writes and syncs overlap, which saves
		// time on a trainer saving every step.
		var eg errgroup.Group
		for _, x := range []struct {
			name string
			p    *nn.Params
		}{{statePolicy, s.Params}, {stateM, s.Opt.M}, {stateV, s.Opt.V}} {
			eg.Go(func() error { return nn.Save(filepath.Join(tmp, x.name), x.p, meta) })
		}
		eg.Go(func() error {
			f := stateFile{Version: StateVersion, Step: s.Step, AdamSteps: s.Opt.Steps, Total: s.Total, Model: s.Params.Config, Config: s.Config}
			b, err := json.MarshalIndent(f, "", "  ")
			if err != nil {
				return err
			}
			if err := os.MkdirAll(tmp, 0o755); err != nil {
				return err
			}
			return writeSynced(filepath.Join(tmp, stateFileName), b)
		})
		return eg.Wait()
	})
	if err != nil {
		return fmt.Errorf("save training state %s step %d: %w", dir, s.Step, err)
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

// LoadState reads the training state in dir, or in the previous copy a
// crashed save left. It returns nil and no error when there is none. A
// state of another model shape, another version or with parts of
// different steps is an error naming the file.
func LoadState(dir string, want nn.Config) (*State, error) {
	d, ok := nn.CurrentDir(dir)
	if !ok {
		return nil, nil
	}
	path := filepath.Join(d, stateFileName)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if _, err := os.Stat(filepath.Join(d, v0Weights)); err == nil {
			return loadV0(d, want)
		}
		if _, err := os.Stat(filepath.Join(d, statePolicy)); err == nil {
			return nil, fmt.Errorf("load training state: %s is missing", path)
		}
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("load training state: %w", err)
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("load training state %s: %w", path, err)
	}
	if f.Version != 1 && f.Version != StateVersion {
		return nil, fmt.Errorf("load training state %s: state version %d, this build reads 0 to %d; start afresh in another directory", path, f.Version, StateVersion)
	}
	if f.Model != want {
		return nil, fmt.Errorf("load training state %s: model config %+v differs from the run's %+v", path, f.Model, want)
	}
	if f.Step < 0 || f.AdamSteps < 0 || f.Total < 0 {
		return nil, fmt.Errorf("load training state %s: negative step %d, optimizer steps %d or total %d", path, f.Step, f.AdamSteps, f.Total)
	}
	params, opt, err := loadParts(d, want, [3]string{statePolicy, stateM, stateV}, func(meta map[string]string) error {
		if s := meta[stepMeta]; s != strconv.Itoa(f.Step) {
			return fmt.Errorf("written at step %q, state.json says %d", s, f.Step)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	opt.Steps = f.AdamSteps
	return &State{Params: params, Opt: opt, Step: f.Step, Total: f.Total, Config: f.Config}, nil
}

// loadV0 reads version 0, the SFT state of earlier builds, whose step is
// also its optimizer steps.
func loadV0(d string, want nn.Config) (*State, error) {
	var step [3]int
	var total int
	i := 0
	params, opt, err := loadParts(d, want, [3]string{v0Weights, stateM, stateV}, func(meta map[string]string) error {
		var err error
		if step[i], err = strconv.Atoi(meta[v0StepMeta]); err != nil || step[i] < 0 {
			return fmt.Errorf("version 0 state: bad %s %q", v0StepMeta, meta[v0StepMeta])
		}
		if total, err = strconv.Atoi(meta[v0Steps]); err != nil || total < 0 {
			return fmt.Errorf("version 0 state: bad %s %q", v0Steps, meta[v0Steps])
		}
		i++
		return nil
	})
	if err != nil {
		return nil, err
	}
	if step[0] != step[1] || step[0] != step[2] {
		return nil, fmt.Errorf("load training state %s: weights, moments at steps %v disagree (an interrupted save); remove the directory to start afresh", d, step)
	}
	opt.Steps = step[0]
	return &State{Params: params, Opt: opt, Step: step[0], Total: total}, nil
}

// loadParts loads the parameters and moments named in names from d,
// checking each part's shape and, with check, its metadata.
func loadParts(d string, want nn.Config, names [3]string, check func(meta map[string]string) error) (*nn.Params, *AdamState, error) {
	var loaded [3]*nn.Params
	for i, name := range names {
		path := filepath.Join(d, name)
		p, meta, err := nn.Load(path)
		if err != nil {
			return nil, nil, fmt.Errorf("load training state: %w", err)
		}
		if p.Config != want {
			return nil, nil, fmt.Errorf("load training state %s: model config %+v differs from the run's %+v; remove the directory to start afresh", path, p.Config, want)
		}
		if err := check(meta); err != nil {
			return nil, nil, fmt.Errorf("load training state %s: %w", path, err)
		}
		loaded[i] = p
	}
	opt, err := NewAdamState(want)
	if err != nil {
		return nil, nil, fmt.Errorf("load training state %s: %w", d, err)
	}
	copy(opt.M.Data, loaded[1].Data)
	copy(opt.V.Data, loaded[2].Data)
	return loaded[0], opt, nil
}
