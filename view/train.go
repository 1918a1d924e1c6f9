package view

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/delegatelab/delegate/rl"
)

// trainRun is one training run's metrics.jsonl. A step is a handful of
// numbers, so every step is kept.
type trainRun struct {
	mu     sync.Mutex // guards idx and points
	idx    lines
	points []TrainPoint
}

// TrainPoint is one step's figures the charts draw.
type TrainPoint struct {
	Step     int     `json:"step"`
	Steps    int     `json:"steps"`
	Reward   float64 `json:"reward"`
	Accuracy float64 `json:"accuracy"`
	// Cost is the mean dollars of a rollout, when the run reports it
	// (train's "cost" scalar); null otherwise.
	Cost           *float64 `json:"cost"`
	DelegationRate float64  `json:"delegation_rate"`
	// Delegated is the share of each kind of step that was delegated, where the run reports it.
	// It comes from train's delegated_KIND and steps_KIND scalars.
	Delegated map[string]float64 `json:"delegated,omitempty"`
	// Staleness is the mean policy versions by which the step's groups
	// trailed the trainer (0 in process).
	Staleness float64 `json:"staleness"`
	Time      string  `json:"time"`
}

func (t *trainRun) updateLocked() error { return t.indexLocked(false) }

func (t *trainRun) indexLocked(background bool) error {
	return t.idx.advance(background, func(_ int, raw []byte) error {
		var m rl.Metrics
		if err := decodeVersioned(raw, &m, func() int { return m.Version }, rl.MetricsVersion, "metrics"); err != nil {
			return err
		}
		p := TrainPoint{Step: m.Step, Steps: m.Steps, Reward: m.Reward, Accuracy: m.Accuracy, DelegationRate: m.DelegationRate,
			Time: m.Time.UTC().Format(time.RFC3339)}
		if c, ok := m.Scalars["cost"]; ok {
			p.Cost = &c
		}
		p.Delegated = delegatedByKind(m.Scalars)
		p.Staleness = m.StalenessMean
		t.points = append(t.points, p)
		return nil
	})
}

func (t *trainRun) refresh() (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.indexLocked(true)
	return t.idx.behind, err
}

func (t *trainRun) count() (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.updateLocked()
	return len(t.points), err
}

// since returns the points from the n-th on, after indexing new lines.
func (t *trainRun) since(n int) ([]TrainPoint, int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.updateLocked(); err != nil {
		return nil, 0, err
	}
	n = min(n, len(t.points))
	return append([]TrainPoint(nil), t.points[n:]...), len(t.points), nil
}

// TrainSeries is one run's points.
type TrainSeries struct {
	Run    int          `json:"run"`
	Name   string       `json:"name"`
	Points []TrainPoint `json:"points"`
}

// trainRuns reads ?runs=1,2,... (every training run when absent).
func (s *Server) trainRuns(r *http.Request) ([]*Run, error) {
	v := r.URL.Query().Get("runs")
	var out []*Run
	if v == "" {
		for _, run := range s.runs {
			if run.Kind == KindTrain {
				out = append(out, run)
			}
		}
		return out, nil
	}
	for _, id := range strings.Split(v, ",") {
		run, err := s.runByID(id, KindTrain)
		if err != nil {
			return nil, err
		}
		out = append(out, run)
	}
	return out, nil
}

// handleTrain serves the metrics of several runs to overlay.
func (s *Server) handleTrain(w http.ResponseWriter, r *http.Request) {
	runs, err := s.trainRuns(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	out := []TrainSeries{}
	for _, run := range runs {
		pts, _, err := run.train.since(0)
		if err != nil {
			reply(w, nil, err)
			return
		}
		out = append(out, TrainSeries{Run: run.ID, Name: run.Name, Points: pts})
	}
	reply(w, map[string]any{"series": out}, nil)
}

// handleTrainEvents streams a run's new steps as server-sent events. It
// looks at the file every Config.Poll. Each event is one JSON object
// {"run":ID,"points":[...]}, with the count of steps sent so far as its
// id, so that a browser reconnecting with Last-Event-ID resumes there;
// ?after=N starts after the first N steps.
func (s *Server) handleTrainEvents(w http.ResponseWriter, r *http.Request) {
	run, err := s.run(r, KindTrain)
	if err != nil {
		reply(w, nil, err)
		return
	}
	sent, err := resumePoint(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	es := startStream(w, s.cfg.Log)
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	quiet := time.Now()
	for {
		pts, total, err := run.train.since(sent)
		es.extend()
		switch {
		case err != nil:
			es.fail(err)
			return
		case len(pts) > 0:
			sent, quiet = total, time.Now()
			if !es.send(sent, map[string]any{"run": run.ID, "points": pts}) {
				return // the client went away
			}
		case time.Since(quiet) >= heartbeat:
			quiet = time.Now()
			if !es.beat() {
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// delegatedByKind divides each delegated_KIND scalar by its steps_KIND:
// the share of that kind of step delegated. Nil when there is none.
func delegatedByKind(scalars map[string]float64) map[string]float64 {
	var out map[string]float64
	for k, v := range scalars {
		kind, ok := strings.CutPrefix(k, "delegated_")
		if !ok {
			continue
		}
		if steps := scalars["steps_"+kind]; steps > 0 {
			if out == nil {
				out = map[string]float64{}
			}
			out[kind] = v / steps
		}
	}
	return out
}
