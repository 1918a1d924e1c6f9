package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// ReportVersion is the format version of report.json.
const ReportVersion = 1

// jsonReport is report.json: the table's main figures per arm and the
// frontier's data. Numbers that do not exist are null.
type jsonReport struct {
	Version    int       `json:"version"`
	Tasks      int       `json:"tasks"`
	Incomplete int       `json:"incomplete"`
	Baseline   string    `json:"baseline"`
	Weak       string    `json:"weak,omitempty"`
	Strong     string    `json:"strong,omitempty"`
	Rows       []jsonRow `json:"rows"`
	// CostOfPass says how the intervals of cost of pass were computed.
	CostOfPass string    `json:"cost_of_pass_method"`
	Frontier   *Frontier `json:"frontier"`
}

type jsonRow struct {
	Arm        string     `json:"arm"`
	Strategy   string     `json:"strategy"`
	Role       Role       `json:"role,omitempty"`
	Oracle     bool       `json:"oracle,omitempty"`
	N          int        `json:"n"`
	Correct    int        `json:"correct"`
	Accuracy   *float64   `json:"accuracy"`
	AccuracyCI []*float64 `json:"accuracy_ci"`
	Dollars    *float64   `json:"dollars"`
	// CostOfPass is dollars per correct answer; null with none correct
	// (NoneCorrect) or no item. An interval end is null where it is
	// infinite.
	CostOfPass   *float64   `json:"cost_of_pass"`
	CostOfPassCI []*float64 `json:"cost_of_pass_ci"`
	NoneCorrect  bool       `json:"none_correct,omitempty"`
	Calls        *float64   `json:"calls"`
	LatencyP50   *float64   `json:"latency_p50_s"`
	LatencyP95   *float64   `json:"latency_p95_s"`
	Failures     int        `json:"failures"`
	Errors       int        `json:"errors"`
}

func num(v float64) *float64 {
	if !defined(v) {
		return nil
	}
	return &v
}

// WriteJSON writes the report as JSON.
// Per arm it holds accuracy, dollars and cost of pass with their intervals,
// latency, calls, failures and errors.
// It adds the frontier between FrontierStrong and FrontierWeak.
func (rep *Report) WriteJSON(w io.Writer) error {
	f, err := rep.Frontier(rep.FrontierStrong, rep.FrontierWeak)
	if err != nil {
		return fmt.Errorf("write json report: %w", err)
	}
	out := jsonReport{Version: ReportVersion, Tasks: rep.Tasks, Incomplete: rep.Incomplete, Baseline: rep.Baseline,
		Weak: rep.Weak, Strong: rep.Strong, Frontier: f,
		CostOfPass: fmt.Sprintf("percentile bootstrap over items, %d resamples, seed %d", CostOfPassResamples, CostOfPassSeed)}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		out.Rows = append(out.Rows, jsonRow{
			Arm: r.Arm, Strategy: r.Strategy, Role: r.Role, Oracle: r.Oracle, N: r.N, Correct: r.Correct,
			Accuracy: num(r.Accuracy), AccuracyCI: []*float64{num(r.CI.Lo), num(r.CI.Hi)},
			Dollars: num(r.Dollars), CostOfPass: num(r.CostOfPass), CostOfPassCI: []*float64{num(r.CostOfPassCI.Lo), num(r.CostOfPassCI.Hi)},
			NoneCorrect: math.IsInf(r.CostOfPass, 1),
			Calls:       num(r.Calls), LatencyP50: num(r.LatencyP50), LatencyP95: num(r.LatencyP95),
			Failures: r.Failures, Errors: r.Errors,
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write json report: %w", err)
	}
	return nil
}
