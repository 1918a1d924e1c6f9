package view

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/delegatelab/delegate/bench"
)

// benchRun is one bench results file. The records are kept without
// their traces and answers, which are read again from disk when asked
// for; the report is computed again only when the file has grown.
type benchRun struct {
	mu       sync.Mutex // guards everything below
	dir      string
	idx      lines
	recs     []bench.Record // Trace and Answer cleared
	hasTrace []bool
	rep      *BenchReport
	repAt    int // records the report was computed from
}

func newBenchRun(path string) *benchRun {
	return &benchRun{dir: filepath.Dir(path), idx: lines{path: path}}
}

// updateLocked indexes the lines written since the last call, for at
// most requestBudget (lines.advance).
func (b *benchRun) updateLocked() error { return b.indexLocked(false) }

func (b *benchRun) indexLocked(background bool) error {
	return b.idx.advance(background, func(_ int, raw []byte) error {
		var rec bench.Record
		if err := decodeVersioned(raw, &rec, func() int { return rec.Version }, bench.RecordVersion, "bench record"); err != nil {
			return err
		}
		b.hasTrace = append(b.hasTrace, rec.Trace != nil)
		rec.Trace, rec.Answer = nil, ""
		b.recs = append(b.recs, rec)
		return nil
	})
}

func (b *benchRun) refresh() (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.indexLocked(true)
	return b.idx.behind, err
}

func (b *benchRun) count() (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.updateLocked()
	return len(b.recs), err
}

// record reads record i whole, trace included.
func (b *benchRun) record(i int) (*bench.Record, error) {
	return readLine[bench.Record](&b.mu, &b.idx, i, "bench record")
}

// BenchRow is one arm's row of the table. Numbers that do not exist are
// null; an interval end that is infinite is null too.
type BenchRow struct {
	Arm          string      `json:"arm"`
	Strategy     string      `json:"strategy"`
	Role         bench.Role  `json:"role,omitempty"`
	Oracle       bool        `json:"oracle,omitempty"`
	N            int         `json:"n"`
	Correct      int         `json:"correct"`
	Accuracy     *float64    `json:"accuracy"`
	AccuracyCI   [2]*float64 `json:"accuracy_ci"`
	Dollars      *float64    `json:"dollars"`
	CostOfPass   *float64    `json:"cost_of_pass"`
	CostOfPassCI [2]*float64 `json:"cost_of_pass_ci"`
	NoneCorrect  bool        `json:"none_correct,omitempty"`
	McNemarP     *float64    `json:"mcnemar_p"`
	Calls        *float64    `json:"calls"`
	LatencyP50   *float64    `json:"latency_p50_s"`
	LatencyP95   *float64    `json:"latency_p95_s"`
	Failures     int         `json:"failures"`
	Errors       int         `json:"errors"`
}

// BenchReport is bench's table and frontier, computed by bench itself
// from the results file.
type BenchReport struct {
	Progress   Progress        `json:"progress"`
	Tasks      int             `json:"tasks"`
	Incomplete int             `json:"incomplete"`
	Baseline   string          `json:"baseline"`
	Records    int             `json:"records"`
	Rows       []BenchRow      `json:"rows"`
	Frontier   *bench.Frontier `json:"frontier"`
}

func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// report summarises the records with bench.Summarize. The arms come in
// the order of the directory's settings file, their weak and strong
// roles from its report.json, when those are there.
func (b *benchRun) report() (*BenchReport, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.updateLocked(); err != nil {
		return nil, err
	}
	if b.rep != nil && b.repAt == len(b.recs) {
		b.rep.Progress = b.idx.progress()
		return b.rep, nil
	}
	if len(b.recs) == 0 {
		return &BenchReport{Progress: b.idx.progress(), Rows: []BenchRow{}}, nil
	}
	arms, baseline, err := b.arms()
	if err != nil {
		return nil, err
	}
	rep, err := bench.Summarize(baseline, nil, arms, b.recs)
	if err != nil {
		return nil, fmt.Errorf("bench %s: %w", b.idx.path, err)
	}
	f, err := rep.Frontier("", "")
	if err != nil {
		return nil, fmt.Errorf("bench %s: %w", b.idx.path, err)
	}
	out := &BenchReport{Progress: b.idx.progress(), Tasks: rep.Tasks, Incomplete: rep.Incomplete, Baseline: rep.Baseline, Records: len(b.recs), Frontier: f}
	for _, r := range rep.Rows {
		row := BenchRow{Arm: r.Arm, Strategy: r.Strategy, Role: r.Role, Oracle: r.Oracle, N: r.N, Correct: r.Correct,
			Accuracy: num(r.Accuracy), AccuracyCI: [2]*float64{num(r.CI.Lo), num(r.CI.Hi)},
			Dollars: num(r.Dollars), CostOfPass: num(r.CostOfPass), CostOfPassCI: [2]*float64{num(r.CostOfPassCI.Lo), num(r.CostOfPassCI.Hi)},
			NoneCorrect: math.IsInf(r.CostOfPass, 1), Calls: num(r.Calls), LatencyP50: num(r.LatencyP50), LatencyP95: num(r.LatencyP95),
			Failures: r.Failures, Errors: r.Errors}
		if r.McNemar != nil {
			row.McNemarP = num(r.McNemar.P)
		}
		out.Rows = append(out.Rows, row)
	}
	b.rep, b.repAt = out, len(b.recs)
	return out, nil
}

// arms lists the arms of the records with the roles and baseline that report.json names.
// They come in the settings file's order when there is one, else in the order they first appear.
func (b *benchRun) arms() ([]bench.Arm, string, error) {
	var names []string
	seen := map[string]bool{}
	if raw, err := os.ReadFile(filepath.Join(b.dir, "settings.json")); err == nil {
		var st bench.Settings
		if err := json.Unmarshal(raw, &st); err == nil && st.Version == bench.SettingsVersion {
			names = st.Arms
			for _, n := range names {
				seen[n] = true
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, "", fmt.Errorf("bench %s: %w", b.dir, err)
	}
	strategy := map[string]string{}
	for _, r := range b.recs {
		strategy[r.Arm] = r.Strategy
		if !seen[r.Arm] {
			seen[r.Arm] = true
			names = append(names, r.Arm)
		}
	}
	// report.json is bench's; only the names of the roles are read.
	var roles struct {
		Baseline string `json:"baseline"`
		Weak     string `json:"weak"`
		Strong   string `json:"strong"`
	}
	if raw, err := os.ReadFile(filepath.Join(b.dir, "report.json")); err == nil {
		// A report being written is read again on the next request.
		_ = json.Unmarshal(raw, &roles)
	}
	var arms []bench.Arm
	for _, n := range names {
		if _, ok := strategy[n]; !ok {
			continue // in the settings, but no result yet
		}
		a := bench.Arm{Name: n}
		switch n {
		case roles.Weak:
			a.Role = bench.RoleWeak
		case roles.Strong:
			a.Role = bench.RoleStrong
		}
		arms = append(arms, a)
	}
	baseline := roles.Baseline
	if _, ok := strategy[baseline]; !ok {
		baseline = ""
	}
	return arms, baseline, nil
}

func (s *Server) handleBench(w http.ResponseWriter, r *http.Request) {
	run, err := s.run(r, KindBench)
	if err != nil {
		reply(w, nil, err)
		return
	}
	rep, err := run.bench.report()
	reply(w, rep, err)
}

// BenchItem is one arm's result on one task, without its answer.
type BenchItem struct {
	Rec       int      `json:"rec"` // the line of the results file, from 0
	Arm       string   `json:"arm"`
	TaskID    string   `json:"task_id"`
	Correct   bool     `json:"correct"`
	Extracted string   `json:"extracted"`
	Reference string   `json:"reference,omitempty"`
	Score     *float64 `json:"score,omitempty"`
	Dollars   float64  `json:"dollars"`
	Calls     int      `json:"calls"`
	LatencyMS float64  `json:"latency_ms"`
	Failure   string   `json:"failure,omitempty"`
	Error     string   `json:"error,omitempty"`
	HasTrace  bool     `json:"has_trace"`
	// Answer is filled in only where one item is asked for.
	Answer string `json:"answer,omitempty"`
}

func (b *benchRun) item(i int) BenchItem {
	r := &b.recs[i]
	return BenchItem{Rec: i, Arm: r.Arm, TaskID: r.TaskID, Correct: r.Correct, Extracted: r.Extracted, Reference: r.Reference,
		Score: r.Score, Dollars: r.Total.Cost, Calls: r.Total.Calls, LatencyMS: ms(r.Latency), Failure: r.Failure, Error: r.Error,
		HasTrace: b.hasTrace[i]}
}

// handleBenchItems pages the results of one arm (?arm=), all arms when
// none is named; ?correct=true or false keeps those alone.
func (s *Server) handleBenchItems(w http.ResponseWriter, r *http.Request) {
	run, err := s.run(r, KindBench)
	if err != nil {
		reply(w, nil, err)
		return
	}
	offset, limit, err := page(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	q := r.URL.Query()
	arm, correct := q.Get("arm"), q.Get("correct")
	if correct != "" && correct != "true" && correct != "false" {
		reply(w, nil, badRequest("correct %q: want true or false", correct))
		return
	}
	b := run.bench
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.updateLocked(); err != nil {
		reply(w, nil, err)
		return
	}
	out := listPage[BenchItem]{Offset: offset, Limit: limit, Items: []BenchItem{}, Progress: b.idx.progress()}
	for i := range b.recs {
		rec := &b.recs[i]
		if arm != "" && rec.Arm != arm || correct != "" && (correct == "true") != rec.Correct {
			continue
		}
		if out.Total >= offset && len(out.Items) < limit {
			out.Items = append(out.Items, b.item(i))
		}
		out.Total++
	}
	reply(w, out, nil)
}

// handleBenchItem serves one task (?task=) under every arm, answers
// included, for a side-by-side view.
func (s *Server) handleBenchItem(w http.ResponseWriter, r *http.Request) {
	run, err := s.run(r, KindBench)
	if err != nil {
		reply(w, nil, err)
		return
	}
	task := r.URL.Query().Get("task")
	b := run.bench
	b.mu.Lock()
	if err := b.updateLocked(); err != nil {
		b.mu.Unlock()
		reply(w, nil, err)
		return
	}
	var items []BenchItem
	for i := range b.recs {
		if b.recs[i].TaskID == task {
			items = append(items, b.item(i))
		}
	}
	b.mu.Unlock()
	if len(items) == 0 {
		reply(w, nil, notFound("no result for task %q", task))
		return
	}
	for i := range items {
		rec, err := b.record(items[i].Rec)
		if err != nil {
			reply(w, nil, err)
			return
		}
		items[i].Answer = rec.Answer
	}
	reply(w, map[string]any{"task_id": task, "arms": items}, nil)
}
