package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/openai/wire"
	"github.com/delegatelab/delegate/server"
)

// testConfig is DefaultConfig changed by set.
func testConfig(set func(*server.Config)) server.Config {
	c := server.DefaultConfig()
	set(&c)
	return c
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		set  func(*server.Config)
		want string // "" valid, else a substring of the error
	}{
		{"defaults", func(*server.Config) {}, ""},
		{"none wait", func(c *server.Config) { c.MaxQueue = 0 }, ""},
		{"budget of one body", func(c *server.Config) { c.MaxBody, c.BodyBudget = 10, 10 }, ""},
		{"zero config", func(c *server.Config) { *c = server.Config{} }, "max body 0"},
		{"zero max body", func(c *server.Config) { c.MaxBody = 0 }, "max body 0"},
		{"zero max n", func(c *server.Config) { c.MaxN = 0 }, "max n 0"},
		{"max n past the format", func(c *server.Config) { c.MaxN = wire.MaxN + 1 }, "max n"},
		{"zero max concurrent", func(c *server.Config) { c.MaxConcurrent = 0 }, "max concurrent 0"},
		{"negative max queue", func(c *server.Config) { c.MaxQueue = -1 }, "max queue -1"},
		{"budget below a body", func(c *server.Config) { c.BodyBudget = c.MaxBody - 1 }, "body budget"},
		{"zero queue timeout", func(c *server.Config) { c.QueueTimeout = 0 }, "queue timeout 0s"},
		{"negative request timeout", func(c *server.Config) { c.RequestTimeout = -time.Second }, "request timeout -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := testConfig(tt.set).Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestDefaultBodyBudget: the default budget holds a full body for every
// request generating or waiting.
func TestDefaultBodyBudget(t *testing.T) {
	d := server.DefaultConfig()
	if got, want := d.BodyBudget, int64(32+64)<<20; got != want || d.FullBodyBudget() != want {
		t.Errorf("body budget %d, full %d; want %d", got, d.FullBodyBudget(), want)
	}
}
