package gateway_test

import (
	"strings"
	"testing"

	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// TestConfigValidate checks that zero means zero. A field that cannot be
// zero is refused, not defaulted. DefaultConfig with a directory is valid.
func TestConfigValidate(t *testing.T) {
	valid := func() gateway.Config {
		c := gateway.DefaultConfig()
		c.Dir = t.TempDir()
		return c
	}
	tests := []struct {
		name   string
		change func(*gateway.Config)
		want   string // a part of the error, "" for none
	}{
		{"the defaults", func(*gateway.Config) {}, ""},
		{"no sink wait answers at once", func(c *gateway.Config) { c.SinkWait = 0 }, ""},
		{"no directory", func(c *gateway.Config) { c.Dir = "" }, "output directory"},
		{"zero ttl", func(c *gateway.Config) { c.TTL = 0 }, "ttl 0s"},
		{"zero group size", func(c *gateway.Config) { c.GroupSize = 0 }, "group size 0"},
		{"group of one", func(c *gateway.Config) { c.GroupSize = 1 }, "group size 1"},
		{"no estimator", func(c *gateway.Config) { c.Estimator = "" }, `estimator ""`},
		{"negative sink wait", func(c *gateway.Config) { c.SinkWait = -1 }, "sink wait"},
		{"zero temperature", func(c *gateway.Config) { zero := 0.0; c.Temperature = &zero }, "temperature 0"},
		{"a reward function without a verifier", func(c *gateway.Config) { c.Reward = reward.DefaultGraded().Reward }, "needs a verifier"},
		{"no group time-out waits for ever", func(c *gateway.Config) { c.GroupTimeout = 0 }, ""},
		{"negative group time-out", func(c *gateway.Config) { c.GroupTimeout = -1 }, "group timeout"},
		{"zero session calls", func(c *gateway.Config) { c.MaxSessionCalls = 0 }, "max session calls 0"},
		{"zero session bytes", func(c *gateway.Config) { c.MaxSessionBytes = 0 }, "max session bytes 0"},
		{"total below a session", func(c *gateway.Config) { c.MaxTotalBytes = c.MaxSessionBytes - 1 }, "max total bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.change(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
