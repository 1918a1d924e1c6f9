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

// SeedRolesFile holds the trained roles' own rewards over the seeds, as
// JSON (SeedRoles), in a multi-seed run's OutDir. A run that trains the
// solver writes it.
const SeedRolesFile = "roles-seeds.json"

// seedRolesVersion is the format version of SeedRolesFile.
const seedRolesVersion = 1

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
// and writes their summary (Seeds) to cfg.OutDir/SeedsFile. With the
// solver trained it also writes the role reports' summary to
// SeedRolesFile. The baselines do not depend on the RL seed: the first
// seed's run evaluates them, and each later run starts from a copy of
// their records, so they run once. Only route trains this way. An
// interrupted call resumes like Run, seed by seed.
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
	if err := sum.write(cfg.OutDir); err != nil {
		return nil, nil, err
	}
	return runs, sum, nil
}

// write writes the summary to dir's SeedsFile and, when it has the role
// reports', to its SeedRolesFile.
func (s *Seeds) write(dir string) error {
	var b strings.Builder
	if err := s.WriteMarkdown(&b); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, SeedsFile), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("train: write seeds summary: %w", err)
	}
	if s.Roles == nil {
		return nil
	}
	j, err := json.MarshalIndent(s.Roles, "", " ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, SeedRolesFile), append(j, '\n'), 0o644)
	}
	if err != nil {
		return fmt.Errorf("train: write role reports over seeds: %w", err)
	}
	return nil
}

// checkSeeds checks the seeds of RunSeeds. There must be at least one,
// none 0 and no repeat; the run's Seed stands in for 0. The run must be a
// route run.
func checkSeeds(cfg Config, seeds []uint64) error {
	if cfg.Mode != ModeRoute {
		return fmt.Errorf("train: several RL seeds: mode %s: only %s trains over several seeds", cfg.Mode, ModeRoute)
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

// seedArm says the arm depends on the RL seed. Those are the arms with a
// trained policy, random delegation at the trained rate, and the SFT arm,
// whose batches the RL seed orders.
func seedArm(arm string) bool {
	for _, a := range []string{ArmTrained, ArmTrainedSolver, ArmTrainedBoth, ArmRandom, ArmSFT} {
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
// meet each acceptance check. With the solver trained it holds the role
// reports' summary too.
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
	// Roles summarizes the seeds' role reports; nil when none has one.
	Roles *SeedRoles
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

// SummarizeSeeds summarizes the runs' tables. Only runs with a trained
// delegator's row get a row; every run's checks and role report count.
func SummarizeSeeds(runs []SeedRun) *Seeds {
	s := &Seeds{}
	var (
		roles []RoleSeedRow
		first *RoleReport // the first report, for its sampling settings
	)
	for _, r := range runs {
		t := r.Result.Table
		alone := t.Row(ArmAlone)
		if alone != nil {
			s.AloneCost = alone.Cost
		}
		if b := t.Row(t.BestRule); b != nil {
			s.BestRule, s.BestRuleReward = b.Arm, b.Reward
		}
		if b := t.Row(t.BestKeyword); b != nil {
			s.BestKeyword, s.BestKeywordReward = b.Arm, b.Reward
		}
		var met int
		for i, c := range t.Checks {
			if i >= len(s.Checks) {
				s.Checks = append(s.Checks, SeedCheck{Name: c.Name})
			}
			s.Checks[i].Of++
			if c.Pass {
				s.Checks[i].Met++
				met++
			}
		}
		if t.Roles != nil {
			if first == nil {
				first = t.Roles
			}
			roles = append(roles, RoleSeedRow{Seed: r.Seed, Steps: r.Result.Steps, Delegator: t.Roles.Delegator, Solver: t.Roles.allCalls(), Handed: t.Roles.handedCalls()})
		}
		tr := t.Row(ArmTrained)
		if tr == nil || alone == nil {
			continue
		}
		row := SeedRow{Seed: r.Seed, Steps: r.Result.Steps, Accuracy: tr.Accuracy, Reward: tr.Reward, Cost: tr.Cost, Cut: math.NaN(), Met: met, Checks: len(t.Checks)}
		if alone.Cost > 0 {
			row.Cut = 1 - tr.Cost/alone.Cost
		}
		s.Rows = append(s.Rows, row)
	}
	if first != nil {
		s.Roles = SummarizeRoles(roles, first.Samples, first.Temperature)
	}
	return s
}

// SeedRoles is each trained role's own reward over several RL seeds. It
// holds one row per seed, the paired differences' mean and spread, and
// the seeds where each role's reward rises.
type SeedRoles struct {
	Version int `json:"version"`
	// Samples and Temperature are the solver's sampled answers per call
	// and their temperature, as in RoleReport.
	Samples     int           `json:"samples"`
	Temperature float64       `json:"temperature"`
	Rows        []RoleSeedRow `json:"rows"`
	// Delegator and Solver summarize the rows; each is nil when no seed
	// trained that role.
	Delegator *DelegatorSeeds `json:"delegator,omitempty"`
	Solver    *SolverSeeds    `json:"solver,omitempty"`
	// Handed summarizes the rows' handed-calls tests; nil when none has
	// one (Config.HandedCalls).
	Handed *SolverSeeds `json:"handed,omitempty"`
}

// RoleSeedRow is one seed's role report. It holds each trained role's
// test over all its held-out items or calls.
type RoleSeedRow struct {
	Seed      uint64         `json:"seed"`
	Steps     int            `json:"steps"`
	Delegator *DelegatorTest `json:"delegator,omitempty"`
	Solver    *SolverTest    `json:"solver,omitempty"` // over all calls
	Handed    *SolverTest    `json:"handed,omitempty"` // over all handed calls (Config.HandedCalls)
}

// DelegatorSeeds is the delegator's paired reward difference over seeds.
// Rises counts the seeds whose interval is above 0.
type DelegatorSeeds struct {
	RewardDiff Spread `json:"reward_diff"`
	Rises      int    `json:"rises"`
	Of         int    `json:"of"`
}

// SolverSeeds is the solver's paired differences over seeds, and the
// seeds where each rises. A sampled rise has its paired bootstrap interval
// above 0. A greedy rise gains more calls than it loses, McNemar p < 0.05.
type SolverSeeds struct {
	// GreedyDiff is the share of calls right greedy, after less before.
	GreedyDiff  Spread `json:"greedy_diff"`
	GreedyRises int    `json:"greedy_rises"`
	// SampledDiff is the share of samples right, after less before; nil
	// without samples.
	SampledDiff  *Spread `json:"sampled_diff,omitempty"`
	SampledRises int     `json:"sampled_rises"`
	Of           int     `json:"of"`
}

// greedyRises says the trained solver's greedy answers beat the
// pretrained one's, as Table.beats judges accuracy.
func (t *SolverTest) greedyRises() bool { return t.Gained > t.Lost && t.P < 0.05 }

// greedyDiff is the share of calls right greedy, after less before.
func (t *SolverTest) greedyDiff() float64 {
	if t.N == 0 {
		return 0
	}
	return float64(t.GreedyAfter-t.GreedyBefore) / float64(t.N)
}

// SummarizeRoles summarizes the seeds' role reports. Their solvers
// sampled samples answers a call at temperature.
func SummarizeRoles(rows []RoleSeedRow, samples int, temperature float64) *SeedRoles {
	s := &SeedRoles{Version: seedRolesVersion, Samples: samples, Temperature: temperature, Rows: rows}
	var del []float64
	var d DelegatorSeeds
	for _, r := range rows {
		if t := r.Delegator; t != nil {
			del = append(del, t.RewardDiff)
			d.Of++
			if t.RewardCI.Lo > 0 {
				d.Rises++
			}
		}
	}
	if d.Of > 0 {
		d.RewardDiff = spreadOf(del)
		s.Delegator = &d
	}
	s.Solver = summarizeSolver(rows, samples, func(r RoleSeedRow) *SolverTest { return r.Solver })
	s.Handed = summarizeSolver(rows, samples, func(r RoleSeedRow) *SolverTest { return r.Handed })
	return s
}

// summarizeSolver summarizes the solver's test that pick takes from each
// row; nil when no row has one.
func summarizeSolver(rows []RoleSeedRow, samples int, pick func(RoleSeedRow) *SolverTest) *SolverSeeds {
	var v SolverSeeds
	var greedy, sampled []float64
	for _, r := range rows {
		t := pick(r)
		if t == nil {
			continue
		}
		greedy, sampled = append(greedy, t.greedyDiff()), append(sampled, t.SampledDiff)
		v.Of++
		if t.greedyRises() {
			v.GreedyRises++
		}
		if samples > 0 && t.SampledCI.Lo > 0 {
			v.SampledRises++
		}
	}
	if v.Of == 0 {
		return nil
	}
	v.GreedyDiff = spreadOf(greedy)
	if samples > 0 {
		sp := spreadOf(sampled)
		v.SampledDiff = &sp
	}
	return &v
}

// writeMarkdown writes a table per trained role: each seed's paired test,
// the differences' mean and spread, and the seeds where the role's
// reward rises.
func (s *SeedRoles) writeMarkdown(b *strings.Builder) {
	b.WriteString("\nEach trained role's own reward on held-out items, before → after training, paired, per seed:\n")
	if d := s.Delegator; d != nil {
		b.WriteString("\nDelegator (the task's reward, each with the pretrained solver):\n\n| RL seed | steps | reward: before → after | paired difference [95% CI] | right: before → after (lost / gained, McNemar p) |\n|---|---:|---|---|---|\n")
		for _, r := range s.Rows {
			if t := r.Delegator; t != nil {
				fmt.Fprintf(b, "| %d | %d | %.3f → %.3f | %+.3f [%+.3f, %+.3f] | %d → %d (%d / %d, p %.2g) |\n",
					r.Seed, r.Steps, t.RewardBefore, t.RewardAfter, t.RewardDiff, t.RewardCI.Lo, t.RewardCI.Hi, t.RightBefore, t.RightAfter, t.Lost, t.Gained, t.P)
			}
		}
		fmt.Fprintf(b, "| **mean over %d seeds** (sd; min–max) | | | %s | |\n\n- %d of %d seeds: the delegator's reward rises (paired bootstrap 95%% interval above 0)\n",
			d.Of, spreadText(d.RewardDiff), d.Rises, d.Of)
	}
	v := s.Solver
	if v == nil {
		return
	}
	asked := "greedy"
	if s.Samples > 0 {
		asked = fmt.Sprintf("greedy, and %d samples a call at temperature %g", s.Samples, s.Temperature)
	}
	fmt.Fprintf(b, "\nSolver (its own answer right, on every operation of the held-out problems: %s):\n\n", asked)
	s.writeSolver(b, v, func(r RoleSeedRow) *SolverTest { return r.Solver }, "")
	s.writeHanded(b)
}

// writeSolver writes the solver's table of the tests pick takes from the
// rows, their mean, and how many seeds rise; on names the calls in
// the counts' lines ("" for all of them).
func (s *SeedRoles) writeSolver(b *strings.Builder, v *SolverSeeds, pick func(RoleSeedRow) *SolverTest, on string) {
	b.WriteString("| RL seed | steps | greedy right: before → after (lost / gained, McNemar p) | greedy difference | sampled right: before → after | sampled difference [95% CI] |\n|---|---:|---|---|---|---|\n")
	for _, r := range s.Rows {
		t := pick(r)
		if t == nil {
			continue
		}
		sampled, diff := "–", "–"
		if s.Samples > 0 {
			sampled = fmt.Sprintf("%.3f → %.3f", t.SampledBefore, t.SampledAfter)
			diff = fmt.Sprintf("%+.3f [%+.3f, %+.3f]", t.SampledDiff, t.SampledCI.Lo, t.SampledCI.Hi)
		}
		fmt.Fprintf(b, "| %d | %d | %d → %d of %d (%d / %d, p %.2g) | %+.3f | %s | %s |\n",
			r.Seed, r.Steps, t.GreedyBefore, t.GreedyAfter, t.N, t.Lost, t.Gained, t.P, t.greedyDiff(), sampled, diff)
	}
	sampled := "–"
	if v.SampledDiff != nil {
		sampled = spreadText(*v.SampledDiff)
	}
	fmt.Fprintf(b, "| **mean over %d seeds** (sd; min–max) | | | %s | | %s |\n\n", v.Of, spreadText(v.GreedyDiff), sampled)
	if v.SampledDiff != nil {
		fmt.Fprintf(b, "- %d of %d seeds: the solver's sampled share right%s rises (paired bootstrap 95%% interval above 0)\n", v.SampledRises, v.Of, on)
	}
	fmt.Fprintf(b, "- %d of %d seeds: the solver's greedy accuracy%s rises (more calls gained than lost, McNemar p < 0.05)\n", v.GreedyRises, v.Of, on)
}

// spreadText writes a paired difference's spread as "+0.033 (0.015;
// +0.016 to +0.043)".
func spreadText(s Spread) string {
	return fmt.Sprintf("%+.3f (%.3f; %+.3f to %+.3f)", s.Mean, s.SD, s.Min, s.Max)
}

// Spread is the mean of values over seeds, their sample standard
// deviation (0 for one value) and their range.
type Spread struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

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

// WriteMarkdown writes the trained delegator's per-seed rows with their
// mean and spread, the checks with the number of seeds meeting each, and
// the role reports' summary.
func (s *Seeds) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	if len(s.Rows) > 0 {
		s.writeDelegator(&b)
	}
	fmt.Fprintf(&b, "Shared baselines: delegator alone %.0f µ$/item; %s reward %.3f; %s reward %.3f.\n\nChecks, each judged per seed on its own table:\n\n",
		s.AloneCost*1e6, s.BestRule, s.BestRuleReward, s.BestKeyword, s.BestKeywordReward)
	for _, c := range s.Checks {
		fmt.Fprintf(&b, "- %d of %d seeds: %s\n", c.Met, c.Of, c.Name)
	}
	if s.Roles != nil {
		s.Roles.writeMarkdown(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeDelegator writes the trained delegator's rows and their mean and
// spread.
func (s *Seeds) writeDelegator(b *strings.Builder) {
	b.WriteString("| RL seed | steps | accuracy | reward | cost (µ$/item) | cut against alone | checks met |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range s.Rows {
		fmt.Fprintf(b, "| %d | %d | %.3f | %.3f | %.0f | %.1f%% | %d of %d |\n", r.Seed, r.Steps, r.Accuracy, r.Reward, r.Cost*1e6, 100*r.Cut, r.Met, r.Checks)
	}
	acc, rew, cost, cut := s.Spreads()
	fmt.Fprintf(b, "| **mean over %d seeds** (sd; min–max) | | %.3f (%.3f; %.3f–%.3f) | %.3f (%.3f; %.3f–%.3f) | %.0f (%.0f; %.0f–%.0f) | %.1f%% (%.1f; %.1f–%.1f) | |\n\n",
		len(s.Rows), acc.Mean, acc.SD, acc.Min, acc.Max, rew.Mean, rew.SD, rew.Min, rew.Max,
		cost.Mean*1e6, cost.SD*1e6, cost.Min*1e6, cost.Max*1e6, 100*cut.Mean, 100*cut.SD, 100*cut.Min, 100*cut.Max)
}
