package bench

import (
	"fmt"
	"math"
	"sort"

	"github.com/delegatelab/delegate"
)

// OracleArm names the oracle router's row: the weak arm's result where it
// is correct, the strong arm's elsewhere. No arm may take this name.
const OracleArm = "oracle router"

// OracleStrategy is the Strategy column of the oracle router's row.
const OracleStrategy = "oracle"

// Report is the summary of a benchmark: one row per arm.
// The oracle router gets a row too when a weak and a strong arm are marked.
// Every row covers the same tasks: those every arm finished.
// Values that do not exist are NaN and print as "n/a".
type Report struct {
	// Tasks is the number of tasks every arm finished, which every row covers.
	// Incomplete counts the tasks left out because some arm has no record of them,
	// as after an interrupted run.
	Tasks, Incomplete int
	Baseline          string // the arm the McNemar tests compare with
	Weak, Strong      string // the arms marked RoleWeak and RoleStrong, or ""
	// FrontierStrong and FrontierWeak name the arms between which the frontier plot draws its lines.
	// Those are the oracle and random mixing. Empty takes Strong and Weak.
	FrontierStrong, FrontierWeak string
	Rows                         []Row
	// Roles lists every role seen in any row, sorted.
	Roles []string
	// Notes are printed as they are under the Markdown table.
	// They say what the table cannot: models, endpoint, hardware, dataset and sample seed.
	Notes []string
	// Grading sums, by role and over every arm, the calls made to grade the rows' answers.
	// None of it is in the rows.
	Grading map[string]delegate.Totals

	// items holds each arm's per-item results, aligned by task, for the
	// frontier (Frontier).
	items map[string][]itemResult

	// Run sets these: items taken from the results file and the repair of a cut last line.
	// DroppedProgress counts progress values a slow observer missed.
	Resumed         int
	Repair          *Repair
	DroppedProgress int64
}

// Row is one arm's figures. Means are per item, over Report.Tasks items.
type Row struct {
	Arm      string
	Strategy string
	Role     Role
	Oracle   bool // the oracle router, computed from the weak and strong arms

	N, Correct int
	Accuracy   float64  // Correct / N
	CI         Interval // Wilson 95%
	// McNemar compares with the baseline arm on the same items; nil on the
	// baseline's own row.
	McNemar *McNemar
	// PGR is (Accuracy - weak) / (strong - weak).
	// It is NaN unless a weak and a strong arm are marked and their accuracies differ.
	PGR float64

	TokensIn, TokensOut float64 // prompt and completion tokens over all roles
	Roles               []RoleMeans
	Dollars             float64
	// CostOfPass is dollars per correct answer: Dollars / Accuracy.
	// Its 95% interval is the percentile bootstrap over items. +Inf with no correct answer.
	CostOfPass   float64
	CostOfPassCI Interval
	Calls        float64
	// LatencyP50 and LatencyP95 are quantiles of the items' wall time, in seconds.
	// Quantile interpolates them linearly.
	LatencyP50, LatencyP95 float64
	// Failures counts items whose strategy reported a failure (answer
	// format, truncation, a failed call: Record.Failure); their answers were
	// still graded. Errors counts items that could not be run or graded (a
	// panic, a timeout, a verifier error: Record.Error); they are wrong.
	Failures, Errors int
	// Scored counts the items the grader gave a score, such as a judge's rating.
	// Score is their mean, NaN without scores.
	// ScoreCI is its normal 95% interval, mean ± 1.96 standard errors, NaN below two scores.
	Scored  int
	Score   float64
	ScoreCI Interval
}

// RoleMeans holds one role's means per item.
type RoleMeans struct {
	Role     string
	Calls    float64
	In, Out  float64 // prompt and completion tokens
	Dollars  float64
	CachedIn float64 // the part of In served from a prompt cache
	Errors   float64 // failed calls
}

// Summarize computes the report of records for arms over tasks. tasks nil
// means every task that appears in records; records of other arms or tasks
// are ignored. baseline "" is the first arm.
func Summarize(baseline string, tasks []delegate.Task, arms []Arm, records []Record) (*Report, error) {
	if err := checkArms(arms, baseline); err != nil {
		return nil, fmt.Errorf("summarize: %w", err)
	}
	if baseline == "" {
		baseline = arms[0].Name
	}
	byItem, ids, err := indexRecords(records)
	if err != nil {
		return nil, fmt.Errorf("summarize: %w", err)
	}
	if tasks != nil {
		ids = ids[:0]
		for _, t := range tasks {
			ids = append(ids, t.ID)
		}
	} else {
		sort.Strings(ids)
	}

	rep := &Report{Baseline: baseline}
	for _, a := range arms {
		switch a.Role {
		case RoleWeak:
			rep.Weak = a.Name
		case RoleStrong:
			rep.Strong = a.Name
		}
	}
	perArm := rep.completeItems(arms, ids, byItem)
	rep.items = map[string][]itemResult{}
	var base, weak, strong []*Record
	for j, a := range arms {
		rep.items[a.Name] = itemResults(perArm[j])
		if a.Name == baseline {
			base = perArm[j]
		}
		switch a.Name {
		case rep.Weak:
			weak = perArm[j]
		case rep.Strong:
			strong = perArm[j]
		}
	}
	for j, a := range arms {
		strat := ""
		if a.Strategy != nil {
			strat = a.Strategy.Name()
		} else if len(perArm[j]) > 0 {
			strat = perArm[j][0].Strategy
		}
		rep.Rows = append(rep.Rows, summarizeArm(a.Name, strat, a.Role, perArm[j], base, a.Name == baseline))
	}
	if weak != nil && strong != nil {
		row := summarizeArm(OracleArm, OracleStrategy, RoleNone, oracleRecords(weak, strong), base, false)
		row.Oracle = true
		rep.Rows = append(rep.Rows, row)
	}
	rep.fillPGRAndRoles(weak, strong)
	return rep, nil
}

// indexRecords indexes records by arm and task, and lists the task ids in
// the order they first appear. A task recorded twice for one arm is an
// error.
func indexRecords(records []Record) (map[itemKey]*Record, []string, error) {
	byItem := map[itemKey]*Record{}
	var ids []string
	seenID := map[string]bool{}
	for i := range records {
		r := &records[i]
		k := itemKey{r.Arm, r.TaskID}
		if _, dup := byItem[k]; dup {
			return nil, nil, fmt.Errorf("arm %q task %q recorded twice", r.Arm, r.TaskID)
		}
		byItem[k] = r
		if !seenID[r.TaskID] {
			seenID[r.TaskID] = true
			ids = append(ids, r.TaskID)
		}
	}
	return byItem, ids, nil
}

// completeItems returns, per arm, the records of the items every arm finished, in the order of ids.
// It counts those and the others in rep, with the grading's usage.
func (rep *Report) completeItems(arms []Arm, ids []string, byItem map[itemKey]*Record) [][]*Record {
	perArm := make([][]*Record, len(arms))
	for _, id := range ids {
		complete := true
		for _, a := range arms {
			if byItem[itemKey{a.Name, id}] == nil {
				complete = false
				break
			}
		}
		if !complete {
			rep.Incomplete++
			continue
		}
		rep.Tasks++
		for j, a := range arms {
			r := byItem[itemKey{a.Name, id}]
			perArm[j] = append(perArm[j], r)
			if len(r.Grading) > 0 {
				if rep.Grading == nil {
					rep.Grading = map[string]delegate.Totals{}
				}
				addTotals(rep.Grading, r.Grading)
			}
		}
	}
	return perArm
}

// oracleRecords picks per item the weak arm's record where it is right,
// the strong arm's elsewhere.
func oracleRecords(weak, strong []*Record) []*Record {
	oracle := make([]*Record, len(weak))
	for i := range weak {
		oracle[i] = weak[i]
		if !weak[i].Correct {
			oracle[i] = strong[i]
		}
	}
	return oracle
}

// fillPGRAndRoles sets each row's PGR (NaN without a weak and a strong
// arm) and lists the roles of every row.
func (rep *Report) fillPGRAndRoles(weak, strong []*Record) {
	roles := map[string]bool{}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		r.PGR = math.NaN()
		if weak != nil && strong != nil {
			wAcc, sAcc := accuracy(weak), accuracy(strong)
			if v, ok := PGR(r.Accuracy, wAcc, sAcc); ok && !math.IsNaN(r.Accuracy) {
				r.PGR = v
			}
		}
		for _, rm := range r.Roles {
			roles[rm.Role] = true
		}
	}
	for role := range roles {
		rep.Roles = append(rep.Roles, role)
	}
	sort.Strings(rep.Roles)
}

func accuracy(recs []*Record) float64 {
	if len(recs) == 0 {
		return math.NaN()
	}
	k := 0
	for _, r := range recs {
		if r.Correct {
			k++
		}
	}
	return float64(k) / float64(len(recs))
}

// summarizeArm computes one row from the arm's records, aligned item by
// item with the baseline's.
func summarizeArm(name, strat string, role Role, recs, base []*Record, isBaseline bool) Row {
	row := Row{Arm: name, Strategy: strat, Role: role, N: len(recs)}
	nan := math.NaN()
	var scores []float64
	for _, r := range recs {
		if r.Score != nil {
			scores = append(scores, *r.Score)
		}
	}
	row.Scored = len(scores)
	row.Score, row.ScoreCI = MeanCI(scores)
	if len(recs) == 0 {
		row.Accuracy, row.CI = nan, Interval{nan, nan}
		row.TokensIn, row.TokensOut, row.Dollars, row.Calls = nan, nan, nan, nan
		row.CostOfPass, row.CostOfPassCI = nan, Interval{nan, nan}
		row.LatencyP50, row.LatencyP95 = nan, nan
		if !isBaseline {
			row.McNemar = &McNemar{P: nan}
		}
		return row
	}
	n := float64(len(recs))
	lat := make([]float64, len(recs))
	var in, out, calls int
	var dollars float64
	for i, r := range recs {
		if r.Correct {
			row.Correct++
		}
		if r.Failure != "" {
			row.Failures++
		}
		if r.Error != "" {
			row.Errors++
		}
		in += r.Total.Usage.PromptTokens
		out += r.Total.Usage.CompletionTokens
		calls += r.Total.Calls
		dollars += r.Total.Cost
		lat[i] = r.Latency.Seconds()
	}
	row.Accuracy = float64(row.Correct) / n
	row.CI, _ = Wilson(row.Correct, len(recs))
	row.TokensIn, row.TokensOut = float64(in)/n, float64(out)/n
	row.Dollars, row.Calls = dollars/n, float64(calls)/n
	cost := make([]float64, len(recs))
	right := make([]bool, len(recs))
	for i, r := range recs {
		cost[i], right[i] = r.Total.Cost, r.Correct
	}
	row.CostOfPass, row.CostOfPassCI, _ = CostOfPass(cost, right, CostOfPassResamples, CostOfPassSeed)
	row.LatencyP50, _ = Quantile(lat, 0.50)
	row.LatencyP95, _ = Quantile(lat, 0.95)
	row.Roles = roleMeans(recs)
	if !isBaseline {
		var b, c int
		for i := range recs {
			switch {
			case base[i].Correct && !recs[i].Correct:
				b++
			case !base[i].Correct && recs[i].Correct:
				c++
			}
		}
		m := McNemarTest(b, c)
		row.McNemar = &m
	}
	return row
}

// roleMeans gives each role's means per item over recs, none empty,
// sorted by role.
func roleMeans(recs []*Record) []RoleMeans {
	roles := map[string]*RoleMeans{}
	for _, r := range recs {
		for role, t := range r.Roles {
			rm := roles[role]
			if rm == nil {
				rm = &RoleMeans{Role: role}
				roles[role] = rm
			}
			rm.Calls += float64(t.Calls)
			rm.In += float64(t.Usage.PromptTokens)
			rm.Out += float64(t.Usage.CompletionTokens)
			rm.CachedIn += float64(t.Usage.CachedTokens)
			rm.Dollars += t.Cost
			rm.Errors += float64(t.Errors)
		}
	}
	n := float64(len(recs))
	var out []RoleMeans
	for _, rm := range roles {
		rm.Calls /= n
		rm.In /= n
		rm.Out /= n
		rm.CachedIn /= n
		rm.Dollars /= n
		rm.Errors /= n
		out = append(out, *rm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Role < out[j].Role })
	return out
}

// MeanCI returns the mean of xs and its normal 95% interval, mean ± 1.96·s/√n.
// s is the sample standard deviation.
// The mean is NaN when xs is empty, and the interval NaN with fewer than two values.
func MeanCI(xs []float64) (float64, Interval) {
	nan := math.NaN()
	if len(xs) == 0 {
		return nan, Interval{nan, nan}
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	n := float64(len(xs))
	mean := sum / n
	if len(xs) < 2 {
		return mean, Interval{nan, nan}
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	se := math.Sqrt(ss/(n-1)) / math.Sqrt(n)
	return mean, Interval{mean - 1.96*se, mean + 1.96*se}
}
