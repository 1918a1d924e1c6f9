package rl

import (
	"math"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/reward"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		set  func(*Config)
		want string // "" valid, else a substring of the error
	}{
		{"defaults", func(*Config) {}, ""},
		{"no clipping, no KL", func(c *Config) { c.ClipNorm, c.KLBeta = 0, 0 }, ""},
		{"importance weight 1", func(c *Config) { c.MaxImportanceWeight = 1 }, ""},
		{"zero config", func(c *Config) { *c = Config{PolicyRole: "strong", OutDir: "out"} }, "group_size"},
		{"zero group size", func(c *Config) { c.GroupSize = 0 }, "group_size"},
		{"rloo of one", func(c *Config) { c.Estimator, c.GroupSize = reward.RLOO, 1 }, "rloo needs at least 2"},
		{"zero items per step", func(c *Config) { c.ItemsPerStep = 0 }, "items_per_step"},
		{"zero steps", func(c *Config) { c.Steps = 0 }, "steps"},
		{"negative clip norm", func(c *Config) { c.ClipNorm = -1 }, "clip_norm"},
		{"zero clip eps", func(c *Config) { c.ClipEps = 0 }, "clip_eps"},
		{"nan kl", func(c *Config) { c.KLBeta = math.NaN() }, "kl_beta"},
		{"unknown estimator", func(c *Config) { c.Estimator = "ppo" }, "estimator"},
		{"unknown norm", func(c *Config) { c.Norm = "sum" }, "norm"},
		{"zero epochs", func(c *Config) { c.Epochs = 0 }, "epochs"},
		{"zero max new tokens", func(c *Config) { c.MaxNewTokens = 0 }, "max_new_tokens"},
		{"zero temperature", func(c *Config) { c.Temperature = 0 }, "temperature"},
		{"no policy role", func(c *Config) { c.PolicyRole = "" }, "policy_role"},
		{"no out dir", func(c *Config) { c.OutDir = "" }, "out_dir"},
		{"zero checkpoint every", func(c *Config) { c.CheckpointEvery = 0 }, "checkpoint_every"},
		{"zero concurrency", func(c *Config) { c.Concurrency = 0 }, "concurrency"},
		{"zero micro batch", func(c *Config) { c.MicroBatchTokens = 0 }, "micro_batch_tokens"},
		{"zero importance weight", func(c *Config) { c.MaxImportanceWeight = 0 }, "max_importance_weight"},
		{"importance weight below 1", func(c *Config) { c.MaxImportanceWeight = 0.5 }, "max_importance_weight"},
		{"infinite importance weight", func(c *Config) { c.MaxImportanceWeight = math.Inf(1) }, "max_importance_weight"},
		{"zero logprob gap", func(c *Config) { c.MaxLogprobGap = 0 }, "max_logprob_gap"},
		{"zero logprob check", func(c *Config) { c.LogprobCheckEvery = 0 }, "logprob_check_every"},
		{"entropy bonus", func(c *Config) { c.EntropyBonus = 0.05 }, ""},
		{"negative entropy bonus", func(c *Config) { c.EntropyBonus = -0.1 }, "entropy_bonus"},
		{"nan entropy bonus", func(c *Config) { c.EntropyBonus = math.NaN() }, "entropy_bonus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.PolicyRole, c.OutDir = "strong", "out"
			tt.set(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}
