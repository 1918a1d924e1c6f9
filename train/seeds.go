package train

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SeedsFile is the summary of a run over several RL seeds, in its OutDir.
const SeedsFile = "seeds.md"

// SeedDir is the directory of RL seed seed's run in a multi-seed run's
// directory out.
func SeedDir(out string, seed uint64) string {
	return filepath.Join(out, fmt.Sprintf("seed-%d", seed))
}

// SeedRun is one seed's run of RunSeeds.
type SeedRun struct {
	Seed   uint64
	Result *Result
}

// RunSeeds runs Run once per RL seed, each in SeedDir(cfg.OutDir, seed),
// and writes their summary (Seeds) to cfg.OutDir/SeedsFile. The baselines
// do not depend on the RL seed: the first seed's run evaluates them, and
// each later run starts from a copy of their records, so they run once.
// Only route's delegator trains this way. An interrupted call resumes
// like Run, seed by seed.
func RunSeeds(ctx context.Context, cfg Config, seeds []uint64, opt Options) ([]SeedRun, *Seeds, error) {
	if err := checkSeeds(cfg, seeds); err != nil {
		return nil, nil, err
	}
	var runs []SeedRun
	for i, s := range seeds {
		c := cfg
		c.RL.Seed, c.OutDir = s, SeedDir(cfg.OutDir, s)
		if i > 0 {
			if err := shareBaselines(SeedDir(cfg.OutDir, seeds[0]), c.OutDir); err != nil {
				return nil, nil, err
			}
		}
		if opt.Phase != nil {
			opt.Phase(fmt.Sprintf("RL seed %d (%d of %d)", s, i+1, len(seeds)))
		}
		res, err := Run(ctx, c, opt)
		if err != nil {
			return nil, nil, fmt.Errorf("train: RL seed %d: %w", s, err)
		}
		runs = append(runs, SeedRun{Seed: s, Result: res})
	}
	sum := SummarizeSeeds(runs)
	var b strings.Builder
	if err := sum.WriteMarkdown(&b); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(cfg.OutDir, SeedsFile), []byte(b.String()), 0o644); err != nil {
		return nil, nil, fmt.Errorf("train: write seeds summary: %w", err)
	}
	return runs, sum, nil
}

// checkSeeds checks the seeds of RunSeeds. There must be at least one,
// none 0 and no repeat; the run's Seed stands in for 0. The run must be a
// route run that trains the delegator.
func checkSeeds(cfg Config, seeds []uint64) error {
	if cfg.Mode != ModeRoute || cfg.Train != TrainDelegator {
		return fmt.Errorf("train: several RL seeds: mode %s, train %s: only %s's delegator trains over several seeds", cfg.Mode, cfg.Train, ModeRoute)
	}
	if len(seeds) == 0 {
		return errors.New("train: several RL seeds: none given")
	}
	for i, s := range seeds {
		if s == 0 {
			return errors.New("train: RL seed 0: seeds start at 1")
		}
		if slices.Contains(seeds[:i], s) {
			return fmt.Errorf("train: RL seed %d given twice", s)
		}
	}
	return nil
}

// shareBaselines copies the first seed's seed-free results to a later
// seed. It copies from directory from into directory to. That is the
// rules' and keyword rules' results on training items, the timing, and
// every record of EvalFile of an arm that does not depend on the RL seed
// (seedArm). A file already in to is left alone: that seed's run began
// before.
func shareBaselines(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return fmt.Errorf("train: share baselines: %w", err)
	}
	for _, name := range []string{RulesFile, KeywordsFile, TimingFile, EvalFile} {
		dst := filepath.Join(to, name)
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("train: share baselines: %w", err)
		}
		if name == EvalFile {
			if b, err = baselineRecords(b); err != nil {
				return fmt.Errorf("train: share baselines of %s: %w", from, err)
			}
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return fmt.Errorf("train: share baselines: %w", err)
		}
	}
	return nil
}

// seedArm says the arm depends on the RL seed. Those are the trained
// delegator, random delegation at its rate, and the SFT arm, whose batches
// the RL seed orders.
func seedArm(arm string) bool {
	for _, a := range []string{ArmTrained, ArmRandom, ArmSFT} {
		if strings.HasPrefix(arm, a+" (") {
			return true
		}
	}
	return false
}

// baselineRecords keeps the lines of a results file whose arm does not
// depend on the RL seed (seedArm).
func baselineRecords(b []byte) ([]byte, error) {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var rec struct {
			Arm string `json:"arm"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			// A torn last line of an interrupted run: ReadResults repairs
			// it in the source; here it is dropped.
			continue
		}
		if seedArm(rec.Arm) {
			continue
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes(), sc.Err()
}

// Seeds summarizes runs over several RL seeds. It holds the trained
// delegator's figures per seed, their mean and spread, and how many seeds
// meet each acceptance check.
type Seeds struct {
	Rows []SeedRow
	// Checks are the checks' names, in the tables' order, with the number
	// of seeds meeting each.
	Checks []SeedCheck
	// The baselines' figures are the same in every seed's table. They are
	// the delegator alone's cost per item and the best rules' arms and
	// rewards.
	AloneCost, BestRuleReward, BestKeywordReward float64
	BestRule, BestKeyword                        string
}

// SeedRow is one seed's trained delegator.
type SeedRow struct {
	Seed                   uint64
	Steps                  int
	Accuracy, Reward, Cost float64
	Cut                    float64 // cost cut per item against the delegator alone
	Met, Checks            int     // acceptance checks met, of all
}

// SeedCheck is one acceptance check over the seeds.
type SeedCheck struct {
	Name    string
	Met, Of int
}

// SummarizeSeeds summarizes the runs' tables; a run without a trained
// row is left out.
func SummarizeSeeds(runs []SeedRun) *Seeds {
	s := &Seeds{}
	for _, r := range runs {
		t := r.Result.Table
		tr, alone := t.Row(ArmTrained), t.Row(ArmAlone)
		if tr == nil || alone == nil {
			continue
		}
		row := SeedRow{Seed: r.Seed, Steps: r.Result.Steps, Accuracy: tr.Accuracy, Reward: tr.Reward, Cost: tr.Cost, Cut: math.NaN(), Checks: len(t.Checks)}
		if alone.Cost > 0 {
			row.Cut = 1 - tr.Cost/alone.Cost
		}
		s.AloneCost = alone.Cost
		if b := t.Row(t.BestRule); b != nil {
			s.BestRule, s.BestRuleReward = b.Arm, b.Reward
		}
		if b := t.Row(t.BestKeyword); b != nil {
			s.BestKeyword, s.BestKeywordReward = b.Arm, b.Reward
		}
		for i, c := range t.Checks {
			if i >= len(s.Checks) {
				s.Checks = append(s.Checks, SeedCheck{Name: c.Name})
			}
			s.Checks[i].Of++
			if c.Pass {
				s.Checks[i].Met++
				row.Met++
			}
		}
		s.Rows = append(s.Rows, row)
	}
	return s
}

// Spread is the mean of values over seeds, their sample standard
// deviation (0 for one value) and their range.
type Spread struct{ Mean, SD, Min, Max float64 }

// spreadOf is the spread of xs; NaN figures with none.
func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		nan := math.NaN()
		return Spread{nan, nan, nan, nan}
	}
	s := Spread{Min: xs[0], Max: xs[0]}
	for _, x := range xs {
		s.Mean += x / float64(len(xs))
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
	}
	if len(xs) > 1 {
		var ss float64
		for _, x := range xs {
			ss += (x - s.Mean) * (x - s.Mean)
		}
		s.SD = math.Sqrt(ss / float64(len(xs)-1))
	}
	return s
}

// Spreads are the mean and spread over seeds of the trained delegator's
// figures. They cover accuracy, reward, cost per item and the cut against
// the delegator alone.
func (s *Seeds) Spreads() (accuracy, reward, cost, cut Spread) {
	var a, r, c, k []float64
	for _, row := range s.Rows {
		a, r, c, k = append(a, row.Accuracy), append(r, row.Reward), append(c, row.Cost), append(k, row.Cut)
	}
	return spreadOf(a), spreadOf(r), spreadOf(c), spreadOf(k)
}

// WriteMarkdown writes the per-seed rows, the mean and spread, and the
// checks with the number of seeds meeting each.
func (s *Seeds) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| RL seed | steps | accuracy | reward | cost (µ$/item) | cut against alone | checks met |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range s.Rows {
		fmt.Fprintf(&b, "| %d | %d | %.3f | %.3f | %.0f | %.1f%% | %d of %d |\n", r.Seed, r.Steps, r.Accuracy, r.Reward, r.Cost*1e6, 100*r.Cut, r.Met, r.Checks)
	}
	acc, rew, cost, cut := s.Spreads()
	fmt.Fprintf(&b, "| **mean over %d seeds** (sd; min–max) | | %.3f (%.3f; %.3f–%.3f) | %.3f (%.3f; %.3f–%.3f) | %.0f (%.0f; %.0f–%.0f) | %.1f%% (%.1f; %.1f–%.1f) | |\n",
		len(s.Rows), acc.Mean, acc.SD, acc.Min, acc.Max, rew.Mean, rew.SD, rew.Min, rew.Max,
		cost.Mean*1e6, cost.SD*1e6, cost.Min*1e6, cost.Max*1e6, 100*cut.Mean, 100*cut.SD, 100*cut.Min, 100*cut.Max)
	fmt.Fprintf(&b, "\nShared baselines: delegator alone %.0f µ$/item; %s reward %.3f; %s reward %.3f.\n\nChecks, each judged per seed on its own table:\n\n",
		s.AloneCost*1e6, s.BestRule, s.BestRuleReward, s.BestKeyword, s.BestKeywordReward)
	for _, c := range s.Checks {
		fmt.Fprintf(&b, "- %d of %d seeds: %s\n", c.Met, c.Of, c.Name)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
