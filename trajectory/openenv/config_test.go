package openenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	newEnv := func() (Environment, error) { return nil, errors.New("unused") }
	tests := []struct {
		name string
		set  func(*Config)
		want []string // what the error names; none: valid
	}{
		{"defaults", func(*Config) {}, nil},
		{"zero sessions serve stateless HTTP", func(c *Config) { c.MaxSessions = 0 }, nil},
		{"zero steps and MCP episodes", func(c *Config) { c.MaxSteps, c.MaxMCPEpisodes = 0, 0 }, nil},
		{"no factory", func(c *Config) { c.New = nil }, []string{"New is required"}},
		{"negative counts", func(c *Config) { c.MaxSessions, c.MaxSteps, c.MaxMCPEpisodes = -1, -2, -3 },
			[]string{"MaxSessions -1", "MaxSteps -2", "MaxMCPEpisodes -3"}},
		{"zero size and timeouts", func(c *Config) { c.MaxMessageBytes, c.IdleTimeout, c.StepTimeout = 0, 0, 0 },
			[]string{"MaxMessageBytes 0 must be positive", "IdleTimeout 0s must be positive", "StepTimeout 0s must be positive"}},
		{"negative timeout", func(c *Config) { c.StepTimeout = -time.Second }, []string{"StepTimeout -1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.New = newEnv
			tt.set(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Errorf("got %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got nil, want an error naming %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to name %q", err, w)
				}
			}
		})
	}
}

// TestZeroBoundsAreZero: zero sessions refuse every session and zero
// MCP episodes refuse HTTP MCP sessions; nothing falls back to a default.
func TestZeroBoundsAreZero(t *testing.T) {
	ctx := context.Background()
	srv, _ := newDelegationServer(t, DelegationConfig{}, func(c *Config) { c.MaxSessions = 0 })
	c := serve(t, srv, "")
	s, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var e *Error
	if _, err := s.Reset(ctx, ResetRequest{}); !errors.As(err, &e) || e.Code != CodeCapacityReached {
		t.Errorf("websocket reset with no sessions: got %v, want CAPACITY_REACHED", err)
	}
	if _, err := c.Reset(ctx, ResetRequest{}); err != nil {
		t.Errorf("stateless HTTP reset: %v", err)
	}

	srv, _ = newDelegationServer(t, DelegationConfig{}, func(c *Config) { c.MaxMCPEpisodes = 0 })
	c = serve(t, srv, "")
	var re *RPCError
	if _, err := c.OpenMCP().Reset(ctx, ResetRequest{}); !errors.As(err, &re) || re.Code != RPCServerError {
		t.Errorf("MCP session with zero episodes: got %v, want a server error", err)
	}
	if n := srv.Active(); n != 0 {
		t.Errorf("sessions open: got %d, want 0", n)
	}
}
