package rl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// MetricsVersion is the format version of a metrics line. A reader that
// meets another version fails naming both.
//
// Version history:
//
//	1  the fields of Metrics.
const MetricsVersion = 1

// MetricsFile is the name of the metrics log in OutDir.
const MetricsFile = "metrics.jsonl"

// Metrics describe one step; one JSON line per step in OutDir/metrics.jsonl.
// Means are over the step's successful rollouts.
type Metrics struct {
	Version   int       `json:"version"`
	Step      int       `json:"step"`  // from 1
	Steps     int       `json:"steps"` // the run's total
	Time      time.Time `json:"time"`
	LR        float64   `json:"lr"`
	Estimator string    `json:"estimator"`
	Norm      string    `json:"norm"`

	Items          int     `json:"items"`
	Rollouts       int     `json:"rollouts"`
	FailedRollouts int     `json:"failed_rollouts"`
	FirstFailure   string  `json:"first_failure,omitempty"`
	Reward         float64 `json:"reward"`     // mean
	RewardStd      float64 `json:"reward_std"` // population std over the step
	Accuracy       float64 `json:"accuracy"`
	DelegationRate float64 `json:"delegation_rate"`
	// Scalars are the means of the named scalars rollouts reported.
	Scalars map[string]float64 `json:"scalars,omitempty"`

	Groups           int `json:"groups"`
	DegenerateGroups int `json:"degenerate_groups"` // all rewards equal: no signal
	FailedGroups     int `json:"failed_groups"`     // too few successful rollouts for advantages
	// QuarantinedGroups counts the groups the source could not use
	// (Group.Quarantined): not trained, not in Groups.
	QuarantinedGroups int `json:"quarantined_groups,omitempty"`
	// EmptyGroups counts the items that gave the policy nothing to train
	// (Group.Empty): in Groups, without rollouts.
	EmptyGroups int `json:"empty_groups,omitempty"`

	Sequences        int     `json:"sequences"`          // policy calls
	PolicyTokens     int     `json:"policy_tokens"`      // tokens the policy generated
	PolicyTokensMean float64 `json:"policy_tokens_mean"` // per rollout
	TrainedTokens    int     `json:"trained_tokens"`     // tokens with a non-zero objective

	// Skipped reports a step with no update, because every trained weight was zero.
	// That happens when all groups are degenerate or failed and there is no KL term.
	Skipped     bool    `json:"skipped,omitempty"`
	Loss        float64 `json:"loss"`         // surrogate loss with the KL term, mean over epochs
	PGLoss      float64 `json:"pg_loss"`      // clipped policy-gradient loss alone
	KL          float64 `json:"kl"`           // mean k3 estimate per trained token
	ClipFrac    float64 `json:"clip_frac"`    // share of trained tokens clipped, over epochs
	GradNorm    float64 `json:"grad_norm"`    // before clipping, mean over epochs
	GradClipped int     `json:"grad_clipped"` // epochs whose gradient was clipped
	LogprobGap  float64 `json:"logprob_gap"`  // max |sampler − trainer| logprob

	// Off-policy groups are a Source's groups sampled with an older policy or of unknown version.
	// These count their sequences and how many steps behind they were, mean and max over known versions.
	// The importance weights exp(l_prox − l_behaviour) of their trained tokens are given before truncation:
	// mean, min, max, and the share truncated at MaxImportanceWeight.
	OffPolicySequences int     `json:"off_policy_sequences,omitempty"`
	UnknownVersion     int     `json:"unknown_version_groups,omitempty"`
	StalenessMean      float64 `json:"staleness_mean,omitempty"`
	StalenessMax       int     `json:"staleness_max,omitempty"`
	// StalenessGroups counts the groups of known version by how many steps behind they were.
	// Element k is the groups k steps behind. Nil when every group is of unknown version.
	StalenessGroups []int   `json:"staleness_groups,omitempty"`
	ISWeightMean    float64 `json:"is_weight_mean,omitempty"`
	ISWeightMin     float64 `json:"is_weight_min,omitempty"`
	ISWeightMax     float64 `json:"is_weight_max,omitempty"`
	ISTruncFrac     float64 `json:"is_trunc_frac,omitempty"`

	RolloutSeconds float64 `json:"rollout_seconds"`
	UpdateSeconds  float64 `json:"update_seconds"`
}

// ReadMetrics reads a metrics log. A line that does not parse, or has
// another version, is an error naming its line number.
func ReadMetrics(r io.Reader) ([]Metrics, error) {
	var out []Metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var m Metrics
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return out, fmt.Errorf("metrics line %d: %w", n, err)
		}
		if m.Version != MetricsVersion {
			return out, fmt.Errorf("metrics line %d: version %d, this build reads %d", n, m.Version, MetricsVersion)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("metrics: %w", err)
	}
	return out, nil
}

// metricsWriter appends metric lines to OutDir/metrics.jsonl.
type metricsWriter struct{ f *os.File }

// openMetrics opens the metrics log of dir for appending, cut back to the lines of steps up to step.
// Lines of steps a resumed run will redo, and a partial line left by a crash, are dropped.
// The file is truncated at the first of them; the lines kept are not rewritten.
// A complete line that does not parse, or has another version, is an error naming it.
func openMetrics(dir string, step int) (*metricsWriter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, MetricsFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	keep, err := metricsKeep(f, step)
	if err == nil {
		err = f.Truncate(keep)
	}
	if err == nil {
		_, err = f.Seek(keep, io.SeekStart)
	}
	if err != nil {
		_ = f.Close() // the error being returned says more
		return nil, fmt.Errorf("metrics %s: %w", path, err)
	}
	return &metricsWriter{f: f}, nil
}

// metricsKeep returns the length of the prefix of f holding complete lines
// of steps up to step.
func metricsKeep(f *os.File, step int) (int64, error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, err
	}
	var off int64
	for n := 1; len(data) > 0; n++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return off, nil // a partial last line
		}
		var m struct {
			Version int `json:"version"`
			Step    int `json:"step"`
		}
		if err := json.Unmarshal(data[:i], &m); err != nil {
			return 0, fmt.Errorf("line %d: %w", n, err)
		}
		if m.Version != MetricsVersion {
			return 0, fmt.Errorf("line %d: version %d, this build writes %d; move the file away to start over", n, m.Version, MetricsVersion)
		}
		if m.Step > step {
			return off, nil
		}
		off += int64(i + 1)
		data = data[i+1:]
	}
	return off, nil
}

// Write appends m as one line.
func (w *metricsWriter) Write(m *Metrics) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("metrics step %d: %w", m.Step, err)
	}
	if _, err := w.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("metrics step %d: %w", m.Step, err)
	}
	return nil
}

// Close syncs and closes the log.
func (w *metricsWriter) Close() error {
	return errors.Join(w.f.Sync(), w.f.Close())
}
