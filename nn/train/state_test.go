package train

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/nn"
)

// fixtureShape is the model of the states in testdata.
var fixtureShape = nn.Config{Vocab: 16, Dim: 8, Layers: 1, Heads: 2, KVHeads: 1, Hidden: 16, Context: 8}.WithDefaults()

// fixtureState is what testdata's states hold: weights nn.Init(11) and
// moments following a pattern.
func fixtureState(t *testing.T) (*nn.Params, *AdamState) {
	t.Helper()
	p, err := nn.Alloc(fixtureShape)
	if err != nil {
		t.Fatal(err)
	}
	p.Init(11)
	opt, err := NewAdamState(fixtureShape)
	if err != nil {
		t.Fatal(err)
	}
	for i := range opt.M.Data {
		opt.M.Data[i] = float32(i%7) * 0.01
		opt.V.Data[i] = float32(i%5) * 0.001
	}
	return p, opt
}

// copyDir copies the files of src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "state")
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestLoadStateFixtures(t *testing.T) {
	tests := []struct {
		dir         string
		step, total int
		config      bool
	}{
		{"rl-v1", 3, 0, true},
		{"sft-v0", 6, 40, false},
	}
	wantP, wantOpt := fixtureState(t)
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			s, err := LoadState(filepath.Join("testdata", tt.dir), fixtureShape)
			if err != nil {
				t.Fatal(err)
			}
			if s == nil {
				t.Fatal("no state")
			}
			if s.Step != tt.step || s.Opt.Steps != 6 || s.Total != tt.total {
				t.Errorf("step %d, optimizer steps %d, total %d; want %d, 6, %d", s.Step, s.Opt.Steps, s.Total, tt.step, tt.total)
			}
			if got := len(s.Config) > 0; got != tt.config {
				t.Errorf("has config %v, want %v", got, tt.config)
			}
			if !slices.Equal(s.Params.Data, wantP.Data) || !slices.Equal(s.Opt.M.Data, wantOpt.M.Data) || !slices.Equal(s.Opt.V.Data, wantOpt.V.Data) {
				t.Error("the loaded parameters or moments differ from the ones written")
			}
		})
	}
}

func TestSaveStateRoundTrip(t *testing.T) {
	p, opt := fixtureState(t)
	opt.Steps = 9
	dir := filepath.Join(t.TempDir(), "state")
	in := State{Params: p, Opt: opt, Step: 4, Total: 12, Config: json.RawMessage(`{"seed":3}`)}
	for range 2 { // the second save replaces the first
		if err := SaveState(dir, in); err != nil {
			t.Fatal(err)
		}
	}
	got, err := LoadState(dir, fixtureShape)
	if err != nil {
		t.Fatal(err)
	}
	if got.Step != 4 || got.Total != 12 || got.Opt.Steps != 9 {
		t.Errorf("step %d, total %d, optimizer steps %d; want 4, 12, 9", got.Step, got.Total, got.Opt.Steps)
	}
	var cfg struct{ Seed int }
	if err := json.Unmarshal(got.Config, &cfg); err != nil || cfg.Seed != 3 {
		t.Errorf("config %s (%v), want seed 3", got.Config, err)
	}
	if !slices.Equal(got.Params.Data, p.Data) || !slices.Equal(got.Opt.M.Data, opt.M.Data) || !slices.Equal(got.Opt.V.Data, opt.V.Data) {
		t.Error("the loaded parameters or moments differ from the saved ones")
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if err != nil {
		t.Fatal(err)
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil || f.Version != StateVersion {
		t.Errorf("state.json version %d (%v), want %d", f.Version, err, StateVersion)
	}
}

func TestLoadStateNone(t *testing.T) {
	tests := []struct {
		name string
		dir  func(t *testing.T) string
	}{
		{"no directory", func(t *testing.T) string { return filepath.Join(t.TempDir(), "none") }},
		{"empty directory", func(t *testing.T) string { return t.TempDir() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := LoadState(tt.dir(t), fixtureShape)
			if s != nil || err != nil {
				t.Errorf("got %v, %v; want nil, nil", s, err)
			}
		})
	}
}

func TestLoadStateRefuses(t *testing.T) {
	editJSON := func(t *testing.T, path string, edit func(map[string]any)) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		if b, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		fixture string
		edit    func(t *testing.T, dir string)
		want    string
	}{
		{"other version", "rl-v1", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, stateFileName), func(m map[string]any) { m["version"] = 99 })
		}, "state.json: state version 99, this build reads 0 to 2"},
		{"other model", "rl-v1", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, stateFileName), func(m map[string]any) { m["model"].(map[string]any)["dim"] = 64 })
		}, "state.json: model config"},
		{"other step", "rl-v1", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, stateFileName), func(m map[string]any) { m["step"] = 5 })
		}, `policy: written at step "3", state.json says 5`},
		{"no state.json", "rl-v1", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, stateFileName)); err != nil {
				t.Fatal(err)
			}
		}, "state.json is missing"},
		{"version 0 part of another step", "sft-v0", func(t *testing.T, dir string) {
			part := filepath.Join(dir, stateM)
			p, _, err := nn.Load(part)
			if err != nil {
				t.Fatal(err)
			}
			if err := nn.Save(part, p, map[string]string{v0StepMeta: "5", v0Steps: "40"}); err != nil {
				t.Fatal(err)
			}
		}, "weights, moments at steps [6 5 6] disagree"},
		{"version 0 without moments", "sft-v0", func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, stateV)); err != nil {
				t.Fatal(err)
			}
		}, "adam_v"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyDir(t, filepath.Join("testdata", tt.fixture))
			tt.edit(t, dir)
			_, err := LoadState(dir, fixtureShape)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
