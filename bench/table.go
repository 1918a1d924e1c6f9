package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// NA is how a value that does not exist is printed.
const NA = "n/a"

// defined reports whether v is a number to print.
func defined(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// fixed prints v with prec decimals, or NA.
func fixed(v float64, prec int) string {
	if !defined(v) {
		return NA
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// full prints v with 12 significant digits, or NA.
// That is enough for any figure of the table and drops the noise of summing floats.
func full(v float64) string {
	if !defined(v) {
		return NA
	}
	return strconv.FormatFloat(v, 'g', 12, 64)
}

// pValue prints a p-value with 4 decimals, or 2 significant digits below 0.0001.
// A tiny p then never reads as 0.
func pValue(p float64) string {
	switch {
	case !defined(p):
		return NA
	case p > 0 && p < 0.0001:
		return strconv.FormatFloat(p, 'e', 1, 64)
	}
	return strconv.FormatFloat(p, 'f', 4, 64)
}

// percentCI prints an accuracy and its interval in percent: "87.5 [73.9, 94.5]".
func percentCI(acc float64, ci Interval) string {
	if !defined(acc) {
		return NA
	}
	return fmt.Sprintf("%s [%s, %s]", fixed(100*acc, 1), fixed(100*ci.Lo, 1), fixed(100*ci.Hi, 1))
}

func (r *Row) mcNemarCell() string {
	if r.McNemar == nil {
		return "baseline"
	}
	m := r.McNemar
	if !defined(m.P) {
		return NA
	}
	return fmt.Sprintf("%s (%s; b=%d, c=%d)", pValue(m.P), m.Method, m.B, m.C)
}

func (r *Row) rolesCell() string {
	if len(r.Roles) == 0 {
		return NA
	}
	parts := make([]string, len(r.Roles))
	for i, rm := range r.Roles {
		parts[i] = fmt.Sprintf("%s %s/%s", rm.Role, fixed(rm.In, 1), fixed(rm.Out, 1))
	}
	return strings.Join(parts, "; ")
}

func (r *Row) armCell() string {
	name := r.Arm
	if r.Role != RoleNone {
		name += " (" + string(r.Role) + ")"
	}
	return name
}

// dollarsCell prints dollars with at least 6 decimals and at least 4
// significant digits: "$0.001300", "$0.00003169".
func dollarsCell(v float64) string {
	if !defined(v) {
		return NA
	}
	prec := 6
	if a := math.Abs(v); a > 0 && a < 1e-3 {
		prec = min(12, 3-int(math.Floor(math.Log10(a))))
	}
	return "$" + strconv.FormatFloat(v, 'f', prec, 64)
}

// passDollars prints dollars per correct answer, "∞" with none correct.
func passDollars(v float64) string {
	if math.IsInf(v, 1) {
		return "∞"
	}
	return dollarsCell(v)
}

// costOfPassCell prints cost of pass and its interval: "$0.0040 [$0.0031, $0.0052]".
func (r *Row) costOfPassCell() string {
	if math.IsNaN(r.CostOfPass) {
		return NA
	}
	if math.IsInf(r.CostOfPass, 1) {
		return "∞ (none correct)"
	}
	return fmt.Sprintf("%s [%s, %s]", passDollars(r.CostOfPass), passDollars(r.CostOfPassCI.Lo), passDollars(r.CostOfPassCI.Hi))
}

// secondsCell prints a latency in s, ms or µs, whichever keeps it from 1
// to 1000.
func secondsCell(v float64) string {
	switch {
	case !defined(v):
		return NA
	case v >= 1 || v == 0:
		return strconv.FormatFloat(v, 'f', 2, 64) + " s"
	case v >= 1e-3:
		return strconv.FormatFloat(v*1e3, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(v*1e6, 'f', 1, 64) + " µs"
}

// WriteMarkdown writes the table, one row per arm, then notes saying how
// each figure was computed.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	scored := rep.scored()
	score, scoreAlign := "", ""
	if scored {
		score, scoreAlign = " score [95% CI] |", "--:|"
	}
	b.WriteString("| arm | strategy | n | accuracy % [95% CI] |" + score + " McNemar p vs baseline | PGR | tokens in/item | tokens out/item | tokens in/out per role | $/item | $/correct [95% CI] | latency p50 | latency p95 | calls/item | failures | errors |\n")
	b.WriteString("|---|---|--:|---|" + scoreAlign + "---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for i := range rep.Rows {
		r := &rep.Rows[i]
		cells := []string{r.armCell(), r.Strategy, strconv.Itoa(r.N), percentCI(r.Accuracy, r.CI)}
		if scored {
			cells = append(cells, scoreCell(r.Score, r.ScoreCI))
		}
		cells = append(cells, r.mcNemarCell(),
			fixed(r.PGR, 3), fixed(r.TokensIn, 1), fixed(r.TokensOut, 1), r.rolesCell(), dollarsCell(r.Dollars), r.costOfPassCell(),
			secondsCell(r.LatencyP50), secondsCell(r.LatencyP95), fixed(r.Calls, 2), strconv.Itoa(r.Failures), strconv.Itoa(r.Errors),
		)
		for j, c := range cells {
			cells[j] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "- n = %d tasks, the ones every arm finished; every row covers the same tasks.", rep.Tasks)
	if rep.Incomplete > 0 {
		fmt.Fprintf(&b, " %d tasks some arm has not finished are left out.", rep.Incomplete)
	}
	b.WriteString("\n")
	b.WriteString("- Accuracy: correct / n, Wilson score 95% interval. Failures: items whose strategy reported one (answer format, " +
		"truncation, a failed call), still graded; errors: items that could not be run or graded, counted wrong.\n")
	fmt.Fprintf(&b, "- McNemar: paired test against the baseline %q on the same tasks; b = baseline right and arm wrong, "+
		"c = baseline wrong and arm right; %s = two-sided exact binomial (b + c < %d), %s = chi-square with continuity correction.\n",
		rep.Baseline, McNemarExact, mcNemarExactBelow, McNemarChiSquare)
	if rep.Weak != "" && rep.Strong != "" {
		fmt.Fprintf(&b, "- PGR = (acc - acc(%s)) / (acc(%s) - acc(%s)). %s: %q where it is right, %q elsewhere, computed offline from saved correctness; "+
			"its tokens, dollars and latency are those of the arm it picks.\n",
			rep.Weak, rep.Strong, rep.Weak, OracleArm, rep.Weak, rep.Strong)
	} else {
		b.WriteString("- PGR: n/a, it needs one arm marked weak and one marked strong.\n")
	}
	if scored {
		b.WriteString("- Score: the grader's mean score over the items it scored (a judge's 0-100 rating; items it could not score are left out and counted in errors), " +
			"interval mean ± 1.96 standard errors.\n")
	}
	fmt.Fprintf(&b, "- $/correct: cost of pass, dollars per correct answer = $/item / accuracy; interval: percentile bootstrap over items, %d resamples, seed %d; ∞ where no answer (or too many resamples) is correct.\n",
		CostOfPassResamples, CostOfPassSeed)
	b.WriteString("- Tokens and dollars: means per item of every call of every role, from the backends' usage; latency: wall time per item, quantiles by linear interpolation.\n")
	for _, role := range sortedKeys(rep.Grading) {
		t := rep.Grading[role]
		fmt.Fprintf(&b, "- Grading (role %s, not in the rows): %d calls, %d failed, %d tokens in, %d out, %s in all.\n",
			role, t.Calls, t.Errors, t.Usage.PromptTokens, t.Usage.CompletionTokens, dollarsCell(t.Cost))
	}
	if rep.Repair != nil {
		fmt.Fprintf(&b, "- Results file repaired: %s.\n", rep.Repair)
	}
	for _, n := range rep.Notes {
		b.WriteString("- " + n + "\n")
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write markdown table: %w", err)
	}
	return nil
}

// WriteCSV writes the table as CSV with a header line and one row per arm.
// Numbers are at full precision and the interval takes two columns.
// Each role of Report.Roles gets its own token columns, n/a where the arm has no such role.
func (rep *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	head := []string{"arm", "strategy", "role", "oracle", "n", "correct", "accuracy", "accuracy_lo", "accuracy_hi",
		"mcnemar_b", "mcnemar_c", "mcnemar_p", "mcnemar_test", "pgr", "tokens_in", "tokens_out"}
	for _, role := range rep.Roles {
		head = append(head, "calls_"+role, "tokens_in_"+role, "tokens_out_"+role, "dollars_"+role)
	}
	head = append(head, "dollars", "cost_of_pass", "cost_of_pass_lo", "cost_of_pass_hi", "latency_p50_s", "latency_p95_s", "calls", "failures", "errors", "scored", "score", "score_lo", "score_hi")
	if err := cw.Write(head); err != nil {
		return fmt.Errorf("write csv table: %w", err)
	}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		mb, mc, mp, mt := "", "", "", "baseline"
		if m := r.McNemar; m != nil {
			mb, mc, mp, mt = strconv.Itoa(m.B), strconv.Itoa(m.C), full(m.P), m.Method
			if !defined(m.P) {
				mb, mc, mt = NA, NA, NA
			}
		}
		rec := []string{r.Arm, r.Strategy, string(r.Role), strconv.FormatBool(r.Oracle), strconv.Itoa(r.N), strconv.Itoa(r.Correct),
			full(r.Accuracy), full(r.CI.Lo), full(r.CI.Hi), mb, mc, mp, mt, full(r.PGR), full(r.TokensIn), full(r.TokensOut)}
		for _, role := range rep.Roles {
			cells := []string{NA, NA, NA, NA}
			for _, rm := range r.Roles {
				if rm.Role == role {
					cells = []string{full(rm.Calls), full(rm.In), full(rm.Out), full(rm.Dollars)}
				}
			}
			rec = append(rec, cells...)
		}
		rec = append(rec, full(r.Dollars), passFull(r.CostOfPass), passFull(r.CostOfPassCI.Lo), passFull(r.CostOfPassCI.Hi), full(r.LatencyP50), full(r.LatencyP95), full(r.Calls), strconv.Itoa(r.Failures), strconv.Itoa(r.Errors),
			strconv.Itoa(r.Scored), full(r.Score), full(r.ScoreCI.Lo), full(r.ScoreCI.Hi))
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write csv table: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv table: %w", err)
	}
	return nil
}

// passFull prints a cost of pass at full precision, "inf" with none
// correct.
func passFull(v float64) string {
	if math.IsInf(v, 1) {
		return "inf"
	}
	return full(v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// scored reports whether any row has graded scores.
func (rep *Report) scored() bool {
	for i := range rep.Rows {
		if rep.Rows[i].Scored > 0 {
			return true
		}
	}
	return false
}

// scoreCell prints a mean score with its interval: "72.5 [68.1, 76.9]".
func scoreCell(v float64, iv Interval) string {
	if !defined(v) {
		return NA
	}
	if !defined(iv.Lo) || !defined(iv.Hi) {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return fmt.Sprintf("%.1f [%.1f, %.1f]", v, iv.Lo, iv.Hi)
}
