package view

import (
	"math"
	"net/http"
	"path/filepath"
	"sort"
	"sync"

	"github.com/delegatelab/delegate/rollout"
)

// rolloutRun is a directory of process: artifacts.jsonl indexed by
// offset with a few numbers per rollout, and groups.jsonl counted.
type rolloutRun struct {
	mu     sync.Mutex // guards everything below
	idx    lines
	rows   []rolloutRow
	groups lines
	// dropped counts the groups not trained on, by reason ("" kept).
	dropped map[string]int
}

// rolloutRow is what the view keeps of one rollout; the rest is read
// from disk when the rollout is opened.
type rolloutRow struct {
	id, task, strategy string
	failed             bool
	hasTrace           bool
	hasScore           bool
	reward, score      float64
	cost               float64
	calls              int
	latencyMS          float64
}

func newRolloutRun(dir string) *rolloutRun {
	return &rolloutRun{idx: lines{path: filepath.Join(dir, rollout.ArtifactsFile)},
		groups: lines{path: filepath.Join(dir, rollout.GroupsFile)}, dropped: map[string]int{}}
}

// updateLocked indexes what was written since the last call, for at
// most requestBudget per file (lines.advance).
func (ro *rolloutRun) updateLocked() error { return ro.indexLocked(false) }

func (ro *rolloutRun) indexLocked(background bool) error {
	err := ro.idx.advance(background, func(_ int, raw []byte) error {
		var a rollout.Artifact
		if err := decodeVersioned(raw, &a, func() int { return a.Version }, rollout.ArtifactVersion, "rollout"); err != nil {
			return err
		}
		row := rolloutRow{id: a.ID, task: a.TaskID, strategy: a.Strategy, failed: a.Status != rollout.StatusScored,
			hasTrace: a.Trace != nil, reward: a.Reward, cost: a.Total.Cost, calls: a.Total.Calls, latencyMS: ms(a.Latency)}
		if a.Score != nil {
			row.hasScore, row.score = true, a.Score.Candidate
		}
		ro.rows = append(ro.rows, row)
		return nil
	})
	if err != nil {
		return err
	}
	return ro.groups.advance(background, func(_ int, raw []byte) error {
		var g rollout.GroupRecord
		if err := decodeVersioned(raw, &g, func() int { return g.Version }, rollout.GroupVersion, "group"); err != nil {
			return err
		}
		ro.dropped[g.Reason]++
		return nil
	})
}

func (ro *rolloutRun) refresh() (bool, error) {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	err := ro.indexLocked(true)
	return ro.idx.behind || ro.groups.behind, err
}

func (ro *rolloutRun) count() (int, error) {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	err := ro.updateLocked()
	return len(ro.rows), err
}

func (ro *rolloutRun) artifact(i int) (*rollout.Artifact, error) {
	return readLine[rollout.Artifact](&ro.mu, &ro.idx, i, "rollout")
}

// RolloutStats sums the rollouts of one strategy (or of all).
type RolloutStats struct {
	Strategy string  `json:"strategy"`
	N        int     `json:"n"`
	Failed   int     `json:"failed"`
	Reward   float64 `json:"reward"` // mean over scored rollouts
	// Score is the mean candidate score (1/0 for a verifier, a judge's
	// 0-100) over the rollouts that have one.
	Score     *float64 `json:"score"`
	Cost      float64  `json:"cost"` // mean dollars over all
	Calls     float64  `json:"calls"`
	LatencyMS float64  `json:"latency_ms"`

	scored, withScore int
	scoreSum          float64
}

func (st *RolloutStats) add(r *rolloutRow) {
	st.N++
	st.Cost += r.cost
	st.Calls += float64(r.calls)
	st.LatencyMS += r.latencyMS
	if r.failed {
		st.Failed++
		return
	}
	st.scored++
	st.Reward += r.reward
	if r.hasScore {
		st.withScore++
		st.scoreSum += r.score
	}
}

func (st *RolloutStats) finish() {
	if st.N > 0 {
		st.Cost /= float64(st.N)
		st.Calls /= float64(st.N)
		st.LatencyMS /= float64(st.N)
	}
	if st.scored > 0 {
		st.Reward /= float64(st.scored)
	}
	if st.withScore > 0 {
		v := st.scoreSum / float64(st.withScore)
		st.Score = &v
	}
}

// RolloutSummary is the server's aggregate of a rollout directory.
type RolloutSummary struct {
	Progress   Progress       `json:"progress"`
	All        RolloutStats   `json:"all"`
	Strategies []RolloutStats `json:"strategies"`
	// Histogram counts the scored rollouts' rewards in Bins equal bins
	// from Min to Max.
	Min       float64        `json:"min"`
	Max       float64        `json:"max"`
	Histogram []int          `json:"histogram"`
	Groups    int            `json:"groups"`
	Dropped   map[string]int `json:"dropped"` // groups not trained on, by reason
}

const histogramBins = 20

func (ro *rolloutRun) summary() (*RolloutSummary, error) {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	if err := ro.updateLocked(); err != nil {
		return nil, err
	}
	out := &RolloutSummary{Progress: ro.idx.progress(), All: RolloutStats{Strategy: "all"}, Histogram: make([]int, histogramBins), Dropped: map[string]int{}}
	by := map[string]*RolloutStats{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range ro.rows {
		r := &ro.rows[i]
		out.All.add(r)
		st := by[r.strategy]
		if st == nil {
			st = &RolloutStats{Strategy: r.strategy}
			by[r.strategy] = st
		}
		st.add(r)
		if !r.failed {
			lo, hi = math.Min(lo, r.reward), math.Max(hi, r.reward)
		}
	}
	out.All.finish()
	for _, k := range sortedKeys(by) {
		by[k].finish()
		out.Strategies = append(out.Strategies, *by[k])
	}
	if lo <= hi {
		out.Min, out.Max = lo, hi
		width := (hi - lo) / histogramBins
		for i := range ro.rows {
			if r := &ro.rows[i]; !r.failed {
				b := histogramBins - 1
				if width > 0 {
					b = min(int((r.reward-lo)/width), histogramBins-1)
				}
				out.Histogram[b]++
			}
		}
	}
	for k, v := range ro.dropped {
		out.Groups += v
		if k != "" {
			out.Dropped[k] = v
		}
	}
	return out, nil
}

func (s *Server) handleRollouts(w http.ResponseWriter, r *http.Request) {
	run, err := s.run(r, KindRollouts)
	if err != nil {
		reply(w, nil, err)
		return
	}
	sum, err := run.rollouts.summary()
	reply(w, sum, err)
}

// RolloutItem is one rollout in a list.
type RolloutItem struct {
	Rec       int      `json:"rec"`
	ID        string   `json:"id"`
	TaskID    string   `json:"task_id"`
	Strategy  string   `json:"strategy"`
	Failed    bool     `json:"failed"`
	Reward    float64  `json:"reward"`
	Score     *float64 `json:"score"`
	Cost      float64  `json:"cost"`
	Calls     int      `json:"calls"`
	LatencyMS float64  `json:"latency_ms"`
	HasTrace  bool     `json:"has_trace"`
}

// rolloutSorts are the orders a rollout list can take besides the file's.
var rolloutSorts = map[string]func(a, b *rolloutRow) bool{
	"reward": func(a, b *rolloutRow) bool { return a.reward < b.reward },
	"cost":   func(a, b *rolloutRow) bool { return a.cost > b.cost },
	"slow":   func(a, b *rolloutRow) bool { return a.latencyMS > b.latencyMS },
}

// handleRolloutList pages rollouts, in the file's order or by ?sort=.
// Sorting by reward puts the lowest first; by cost or slow, the highest.
// ?strategy= and ?failed=true narrow the list.
func (s *Server) handleRolloutList(w http.ResponseWriter, r *http.Request) {
	run, err := s.run(r, KindRollouts)
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
	strat, failed, order := q.Get("strategy"), q.Get("failed") == "true", q.Get("sort")
	less, sorted := rolloutSorts[order]
	if order != "" && !sorted {
		reply(w, nil, badRequest("sort %q: want reward, cost or slow", order))
		return
	}
	ro := run.rollouts
	ro.mu.Lock()
	defer ro.mu.Unlock()
	if err := ro.updateLocked(); err != nil {
		reply(w, nil, err)
		return
	}
	var picked []int32
	for i := range ro.rows {
		if row := &ro.rows[i]; (strat == "" || row.strategy == strat) && (!failed || row.failed) {
			picked = append(picked, int32(i))
		}
	}
	if sorted {
		sort.SliceStable(picked, func(i, j int) bool { return less(&ro.rows[picked[i]], &ro.rows[picked[j]]) })
	}
	out := listPage[RolloutItem]{Total: len(picked), Offset: offset, Limit: limit, Items: []RolloutItem{}, Progress: ro.idx.progress()}
	for k := offset; k < len(picked) && k < offset+limit; k++ {
		i := int(picked[k])
		row := &ro.rows[i]
		it := RolloutItem{Rec: i, ID: row.id, TaskID: row.task, Strategy: row.strategy, Failed: row.failed, Reward: row.reward,
			Cost: row.cost, Calls: row.calls, LatencyMS: row.latencyMS, HasTrace: row.hasTrace}
		if row.hasScore {
			v := row.score
			it.Score = &v
		}
		out.Items = append(out.Items, it)
	}
	reply(w, out, nil)
}

// handleRolloutItem serves one rollout's record as written, traces
// left out (the trace endpoint serves them as trees).
func (s *Server) handleRolloutItem(w http.ResponseWriter, r *http.Request) {
	run, err := s.run(r, KindRollouts)
	if err != nil {
		reply(w, nil, err)
		return
	}
	i, err := index(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	a, err := run.rollouts.artifact(i)
	if err != nil {
		reply(w, nil, err)
		return
	}
	traces := []string{}
	for name, t := range map[string]bool{"trace": a.Trace != nil, "baseline": a.BaselineTrace != nil, "score": a.ScoreTrace != nil} {
		if t {
			traces = append(traces, name)
		}
	}
	sort.Strings(traces)
	a.Trace, a.BaselineTrace, a.ScoreTrace = nil, nil, nil
	reply(w, map[string]any{"rec": i, "rollout": a, "traces": traces}, nil)
}
