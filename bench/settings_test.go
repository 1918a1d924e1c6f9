package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

type testSettings struct {
	Model  string             `json:"model"`
	Prices map[string]float64 `json:"prices"`
	Seed   int                `json:"seed"`
	Peers  []string           `json:"peers"`
}

func readSettings(t *testing.T, path string) Settings {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s Settings
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCheckSettings(t *testing.T) {
	base := testSettings{Model: "big", Prices: map[string]float64{"in": 2, "out": 8}, Seed: 1, Peers: []string{"a", "b"}}
	tests := []struct {
		name string
		edit func(s *testSettings)
		arms []string
		want []string // substrings of the error; none: accepted
	}{
		{"same settings", func(*testSettings) {}, []string{"single"}, nil},
		{"an arm added", func(*testSettings) {}, []string{"single", "route"}, nil},
		{"an arm left out", func(*testSettings) {}, nil, nil},
		{"model", func(s *testSettings) { s.Model = "small" }, []string{"single"}, []string{`model: "big" there, "small" now`, "another --out"}},
		{"price and seed", func(s *testSettings) { s.Prices["out"] = 0; s.Seed = 2 }, []string{"single"},
			[]string{"prices.out: 8 there, 0 now", "seed: 1 there, 2 now"}},
		{"a peer more", func(s *testSettings) { s.Peers = append(s.Peers, "c") }, []string{"single"}, []string{`peers[2]: absent there, "c" now`}},
		{"a price less", func(s *testSettings) { delete(s.Prices, "in") }, []string{"single"}, []string{"prices.in: 2 there, absent now"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path, results := filepath.Join(dir, "settings.json"), filepath.Join(dir, "results.jsonl")
			if err := CheckSettings(path, results, []string{"single"}, base); err != nil {
				t.Fatalf("first run: %v", err)
			}
			now := base
			now.Prices = map[string]float64{"in": 2, "out": 8}
			now.Peers = []string{"a", "b"}
			tt.edit(&now)
			err := CheckSettings(path, results, tt.arms, now)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("resume: %v", err)
				}
				got := readSettings(t, path).Arms
				want := []string{"single"}
				if len(tt.arms) > 1 {
					want = tt.arms
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("arms recorded = %v, want %v", got, want)
				}
				return
			}
			if err == nil {
				t.Fatal("resume under other settings accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			var got bytes.Buffer
			if err := json.Compact(&got, readSettings(t, path).Run); err != nil || got.String() != mustJSON(t, base) {
				t.Errorf("a refused resume changed the settings file: %s (%v)", got.String(), err)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCheckSettingsRefuses(t *testing.T) {
	t.Run("results without settings", func(t *testing.T) {
		dir := t.TempDir()
		results := filepath.Join(dir, "results.jsonl")
		rec, err := json.Marshal(Record{Version: RecordVersion, Arm: "single", TaskID: "t1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(results, append(rec, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		err = CheckSettings(filepath.Join(dir, "settings.json"), results, []string{"single"}, map[string]int{"seed": 1})
		if err == nil || !strings.Contains(err.Error(), "holds 1 results") || !strings.Contains(err.Error(), "another output directory") {
			t.Errorf("error = %v, want one saying the results' settings are unknown", err)
		}
	})
	t.Run("another version", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "settings.json")
		if err := os.WriteFile(path, []byte(`{"version": 9, "arms": [], "run": {}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		err := CheckSettings(path, filepath.Join(dir, "results.jsonl"), nil, map[string]int{})
		if err == nil || !strings.Contains(err.Error(), "version 9, this program reads version 1") {
			t.Errorf("error = %v, want one naming both versions", err)
		}
	})
}
