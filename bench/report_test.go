package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/score"
)

var (
	update  = flag.Bool("update", false, "rewrite the golden files in testdata")
	fixture = flag.Bool("fixture", false, "rewrite testdata/results_v1.jsonl from a fresh run (only when the record format changes)")
)

const fixturePath = "testdata/results_v1.jsonl"

// fixtureArms are the arms of the fixture, without strategies: Summarize
// works offline.
var fixtureArms = []Arm{{Name: "strong", Role: RoleStrong}, {Name: "weak", Role: RoleWeak}, {Name: "route"}, {Name: "decompose"}, {Name: "lead"}}

// writeFixture runs the benchmark of eval_test.go and saves its records with fixed times and latencies.
// The table made from them is then stable. Latency is (N%7 + 1) × 100 ms × the arm's factor.
func writeFixture(t *testing.T) {
	t.Helper()
	cfg := testConfig(func(c *Config) { c.Results = filepath.Join(t.TempDir(), "r.jsonl") })
	arms, _ := benchArms(t, 0, nil)
	if _, err := Run(context.Background(), cfg, benchTasks(), arms, score.Verify, nil); err != nil {
		t.Fatalf("Run: %v", err)
	}
	recs := readAll(t, cfg.Results)
	factor := map[string]float64{"strong": 1, "weak": 0.5, "route": 3, "decompose": 5, "lead": 4}
	var b bytes.Buffer
	for _, tk := range benchTasks() {
		n, _ := strconv.Atoi(strings.TrimPrefix(tk.ID, "t")) // IDs are t01..t40
		for _, a := range fixtureArms {
			for _, r := range recs {
				if r.Arm != a.Name || r.TaskID != tk.ID {
					continue
				}
				r.Time = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
				r.Latency = time.Duration(float64((n%7+1)*100) * factor[a.Name] * float64(time.Millisecond))
				for role, tot := range r.Roles {
					tot.Latency = r.Latency
					r.Roles[role] = tot
				}
				r.Total.Latency = r.Latency
				line, err := json.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				b.Write(append(line, '\n'))
			}
		}
	}
	if err := os.WriteFile(fixturePath, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMarkdownGolden makes the table from the version-1 fixture.
// It also checks that this version of the reader still reads it.
func TestMarkdownGolden(t *testing.T) {
	if *fixture {
		writeFixture(t)
	}
	recs, repair, err := ReadResults(fixturePath)
	if err != nil || repair != nil {
		t.Fatalf("ReadResults(%s) = repair %v, error %v", fixturePath, repair, err)
	}
	rep, err := Summarize("", nil, fixtureArms, recs)
	if err != nil {
		t.Fatalf("Summarize: %v", err)
	}
	checkReport(t, rep)
	rep.Notes = []string{"Models: fakes from modeltest; hardware: none, nothing ran."}
	for _, g := range []struct {
		file  string
		write func(*bytes.Buffer) error
	}{
		{"testdata/table.md.golden", func(b *bytes.Buffer) error { return rep.WriteMarkdown(b) }},
		{"testdata/table.csv.golden", func(b *bytes.Buffer) error { return rep.WriteCSV(b) }},
	} {
		var got bytes.Buffer
		if err := g.write(&got); err != nil {
			t.Fatalf("%s: %v", g.file, err)
		}
		if *update {
			if err := os.WriteFile(g.file, got.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(g.file)
		if err != nil {
			t.Fatalf("read golden (run go test -update to create it): %v", err)
		}
		if got.String() != string(want) {
			t.Errorf("%s differs (run go test -update after checking the change):\ngot:\n%s\nwant:\n%s", g.file, got.String(), want)
		}
	}
	// Latency quantiles by hand: strong's latencies are (N%7+1)×100 ms for
	// N = 1..40, so 100..700 ms, each value 5 or 6 times; sorted, rank
	// 0.5×39 = 19.5 falls between two 400 ms values, and rank 0.95×39 =
	// 37.05 among the 700s.
	if got := rep.Rows[0]; !near(got.LatencyP50, 0.4, 1e-12) || !near(got.LatencyP95, 0.7, 1e-12) {
		t.Errorf("strong latency p50, p95 = %v, %v, want 0.4, 0.7", got.LatencyP50, got.LatencyP95)
	}
}

func rec(arm, task string, correct bool) Record {
	return Record{Version: RecordVersion, Arm: arm, TaskID: task, Correct: correct, Latency: time.Second,
		Roles: map[string]delegate.Totals{"single": {Calls: 1}}, Total: delegate.Totals{Calls: 1}}
}

func TestSummarizeUndefined(t *testing.T) {
	t.Run("no weak and strong: no PGR, no oracle", func(t *testing.T) {
		recs := []Record{rec("a", "1", true), rec("b", "1", false)}
		rep, err := Summarize("", nil, []Arm{{Name: "a"}, {Name: "b"}}, recs)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Rows) != 2 {
			t.Fatalf("rows = %d, want 2 (no oracle row)", len(rep.Rows))
		}
		var md bytes.Buffer
		if err := rep.WriteMarkdown(&md); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(md.String(), "| 1.0000 (exact; b=1, c=0) | n/a |") {
			t.Errorf("row b wants p = 1.0000 (b=1) and PGR n/a:\n%s", md.String())
		}
	})
	t.Run("weak and strong equally good: PGR n/a", func(t *testing.T) {
		recs := []Record{rec("w", "1", true), rec("s", "1", true), rec("r", "1", false)}
		rep, err := Summarize("s", nil, []Arm{{Name: "w", Role: RoleWeak}, {Name: "s", Role: RoleStrong}, {Name: "r"}}, recs)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Rows {
			if !math.IsNaN(r.PGR) || fixed(r.PGR, 3) != NA {
				t.Errorf("row %s: PGR %v, want NaN printed as n/a", r.Arm, r.PGR)
			}
		}
		var csvOut bytes.Buffer
		if err := rep.WriteCSV(&csvOut); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(csvOut.String(), "NaN") || strings.Contains(csvOut.String(), "Inf") {
			t.Errorf("the CSV prints an undefined value as a number:\n%s", csvOut.String())
		}
	})
	t.Run("incomplete tasks are left out of every row", func(t *testing.T) {
		recs := []Record{rec("a", "1", true), rec("b", "1", true), rec("a", "2", true)}
		rep, err := Summarize("", nil, []Arm{{Name: "a"}, {Name: "b"}}, recs)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Tasks != 1 || rep.Incomplete != 1 || rep.Rows[0].N != 1 {
			t.Errorf("tasks, incomplete, n = %d, %d, %d, want 1, 1, 1", rep.Tasks, rep.Incomplete, rep.Rows[0].N)
		}
	})
	t.Run("nothing complete: every figure n/a", func(t *testing.T) {
		rep, err := Summarize("", nil, []Arm{{Name: "a"}, {Name: "b"}}, []Record{rec("a", "1", true)})
		if err != nil {
			t.Fatal(err)
		}
		var md bytes.Buffer
		if err := rep.WriteMarkdown(&md); err != nil {
			t.Fatal(err)
		}
		row := strings.Split(md.String(), "\n")[3] // arm b
		if want := "| b |  | 0 | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | 0 | 0 |"; row != want {
			t.Errorf("row b = %s, want %s", row, want)
		}
		if err := rep.PlotCost(filepath.Join(t.TempDir(), "cost.png")); err == nil {
			t.Error("PlotCost with nothing to draw: no error")
		}
	})
	t.Run("twice recorded item", func(t *testing.T) {
		_, err := Summarize("", nil, []Arm{{Name: "a"}}, []Record{rec("a", "1", true), rec("a", "1", true)})
		if err == nil || !strings.Contains(err.Error(), `arm "a" task "1" recorded twice`) {
			t.Errorf("error %v, want one naming the item", err)
		}
	})
}

func TestPlotRejectsUnknownFormat(t *testing.T) {
	rep, err := Summarize("", nil, []Arm{{Name: "a"}}, []Record{rec("a", "1", true)})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []func(string) error{rep.PlotCost, rep.PlotLatency} {
		if err := f(filepath.Join(t.TempDir(), "x.gif")); err == nil || !strings.Contains(err.Error(), `unknown format ".gif"`) {
			t.Errorf("error %v, want unknown format", err)
		}
	}
}

func BenchmarkSummarize(b *testing.B) {
	recs, _, err := ReadResults(fixturePath)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Summarize("", nil, fixtureArms, recs); err != nil {
			b.Fatal(err)
		}
	}
}
