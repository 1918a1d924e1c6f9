package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/world"
)

// TestTrainWorldRewardFlag checks that --world-reward gated gates the
// world's reward at its λ, that its absence leaves the reward as it was,
// and that what the trainer does not score is refused.
func TestTrainWorldRewardFlag(t *testing.T) {
	for _, tt := range []struct {
		name       string
		args       []string
		wantLambda float64
		wantGate   float64
		err        string // "" when valid
	}{
		{"default world", nil, 0.001, 0, ""},
		{"band, graded", []string{"--world", "band", "--world-reward", "graded"}, world.BandLambda, 0, ""},
		{"band, gated", []string{"--world", "band", "--world-reward", "gated"}, world.BandLambda, world.DefaultGate, ""},
		{"default world, gated", []string{"--world-reward", "gated", "--lambda", "0.002"}, 0.002, world.DefaultGate, ""},
		{"unknown", []string{"--world-reward", "lenient"}, 0, 0, `world reward "lenient"`},
		{"processes", []string{"--world-reward", "gated", "--processes", "2"}, 0, 0, "with --processes, --api or --gateway"},
		{"api", []string{"--world-reward", "gated", "--api", "http://127.0.0.1:1"}, 0, 0, "with --processes, --api or --gateway"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newTrainCmd(testEnv, slog.New(slog.DiscardHandler))
			cfg := train.DefaultConfig()
			var f trainFlags
			cmd.ResetFlags()
			addTrainFlags(cmd.Flags(), &cfg, &f)
			if err := cmd.Flags().Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := trainConfig(cmd, &cfg, &f)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Reward.Lambda != tt.wantLambda || cfg.Reward.Gate != tt.wantGate {
				t.Errorf("reward %+v, want λ %v and gate %v", cfg.Reward, tt.wantLambda, tt.wantGate)
			}
		})
	}
}
