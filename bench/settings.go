package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/delegatelab/delegate/store"
)

// SettingsVersion is the format version of a settings file.
// CheckSettings fails on any other version with an error naming both.
const SettingsVersion = 1

// Settings is the settings file of a benchmark's output directory: what its results were run with.
// A resume under other settings is refused,
// instead of mixing results or showing old results under new labels.
type Settings struct {
	Version int `json:"version"`
	// Arms are the arms run into the directory so far. Adding an arm on a
	// resume is allowed: its items are new.
	Arms []string `json:"arms"`
	// Run is what defines the results, as the caller describes it.
	// It holds models, endpoints, prices, roles, strategy and judge settings, dataset, sample and seeds.
	// A resume must match it key for key.
	Run json.RawMessage `json:"run"`
}

// CheckSettings records run in the settings file at path, or checks run against the file there.
// A difference is an error naming every key that differs, with both values.
// A results file at resultsPath with records but no settings file is an error too:
// nothing says what those results were run with.
// On success the file lists the union of the arms recorded and arms.
// run must marshal to a JSON object.
func CheckSettings(path, resultsPath string, arms []string, run any) error {
	now, err := json.Marshal(run)
	if err != nil {
		return fmt.Errorf("settings %s: encode: %w", path, err)
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		recs, _, rerr := ReadResults(resultsPath)
		if rerr != nil {
			return rerr
		}
		if len(recs) > 0 {
			return fmt.Errorf("settings %s: missing, but %s holds %d results: nothing says which settings they were run with; give another output directory", path, resultsPath, len(recs))
		}
		return writeSettings(path, Settings{Version: SettingsVersion, Arms: arms, Run: now})
	case err != nil:
		return fmt.Errorf("settings %s: %w", path, err)
	}
	var old Settings
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&old); err != nil {
		return fmt.Errorf("settings %s: %w", path, err)
	}
	if old.Version != SettingsVersion {
		return fmt.Errorf("settings %s: version %d, this program reads version %d: give another output directory, or use the matching version of delegate", path, old.Version, SettingsVersion)
	}
	diffs, err := store.DiffJSON(old.Run, now)
	if err != nil {
		return fmt.Errorf("settings %s: %w", path, err)
	}
	if len(diffs) > 0 {
		const most = 12
		more := ""
		if len(diffs) > most {
			more = fmt.Sprintf("; and %d more", len(diffs)-most)
			diffs = diffs[:most]
		}
		return fmt.Errorf("the output directory %s holds results run with other settings (%s%s): give another --out for these settings, or the same settings to resume",
			filepath.Dir(path), strings.Join(diffs, "; "), more)
	}
	union := slices.Clone(old.Arms)
	for _, a := range arms {
		if !slices.Contains(union, a) {
			union = append(union, a)
		}
	}
	if len(union) == len(old.Arms) {
		return nil
	}
	return writeSettings(path, Settings{Version: SettingsVersion, Arms: union, Run: old.Run})
}

// writeSettings writes s to path through a temporary file renamed into place.
// A crash leaves the old file or the new one.
func writeSettings(path string, s Settings) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("settings %s: encode: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("settings %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("settings %s: %w", path, err)
	}
	return nil
}
