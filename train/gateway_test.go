package train

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/rollout"
)

// fakeFeed is a RecordFeed over a fixed list, safe for concurrent use.
// An empty feed fails instead of waiting: a test gives it enough.
type fakeFeed struct {
	mu       sync.Mutex
	recs     []*rollout.GroupRecord
	versions []int
}

func (f *fakeFeed) Next(context.Context) (*rollout.GroupRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.recs) == 0 {
		return nil, errors.New("fake feed: empty")
	}
	r := f.recs[0]
	f.recs = f.recs[1:]
	return r, nil
}

func (f *fakeFeed) SetVersion(v int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.versions = append(f.versions, v)
}

// gatewayRecord is a gateway's group record of two sessions with the same
// reward, sampled by version: a tie, which trains nothing, so that the
// made-up logprobs are never checked.
func gatewayRecord(task string, version int) *rollout.GroupRecord {
	const I = delegate.MaskIgnore
	return &rollout.GroupRecord{Version: rollout.GroupVersion, ID: task + "#0123456789abcdef.delegator", TaskID: task, Strategy: "gateway",
		GroupOverrides: rollout.GroupOverride{GroupSize: 2}, Reason: rollout.DropEqual,
		Rollouts: []rollout.Member{{ID: "a", Index: 0, Reward: 1}, {ID: "b", Index: 1, Reward: 1}},
		Tokens:   [][]int{{1, 5, 3}, {1, 6, 4}}, Masks: [][]int{{I, 5, 3}, {I, 6, 4}},
		InferenceLogprobs: [][]float64{{1, -2, -2}, {1, -2, -3}}, Messages: [][]delegate.Turn{{}, {}},
		Scores: []float64{1, 1}, Advantages: []float64{0, 0}, SequenceRollout: []int{0, 1}, NoTokens: []string{"", ""},
		TokenizedBy: nil, Overrides: []rollout.Override{{SetAdvantageToZero: true}, {SetAdvantageToZero: true}}, PolicyVersion: version}
}

func taskIDs(recs []*rollout.GroupRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}

// runGateway runs a GatewayRun of steps steps over feed and recovered.
func runGateway(t *testing.T, cfg Config, steps, maxStale int, feed *fakeFeed, recovered []*rollout.GroupRecord) *GatewayRun {
	t.Helper()
	cfg.RL.Steps, cfg.RL.Schedule.Total = steps, steps
	lc := local.DefaultConfig()
	lc.Name = "delegator"
	run, err := NewGatewayRun(cfg, GatewayConfig{Model: lc, Feed: feed, Recovered: recovered, MaxStaleness: maxStale}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := run.Close(); err != nil {
		t.Fatal(err)
	}
	return run
}

// TestGatewayRunResumes checks which records a GatewayRun trains across
// restarts. A finished step's records are never trained again. Records
// the gateway handed over but no finished step took are trained first.
// A step cut short by a crash is taken again from its first record, and a
// torn line of the step log is dropped. A record staler than MaxStaleness
// is dropped and logged.
func TestGatewayRunResumes(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.RL.GroupSize, cfg.RL.ItemsPerStep = 2, 2
	r := make([]*rollout.GroupRecord, 9)
	for i := range r {
		r[i] = gatewayRecord("t"+string(rune('0'+i)), 0)
	}
	for _, i := range []int{4, 5, 7, 8} {
		r[i].PolicyVersion = 2 // sampled after step 2
	}

	// Run 1: one step on r0 and r1; r2 was handed over, not trained.
	feed := &fakeFeed{recs: r[:3]}
	run := runGateway(t, cfg, 1, 0, feed, nil)
	if run.Start() != 0 || !slices.Equal(feed.versions, []int{0}) {
		t.Errorf("run 1: start %d, versions served %v; want 0 and [0]", run.Start(), feed.versions)
	}

	// Run 2, after a stop: r2 first, then the feed's r3.
	feed = &fakeFeed{recs: r[3:4]}
	run = runGateway(t, cfg, 2, 0, feed, r[:3])
	if run.Start() != 1 || !slices.Equal(feed.versions, []int{1}) {
		t.Errorf("run 2: start %d, versions served %v; want 1 and [1]", run.Start(), feed.versions)
	}

	// A crash in step 3 after it logged r4 and r5 and began a line.
	path := filepath.Join(cfg.OutDir, GatewaySteps)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"version":1,"step":3,"groups":["` + r[4].ID + `","` + r[5].ID + `"]}` + "\n" + `{"version":1,"st`); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// Run 3 takes step 3 again from r4. With a staleness bound of 1 at
	// step 4 (version 3), r6 of version 0 is dropped.
	feed = &fakeFeed{recs: r[6:]}
	runGateway(t, cfg, 4, 1, feed, r[:6])

	logged, lf, err := openStepLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := lf.Close(); err != nil {
		t.Fatal(err)
	}
	type step struct {
		step          int
		groups, stale []string
	}
	want := []step{
		{1, taskIDs(r[0:2]), nil},
		{2, taskIDs(r[2:4]), nil},
		{3, taskIDs(r[4:6]), nil}, // the crashed run's line
		{3, taskIDs(r[4:6]), nil},
		{4, taskIDs(r[7:9]), taskIDs(r[6:7])},
	}
	var got []step
	for _, e := range logged {
		got = append(got, step{e.Step, e.Groups, e.Stale})
	}
	if len(got) != len(want) {
		t.Fatalf("step log %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].step != want[i].step || !slices.Equal(got[i].groups, want[i].groups) || !slices.Equal(got[i].stale, want[i].stale) {
			t.Errorf("step log line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	ms := readMetrics(t, cfg.OutDir)
	if len(ms) != 4 {
		t.Fatalf("%d metrics lines, want 4", len(ms))
	}
	for _, m := range ms {
		if m.Groups != 2 || m.Rollouts != 4 || !m.Skipped {
			t.Errorf("step %d: %d groups, %d rollouts, skipped %v; want 2 tied groups of 2, skipped", m.Step, m.Groups, m.Rollouts, m.Skipped)
		}
	}
	if st := ms[3].StalenessGroups; !slices.Equal(st, []int{0, 2}) {
		t.Errorf("step 4 staleness histogram %v, want [0 2]: r7 and r8 of version 2 at step 4, one behind", st)
	}
}
