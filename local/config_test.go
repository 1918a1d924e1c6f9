package local

import (
	"testing"
)

// named is DefaultConfig with a name.
func named(name string) Config {
	c := DefaultConfig()
	c.Name = name
	return c
}

// seeded is named with a seed.
func seeded(name string, seed uint64) Config {
	c := named(name)
	c.Seed = seed
	return c
}

// TestConfigValidate checks that each bound is refused with the field's
// name, and that a zero MaxNew means no cap.
func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *Config)
		want string // "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no name", func(c *Config) { c.Name = "" }, "local model: a name is required"},
		{"zero max_new: no cap", func(c *Config) { c.MaxNew = 0 }, ""},
		{"negative max_new", func(c *Config) { c.MaxNew = -1 }, "local model m: max_new -1 is negative"},
		{"one in a batch", func(c *Config) { c.MaxBatch = 1 }, ""},
		{"zero max_batch", func(c *Config) { c.MaxBatch = 0 }, "local model m: max_batch 0: want at least 1"},
		{"negative max_batch", func(c *Config) { c.MaxBatch = -2 }, "local model m: max_batch -2: want at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := named("m")
			tt.edit(&c)
			got := ""
			if err := c.Validate(); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestMaxBatch checks that the engine decodes MaxBatch sequences together,
// 32 by default, and that New refuses a zero batch.
func TestMaxBatch(t *testing.T) {
	p := testParams(t, 64, 1)
	for _, tt := range []struct {
		name  string
		batch int
		want  int // slots; 0 for refused
	}{
		{"default", DefaultConfig().MaxBatch, 32},
		{"four", 4, 4},
		{"zero", 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := named("m")
			c.MaxBatch = tt.batch
			m, err := New(p, c)
			if tt.want == 0 {
				if err == nil {
					m.Close()
					t.Fatal("New: no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := m.Memory().Slots; got != tt.want {
				t.Errorf("got %d slots, want %d", got, tt.want)
			}
		})
	}
}
