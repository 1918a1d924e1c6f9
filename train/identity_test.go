package train

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/world"
)

// TestIdentityTrainerSettings: each setting that changes what training
// does is the run's, so a resume with another is refused, naming it.
func TestIdentityTrainerSettings(t *testing.T) {
	tests := []struct {
		key  string
		mode string
		set  func(*Config)
	}{
		{"lr", ModeRoute, func(c *Config) { c.RL.Schedule.MaxLR = 1e-3 }},
		{"min_lr", ModeRoute, func(c *Config) { c.RL.Schedule.MinLR = 1e-5 }},
		{"clip_eps", ModeRoute, func(c *Config) { c.RL.ClipEps = 0.1 }},
		{"kl_beta", ModeRoute, func(c *Config) { c.RL.KLBeta = 0.04 }},
		{"epochs", ModeRoute, func(c *Config) { c.RL.Epochs = 2 }},
		{"temperature", ModeRoute, func(c *Config) { c.RL.Temperature = 0.7 }},
		{"max_new_tokens", ModeRoute, func(c *Config) { c.RL.MaxNewTokens = 512 }},
		{"max_turns", ModeRoute, func(c *Config) { c.MaxTurns = 3 }},
		{"reward", ModeRoute, func(c *Config) { c.Reward.Gate = world.DefaultGate }},
		{"peer_count", ModeMLPO, func(c *Config) { c.PeerCount = 4 }},
		{"peer_samples", ModeMLPO, func(c *Config) { c.PeerSamples = 8 }},
		{"filter_max_rate", ModeMLPO, func(c *Config) { c.FilterMaxRate = 0.5 }},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Mode = tc.mode
			cfg.OutDir = t.TempDir()
			if err := checkIdentity(cfg); err != nil {
				t.Fatal(err)
			}
			if err := checkIdentity(cfg); err != nil {
				t.Errorf("the same run again: %v", err)
			}
			other := cfg
			tc.set(&other)
			if err := checkIdentity(other); err == nil || !strings.Contains(err.Error(), "("+tc.key+" ") {
				t.Errorf("got %v, want an error naming %s", err, tc.key)
			}
		})
	}
}

// TestIdentityMLPOSettingsOnlyUnderMLPO: MLPO's team and filter leave a
// route run's file as it was, so a route run ignores them on resuming.
func TestIdentityMLPOSettingsOnlyUnderMLPO(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OutDir = t.TempDir()
	if err := checkIdentity(cfg); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, RunFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"peer_count", "peer_samples", "filter_max_rate"} {
		if strings.Contains(string(b), `"`+key+`"`) {
			t.Errorf("a route run's file names %s:\n%s", key, b)
		}
	}
	other := cfg
	other.PeerCount, other.FilterMaxRate = 5, 0.5
	if err := checkIdentity(other); err != nil {
		t.Errorf("route with other MLPO settings: %v", err)
	}
}

// TestIdentityOlderRunFile resumes from run files an earlier version
// wrote, before the trainer's settings were recorded: the default route
// run's, and an MLPO run's of 128 training problems. An absent setting is
// its default: delegate train's, under MLPO the recipe's. A run resumed
// with another value is refused, and the error says the file lacks it.
func TestIdentityOlderRunFile(t *testing.T) {
	mlpo := DefaultConfig()
	mlpo.Mode = ModeMLPO
	mlpo.RL.KLBeta, mlpo.PeerCount = MLPOKLBeta, MLPOPeerCount
	mlpo.RL.Estimator, mlpo.Reward.Lambda, mlpo.Reward.Mu = reward.DrGRPO, 0, 0
	mlpo.World = world.Levels()[world.MLPOLevel]
	mlpo.World.Distractors = world.MLPODistractors
	mlpo.TrainProblems = 128
	tests := []struct {
		name string
		file string // in testdata
		cfg  Config
		edit func(*Config)
		want string // "" when the run resumes
	}{
		{"route, defaults", "run-v3-route.json", DefaultConfig(), nil, ""},
		{"route, another lr", "run-v3-route.json", DefaultConfig(), func(c *Config) { c.RL.Schedule.MaxLR = 1e-3 },
			"lr absent there, which means 0.0001, 0.001 now"},
		{"route, another temperature", "run-v3-route.json", DefaultConfig(), func(c *Config) { c.RL.Temperature = 0.5 },
			"temperature absent there, which means 1, 0.5 now"},
		{"route, credit left out", "run-v3-route.json", DefaultConfig(), func(c *Config) { c.Credit = reward.CreditRole },
			"credit absent there, role now"},
		{"route, gated", "run-v3-route.json", DefaultConfig(), func(c *Config) { c.Reward.Gate = world.DefaultGate },
			"reward {0.001 tokens 0.02 0 0} there, {0.001 tokens 0.02 0 2} now"},
		{"mlpo, the recipe", "run-v3-mlpo.json", mlpo, nil, ""},
		{"mlpo, no KL", "run-v3-mlpo.json", mlpo, func(c *Config) { c.RL.KLBeta = 0 },
			"kl_beta absent there, which means 0.04, 0 now"},
		{"mlpo, three peers", "run-v3-mlpo.json", mlpo, func(c *Config) { c.PeerCount = 3 },
			"peer_count absent there, which means 2, 3 now"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{`"lr"`, `"kl_beta"`, `"peer_count"`} {
				if strings.Contains(string(b), k) {
					t.Fatalf("%s names %s: it is no older run file", tc.file, k)
				}
			}
			cfg := tc.cfg
			cfg.OutDir = t.TempDir()
			if err := os.WriteFile(filepath.Join(cfg.OutDir, RunFile), b, 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				tc.edit(&cfg)
			}
			err = checkIdentity(cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want the run resumed", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
