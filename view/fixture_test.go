package view

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
)

// t0 is when the fixtures' runs start.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// call is a model call of a fixture trace, from start to start+d (ms).
func call(id int, name, role string, start, d int, cost float64, errText string) *delegate.Node {
	n := &delegate.Node{ID: id, Name: name, Role: role, Model: role + "-model",
		Messages: []delegate.Message{{Role: delegate.RoleUser, Content: "question of " + name}},
		Usage:    delegate.Usage{PromptTokens: 10 * id, CompletionTokens: 5 * id}, Cost: cost,
		Start: t0.Add(time.Duration(start) * time.Millisecond), Latency: time.Duration(d) * time.Millisecond, Error: errText}
	if errText == "" {
		n.Output = &delegate.Message{Role: delegate.RoleAssistant, Content: "answer of " + name,
			ToolCalls: []delegate.ToolCall{{ID: "c1", Name: "delegate", Arguments: `{"question":"2+2"}`}}}
	} else {
		n.ErrorStatus, n.ErrorType = 500, "server_error"
	}
	return n
}

// fixtureTrace is a route-like run: a first call, two sub-agents in
// parallel (the second fails), then a last call. Its critical path is
// plan, sub1 and final: 100 + 200 + 50 ms.
func fixtureTrace() *delegate.Trace {
	plan := call(1, "plan", "strong", 0, 100, 0.01, "")
	sub1 := call(3, "sub1", "weak", 100, 200, 0.001, "")
	sub2 := call(4, "sub2", "weak", 110, 150, 0.002, "upstream 500")
	stage := &delegate.Node{ID: 2, Name: "subagents", Start: t0.Add(100 * time.Millisecond), Latency: 200 * time.Millisecond,
		Children: []*delegate.Node{sub1, sub2}}
	final := call(5, "final", "strong", 300, 50, 0.02, "")
	root := &delegate.Node{ID: 0, Name: "route", Start: t0, Latency: 350 * time.Millisecond,
		Children: []*delegate.Node{plan, stage, final}}
	tr := &delegate.Trace{Version: delegate.TraceVersion, Strategy: "route", Request: "what is 2+2?", Answer: "4",
		Start: t0, Latency: 360 * time.Millisecond, Root: root, Roles: map[string]delegate.Totals{}}
	for _, n := range tr.Calls() {
		t := delegate.Totals{Calls: 1, Retries: n.Retries, Usage: n.Usage, Cost: n.Cost, Latency: n.Latency}
		if n.Error != "" {
			t.Errors = 1
		}
		tr.Roles[n.Role] = tr.Roles[n.Role].Add(t)
		tr.Total = tr.Total.Add(t)
	}
	return tr
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// appendLines appends one JSON line per value to path.
func appendLines[T any](t testing.TB, path string, vs ...T) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, v := range vs {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
}

// benchArms are the fixture bench's arms.
// The strong arm is right on every task, the weak on even ones, and a broken arm fails every one.
var benchArms = []string{"strong", "weak", "broken"}

func benchRecord(arm string, task int, withTrace bool) bench.Record {
	r := bench.Record{Version: bench.RecordVersion, Arm: arm, Strategy: "single", TaskID: fmt.Sprintf("t%03d", task),
		Reference: fmt.Sprint(task), Answer: "the answer is " + fmt.Sprint(task), Extracted: fmt.Sprint(task), Time: t0,
		Latency: time.Duration(100+task) * time.Millisecond}
	switch arm {
	case "strong":
		r.Correct = true
		r.Total = delegate.Totals{Calls: 1, Cost: 0.01}
	case "weak":
		r.Correct = task%2 == 0
		r.Total = delegate.Totals{Calls: 1, Cost: 0.001}
	case "broken":
		r.Error, r.Extracted, r.Answer = "model unreachable", "", ""
	}
	r.Roles = map[string]delegate.Totals{arm: r.Total}
	if withTrace && arm != "broken" {
		r.Trace = fixtureTrace()
	}
	return r
}

// writeBench writes a bench output directory of n tasks, as bench does:
// settings.json, results.jsonl and the roles of report.json.
func writeBench(t testing.TB, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(dir, "settings.json"), bench.Settings{Version: bench.SettingsVersion, Arms: benchArms, Run: json.RawMessage(`{}`)})
	var recs []bench.Record
	for i := range n {
		for _, a := range benchArms {
			recs = append(recs, benchRecord(a, i, i == 0))
		}
	}
	appendLines(t, filepath.Join(dir, "results.jsonl"), recs...)
	writeJSON(t, filepath.Join(dir, "report.json"), map[string]any{"version": bench.ReportVersion, "baseline": "strong", "weak": "weak", "strong": "strong"})
}

func artifact(i int, withTrace bool) rollout.Artifact {
	a := rollout.Artifact{Version: rollout.ArtifactVersion, ID: fmt.Sprintf("t%d#0.%d", i/4, i%4), Item: i / 4, TaskID: fmt.Sprintf("t%d", i/4),
		Group: 0, Index: i % 4, Strategy: []string{"route", "decompose"}[i%2], Status: rollout.StatusScored,
		Prompt: "what is 2+2?", FinalOutput: "4", BaselineStrategy: "single", BaselineOutput: "4",
		Score: &rollout.Score{Reward: float64(i%5) / 4, Candidate: float64(i % 2), Outcome: "correct"}, Reward: float64(i%5) / 4,
		Total: delegate.Totals{Calls: 1 + i%3, Cost: 0.001 * float64(1+i%7)}, Latency: time.Duration(50+i%100) * time.Millisecond}
	if i%10 == 9 {
		a.Status, a.Error, a.Score, a.Reward = rollout.StatusFailed, "call failed", nil, 0
	}
	if withTrace {
		a.Trace = fixtureTrace()
	}
	return a
}

// writeRollouts writes a process output directory of n rollouts in
// groups of 4, traces kept on the first.
func writeRollouts(t testing.TB, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const batch = 10000
	for lo := 0; lo < n; lo += batch {
		var as []rollout.Artifact
		for i := lo; i < min(n, lo+batch); i++ {
			as = append(as, artifact(i, i == 0))
		}
		appendLines(t, filepath.Join(dir, rollout.ArtifactsFile), as...)
	}
	var gs []rollout.GroupRecord
	for g := 0; g < n/4; g++ {
		gr := rollout.GroupRecord{Version: rollout.GroupVersion, ID: fmt.Sprintf("t%d#0", g), TaskID: fmt.Sprintf("t%d", g), Strategy: "route"}
		if g%3 == 0 {
			gr.Reason = rollout.DropEqual
		}
		gs = append(gs, gr)
	}
	appendLines(t, filepath.Join(dir, rollout.GroupsFile), gs...)
}

func metrics(step int, scale float64) rl.Metrics {
	return rl.Metrics{Version: rl.MetricsVersion, Step: step, Steps: 100, Time: t0.Add(time.Duration(step) * time.Second),
		Reward: scale * float64(step) / 100, Accuracy: 0.5 + float64(step)/400, DelegationRate: 0.3,
		StalenessMean: 0.5,
		Scalars: map[string]float64{"cost": 0.001 * float64(step),
			"delegated_product": 1, "steps_product": 2, "delegated_sum": 0, "steps_sum": 1, "delegated_difference": 0}}
}

// writeTrain writes a training run's metrics of steps 1 to n.
func writeTrain(t testing.TB, dir string, n int, scale float64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var ms []rl.Metrics
	for s := 1; s <= n; s++ {
		ms = append(ms, metrics(s, scale))
	}
	appendLines(t, filepath.Join(dir, rl.MetricsFile), ms...)
}

// fixtureDir lays out one of each kind under a temporary directory.
func fixtureDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	writeJSON(t, filepath.Join(dir, "trace.json"), fixtureTrace())
	writeBench(t, filepath.Join(dir, "bench"), 20)
	writeRollouts(t, filepath.Join(dir, "rollouts"), 40)
	writeTrain(t, filepath.Join(dir, "train", "a"), 10, 1)
	writeTrain(t, filepath.Join(dir, "train", "b"), 8, 0.5)
	return dir
}
