package openai

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.BaseURL, good.Model = "https://api.openai.com/v1", "gpt-4o-mini"
	tests := []struct {
		name string
		mod  func(*Config)
		want string // "" for valid
	}{
		{"minimal", func(*Config) {}, ""},
		{"local without key, limits set", func(c *Config) {
			c.BaseURL, c.MaxConcurrency, c.RequestsPerMinute, c.MaxRetries = "http://localhost:8000/v1/", 8, 120, 0
		}, ""},
		{"no backoff", func(c *Config) { c.MinBackoff, c.MaxBackoff = 0, 0 }, ""},
		{"no base url", func(c *Config) { c.BaseURL = "" }, "base_url is empty"},
		{"bad scheme", func(c *Config) { c.BaseURL = "ftp://x/v1" }, "scheme must be http or https"},
		{"no host", func(c *Config) { c.BaseURL = "http:///v1" }, "no host"},
		{"query", func(c *Config) { c.BaseURL = "http://x/v1?key=abc" }, "query or fragment"},
		{"unparsable", func(c *Config) { c.BaseURL = "http://[::1/v1" }, "base_url"},
		{"no model", func(c *Config) { c.Model = " " }, "model is empty"},
		{"control char in key", func(c *Config) { c.APIKey = "sk-abc\n" }, "control character at byte 6"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "timeout -1s: want a positive duration"},
		{"zero timeout", func(c *Config) { c.Timeout = 0 }, "timeout 0s: want a positive duration"},
		{"negative retries", func(c *Config) { c.MaxRetries = -1 }, "max_retries -1 is negative"},
		{"zero config", func(c *Config) { *c = Config{BaseURL: c.BaseURL, Model: c.Model} }, "timeout 0s"},
		{"negative min backoff", func(c *Config) { c.MinBackoff = -1 }, "min_backoff"},
		{"negative max backoff", func(c *Config) { c.MaxBackoff = -1 }, "max_backoff"},
		{"min above max", func(c *Config) { c.MinBackoff = time.Minute }, "min_backoff 1m0s exceeds max_backoff 30s"},
		{"negative concurrency", func(c *Config) { c.MaxConcurrency = -1 }, "max_concurrency -1"},
		{"negative rpm", func(c *Config) { c.RequestsPerMinute = -1 }, "requests_per_minute"},
		{"nan rpm", func(c *Config) { c.RequestsPerMinute = math.NaN() }, "requests_per_minute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.mod(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want an error containing %q", err, tt.want)
			}
			if err != nil && c.APIKey != "" && strings.Contains(err.Error(), c.APIKey) {
				t.Errorf("error %q contains the API key", err)
			}
		})
	}
}

// testConfig is DefaultConfig for model "m" at base, changed by set
// when set is not nil.
func testConfig(base string, set func(*Config)) Config {
	c := DefaultConfig()
	c.BaseURL, c.Model = base, "m"
	if set != nil {
		set(&c)
	}
	return c
}

func TestConfigPrintingHidesKey(t *testing.T) {
	c := Config{BaseURL: "http://x/v1", Model: "m", APIKey: testKey}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "cfg", c)
	for name, s := range map[string]string{
		"%v": fmt.Sprintf("%v", c), "String": c.String(), "%+v": fmt.Sprintf("%+v", c), "%#v": fmt.Sprintf("%#v", c), "slog": logs.String(),
	} {
		if strings.Contains(s, testKey) {
			t.Errorf("%s output contains the API key: %s", name, s)
		}
		if !strings.Contains(s, "[redacted]") {
			t.Errorf("%s output = %s, want the key shown as [redacted]", name, s)
		}
	}
}
