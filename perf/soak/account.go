package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/delegatelab/delegate/rollout"
)

// Account is what one output directory of `delegate process` holds, counted from its files alone.
// The files are artifacts.jsonl, groups.jsonl and summary.json.
// The process writes summary.json from its state database when it exits, unless killed with SIGKILL.
type Account struct {
	Dirs     int `json:"dirs"`
	Complete int `json:"complete"` // directories whose run finished
	Lines    int `json:"artifact_lines"`
	Planned  int `json:"planned"` // rollouts planned by complete runs
	Recorded int `json:"recorded"`
	Torn     int `json:"torn"`  // lines that do not decode (a repair missed them)
	Extra    int `json:"extra"` // rollouts in the file the state never recorded

	// Completed rollouts were scored; Failed counts the others by reason.
	Completed int            `json:"completed"`
	Failed    map[string]int `json:"failed"`
	// Skipped rollouts were never run because their baseline failed.
	Skipped int `json:"skipped"`
	// RetriedRollouts needed at least one retried call; Retries is the
	// number of retried calls, baselines included.
	RetriedRollouts int `json:"retried_rollouts"`
	Retries         int `json:"retries"`

	Groups        int `json:"groups"`
	GroupsWritten int `json:"groups_written"`

	// Lost counts rollouts that artifacts.jsonl should hold but does not.
	// It should hold those the run recorded done, a written group names, or a complete run planned.
	// Duplicated counts artifact and group records beyond the first with the same id.
	// Both must be 0.
	Lost       int `json:"lost"`
	Duplicated int `json:"duplicated"`
	// Problems names each lost, duplicated, torn or extra record.
	Problems []string `json:"problems,omitempty"`
}

const maxProblems = 20

func (a *Account) problem(format string, args ...any) {
	if len(a.Problems) < maxProblems {
		a.Problems = append(a.Problems, fmt.Sprintf(format, args...))
	}
}

// AccountDir counts one output directory. A directory without
// summary.json (the process never exited on its own) is an error: the soak
// ends every run with an interrupt, which writes it.
func AccountDir(dir string) (Account, error) {
	a := Account{Dirs: 1, Failed: map[string]int{}}
	var sum rollout.Summary
	data, err := os.ReadFile(filepath.Join(dir, rollout.SummaryFile))
	if err != nil {
		return a, fmt.Errorf("account %s: %w", dir, err)
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		return a, fmt.Errorf("account %s: decode %s: %w", dir, rollout.SummaryFile, err)
	}
	if sum.Version != rollout.SummaryVersion {
		return a, fmt.Errorf("account %s: summary version %d, this build reads %d", dir, sum.Version, rollout.SummaryVersion)
	}
	seen := map[string]bool{}
	err = eachLine(filepath.Join(dir, rollout.ArtifactsFile), func(n int, line []byte) {
		a.Lines++
		art, err := rollout.DecodeArtifact(line)
		if err != nil {
			a.Torn++
			a.problem("%s line %d: %v", rollout.ArtifactsFile, n, err)
			return
		}
		if seen[art.ID] {
			a.Duplicated++
			a.problem("rollout %s recorded again at %s line %d", art.ID, rollout.ArtifactsFile, n)
			return
		}
		seen[art.ID] = true
		if art.Status == rollout.StatusScored {
			a.Completed++
		} else {
			reason := art.Reason
			if reason == "" {
				reason = "unknown"
			}
			a.Failed[reason]++
		}
		if art.Total.Retries+art.ScoreTotals.Retries > 0 {
			a.RetriedRollouts++
		}
	})
	if err != nil {
		return a, fmt.Errorf("account %s: %w", dir, err)
	}
	groups := map[string]bool{}
	named := map[string]bool{} // rollouts a group names that the file lacks
	err = eachLine(filepath.Join(dir, rollout.GroupsFile), func(n int, line []byte) {
		g, err := rollout.DecodeGroup(line)
		if err != nil {
			a.Torn++
			a.problem("%s line %d: %v", rollout.GroupsFile, n, err)
			return
		}
		if groups[g.ID] {
			a.Duplicated++
			a.problem("group %s written again at %s line %d", g.ID, rollout.GroupsFile, n)
			return
		}
		groups[g.ID] = true
		for _, m := range g.Rollouts {
			if !seen[m.ID] {
				named[m.ID] = true
				a.problem("group %s names rollout %s, which %s lacks", g.ID, m.ID, rollout.ArtifactsFile)
			}
		}
		for _, m := range g.Missing {
			if !seen[m.ID] {
				named[m.ID] = true
				a.problem("group %s names failed rollout %s, which %s lacks", g.ID, m.ID, rollout.ArtifactsFile)
			}
		}
	})
	if err != nil {
		return a, fmt.Errorf("account %s: %w", dir, err)
	}

	a.Recorded = sum.Rollouts
	a.Skipped = sum.RolloutsSkipped
	a.Retries = sum.Retries
	a.Groups = sum.Groups
	a.GroupsWritten = len(groups)
	// Three views of the rollouts missing from the file, each a lower
	// bound of the same set: the ids groups name, the state's count, and
	// (for a finished run) the plan. The largest is the count.
	distinct := len(seen)
	lost := len(named)
	switch {
	case distinct < sum.Rollouts:
		lost = max(lost, sum.Rollouts-distinct)
		a.problem("the state recorded %d rollouts, %s holds %d", sum.Rollouts, rollout.ArtifactsFile, distinct)
	case distinct > sum.Rollouts:
		a.Extra += distinct - sum.Rollouts
		a.problem("%s holds %d rollouts the state never recorded", rollout.ArtifactsFile, distinct-sum.Rollouts)
	}
	if sum.Complete {
		a.Complete = 1
		a.Planned = sum.RolloutsPlanned
		if missing := sum.RolloutsPlanned - sum.RolloutsSkipped - distinct; missing > 0 {
			lost = max(lost, missing)
			a.problem("the run is complete but %d of %d planned rollouts are neither recorded nor skipped", missing, sum.RolloutsPlanned)
		}
	}
	a.Lost += lost
	if sum.GroupsWritten != len(groups) {
		a.problem("the state recorded %d written groups, %s holds %d", sum.GroupsWritten, rollout.GroupsFile, len(groups))
		if sum.GroupsWritten > len(groups) {
			a.Lost += sum.GroupsWritten - len(groups)
		} else {
			a.Extra += len(groups) - sum.GroupsWritten
		}
	}
	return a, nil
}

// eachLine calls fn with every line of a JSONL file, numbered from 1.
// A last line without its newline is passed too. A missing file has no lines.
func eachLine(path string, fn func(n int, line []byte)) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			fn(n, line)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
	}
}

// Add adds b's counts to a.
func (a *Account) Add(b Account) {
	a.Dirs += b.Dirs
	a.Complete += b.Complete
	a.Lines += b.Lines
	a.Planned += b.Planned
	a.Recorded += b.Recorded
	a.Torn += b.Torn
	a.Extra += b.Extra
	a.Completed += b.Completed
	if a.Failed == nil {
		a.Failed = map[string]int{}
	}
	for k, v := range b.Failed {
		a.Failed[k] += v
	}
	a.Skipped += b.Skipped
	a.RetriedRollouts += b.RetriedRollouts
	a.Retries += b.Retries
	a.Groups += b.Groups
	a.GroupsWritten += b.GroupsWritten
	a.Lost += b.Lost
	a.Duplicated += b.Duplicated
	for _, p := range b.Problems {
		a.problem("%s", p)
	}
}

// FailedTotal is the number of failed rollouts.
func (a Account) FailedTotal() int {
	n := 0
	for _, v := range a.Failed {
		n += v
	}
	return n
}

// Check returns an error naming every way the account is not clean: a
// lost, duplicated, torn or unrecorded record.
func (a Account) Check() error {
	var errs []string
	for _, c := range []struct {
		name string
		n    int
	}{{"lost", a.Lost}, {"duplicated", a.Duplicated}, {"torn", a.Torn}, {"unrecorded", a.Extra}} {
		if c.n != 0 {
			errs = append(errs, fmt.Sprintf("%d %s", c.n, c.name))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s", strings.Join(errs, ", "), strings.Join(a.Problems, "; "))
}

// failedLine renders failures by reason, most frequent first.
func failedLine(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	return rollout.FailedCounts(m)
}
