package atropos_test

import (
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/trajectory/atropos"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		set  func(c *atropos.Config)
		want string // "" for valid, else a part of the error
	}{
		{"default", func(c *atropos.Config) {}, ""},
		{"zero max staleness keeps all", func(c *atropos.Config) { c.MaxStaleness = 0 }, ""},
		{"zero max wait holds nothing", func(c *atropos.Config) { c.MaxWait = 0 }, ""},
		{"zero max held holds nothing", func(c *atropos.Config) { c.MaxHeld = 0 }, ""},
		{"empty prefix", func(c *atropos.Config) { c.Prefix = "" }, "prefix"},
		{"prefix with a dot", func(c *atropos.Config) { c.Prefix = "a.b" }, "prefix"},
		{"zero replicas", func(c *atropos.Config) { c.Replicas = 0 }, "replicas"},
		{"six replicas", func(c *atropos.Config) { c.Replicas = 6 }, "replicas"},
		{"zero dedup", func(c *atropos.Config) { c.Dedup = 0 }, "dedup"},
		{"zero keep steps", func(c *atropos.Config) { c.KeepSteps = 0 }, "keep steps"},
		{"negative staleness", func(c *atropos.Config) { c.MaxStaleness = -1 }, "max staleness"},
		{"zero max body", func(c *atropos.Config) { c.MaxBody = 0 }, "max body"},
		{"decompressed below body", func(c *atropos.Config) { c.MaxDecompressed = c.MaxBody - 1 }, "max decompressed"},
		{"zero inflate budget", func(c *atropos.Config) { c.InflateBudget = 0 }, "inflate budget"},
		{"zero max concurrent", func(c *atropos.Config) { c.MaxConcurrent = 0 }, "max concurrent"},
		{"zero read timeout", func(c *atropos.Config) { c.ReadTimeout = 0 }, "read timeout"},
		{"zero write timeout", func(c *atropos.Config) { c.WriteTimeout = 0 }, "write timeout"},
		{"zero idle timeout", func(c *atropos.Config) { c.IdleTimeout = 0 }, "idle timeout"},
		{"max wait past write timeout", func(c *atropos.Config) { c.MaxWait = 10 * time.Minute }, "max wait"},
		{"negative max held", func(c *atropos.Config) { c.MaxHeld = -1 }, "max held"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := config(tt.set).Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.want == "" && err != nil || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("Validate() = %q, want an error naming %q", got, tt.want)
			}
		})
	}
}

func TestEmbeddedConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		set  func(c *atropos.EmbeddedConfig)
		want string
	}{
		{"default with a dir", func(c *atropos.EmbeddedConfig) {}, ""},
		{"no dir", func(c *atropos.EmbeddedConfig) { c.Dir = "" }, "store directory"},
		{"zero max payload", func(c *atropos.EmbeddedConfig) { c.MaxPayload = 0 }, "max payload"},
		{"negative max payload", func(c *atropos.EmbeddedConfig) { c.MaxPayload = -1 }, "max payload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := atropos.DefaultEmbeddedConfig()
			c.Dir = t.TempDir()
			tt.set(&c)
			err := c.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.want == "" && err != nil || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("Validate() = %q, want an error naming %q", got, tt.want)
			}
		})
	}
}
