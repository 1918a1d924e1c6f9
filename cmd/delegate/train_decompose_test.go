package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/world"
)

// TestTrainDecomposeDefaults checks --mode decompose's defaults. It runs
// two-part problems (level 3) unless --level says otherwise, with a format
// penalty of -1. --parity is recorded as the run's reward. The table
// compares every arm with the single-agent baseline.
func TestTrainDecomposeDefaults(t *testing.T) {
	raceCovered(t, "train's TestRunDecompose")
	dir := t.TempDir()
	solver, delegator := tinyModels(t, dir)
	for _, tt := range []struct {
		name   string
		extra  []string
		level  int
		parity bool
	}{
		{"defaults", nil, 3, false},
		{"flags win", []string{"--level", "5", "--parity"}, 5, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, tt.name)
			args := append([]string{"--mode", "decompose", "--steps", "1", "--rule-items", "2"}, tt.extra...)
			got, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, out, args...)...)
			if err != nil {
				t.Fatalf("train: %v\n%s", err, got)
			}
			var id struct {
				Mode   string
				World  world.Config
				Parity bool
				Reward struct {
					FormatPenalty float64 `json:"format_penalty"`
				}
			}
			b := readRunFile(t, out, &id)
			want := world.Levels()[tt.level]
			if id.Mode != train.ModeDecompose || id.World.MaxSteps != want.MaxSteps || id.World.Parallel != want.Parallel || id.Parity != tt.parity || id.Reward.FormatPenalty != -1 {
				t.Errorf("run.json = %s\nwant mode decompose, level %d, parity %v, format penalty -1", b, tt.level, tt.parity)
			}
			for _, s := range []string{"| " + train.ArmSingle + " |", "Against the single-agent baseline", train.ArmPretrainedPlan} {
				if !strings.Contains(got, s) {
					t.Errorf("the table lacks %q:\n%s", s, got)
				}
			}
		})
	}
	if _, err := execute(t, testEnv, tinyTrainArgs(solver, delegator, filepath.Join(dir, "route"), "--parity")...); err == nil || !strings.Contains(err.Error(), "parity") {
		t.Errorf("--parity under route: err = %v, want one naming parity", err)
	}
}
