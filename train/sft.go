package train

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/pretrain"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world/transcript"
)

// SFTDir is the directory, in OutDir, of the SFT arm: its resumable
// state and, once trained, its checkpoint (SFTDir/policy).
const SFTDir = "sft"

// ArmSFT is followed by " (steps × sequences)".
const ArmSFT = "SFT on the oracle's transcripts"

// sftArm is the pretrained delegator fine-tuned on the oracle's route
// transcripts of the training problems. The oracle is the coverage's
// selective policy, world.Selective in the default world, as
// transcript.Route writes it. It gets RL's compute: RL.Steps optimizer
// steps of RL.ItemsPerStep × RL.GroupSize sequences, as many as RL's
// rollouts, at RL's learning rate. The checkpoint is kept in OutDir, so a
// run again does not train it again.
func (r *runner) sftArm(ctx context.Context) (bench.Arm, error) {
	steps, batch := r.cfg.RL.Steps, r.cfg.RL.ItemsPerStep*r.cfg.RL.GroupSize
	name := fmt.Sprintf("%s (%d steps × %d sequences)", ArmSFT, steps, batch)
	p, err := r.sftPolicy(ctx, steps, batch)
	if err != nil {
		return bench.Arm{}, err
	}
	m, err := local.New(p, local.Config{Name: "delegator-sft", MaxBatch: 64, Seed: r.cfg.Seed})
	if err != nil {
		return bench.Arm{}, fmt.Errorf("train: start the SFT delegator: %w", err)
	}
	r.closers = append(r.closers, m)
	return bench.Arm{Name: name, Strategy: perRun{strategy.NameRoute, func(string) (delegate.Strategy, error) {
		return r.route(r.scfg, m, r.solver)
	}}}, nil
}

// sftPolicy loads the SFT checkpoint of OutDir, or trains and saves it.
func (r *runner) sftPolicy(ctx context.Context, steps, batch int) (*nn.Params, error) {
	dir := filepath.Join(r.cfg.OutDir, SFTDir, "policy")
	p, _, err := nn.Load(dir)
	if err == nil {
		return p, nil
	}
	if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
		return nil, fmt.Errorf("train: SFT checkpoint %s: %w", dir, err)
	}
	pre, err := loadCheckpoint(r.cfg.StartModel(), r.cfg.Delegator)
	if err != nil {
		return nil, err
	}
	examples := make([]pretrain.Example, 0, len(r.trainSet))
	for _, pr := range r.trainSet {
		for _, t := range transcript.Route(pr, r.cfg.Coverage.Selective).Delegator {
			if e := pretrain.FromMessages(t.Messages, t.Tools); len(e.Tokens) <= pre.Config.Context+1 {
				examples = append(examples, e)
			}
		}
	}
	if len(examples) == 0 {
		return nil, errors.New("train: SFT: no oracle transcript fits the delegator's context")
	}
	s := r.cfg.RL.Schedule
	cfg := pretrain.Config{Steps: steps, Batch: batch, MaxLR: s.MaxLR, MinLR: s.MinLR, Warmup: min(s.Warmup, steps),
		Seed: r.cfg.RLSeed(), StateDir: filepath.Join(r.cfg.OutDir, SFTDir, "state")}
	if _, err := pretrain.Train(ctx, pre, examples, cfg, nil, nil); err != nil {
		return nil, fmt.Errorf("train: SFT on the oracle's transcripts: %w", err)
	}
	meta := map[string]string{"what": "SFT of the delegator on the oracle's route transcripts", "steps": strconv.Itoa(steps), "batch": strconv.Itoa(batch)}
	if err := nn.Save(dir, pre, meta); err != nil {
		return nil, fmt.Errorf("train: save the SFT checkpoint: %w", err)
	}
	return pre, nil
}
