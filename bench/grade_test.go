package bench

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
)

// TestRunGradedKeepsGradingApart grades with a grader that makes "calls" of its own and fails on one task.
// The grading calls are saved per record and summed in the report, never mixed into the arm's figures.
// The failed grading is an error counted wrong.
func TestRunGradedKeepsGradingApart(t *testing.T) {
	tasks := []delegate.Task{
		{ID: "a", Dataset: "open", Prompt: "write a"},
		{ID: "b", Dataset: "open", Prompt: "write b"},
		{ID: "c", Dataset: "open", Prompt: "write c"},
	}
	judgeCall := delegate.Totals{Calls: 2, Usage: delegate.Usage{PromptTokens: 100, CompletionTokens: 10}, Cost: 0.5}
	grade := func(_ context.Context, task delegate.Task, answer string) (Grade, error) {
		g := Grade{Grading: map[string]delegate.Totals{"judge": judgeCall}}
		if task.ID == "b" {
			return g, errors.New("no judge answer could be parsed")
		}
		score := map[string]float64{"a": 80, "c": 60}[task.ID]
		g.Correct, g.Extracted, g.Score = task.ID == "a", "score", &score
		return g, nil
	}
	cfg := testConfig(func(c *Config) { c.Results = filepath.Join(t.TempDir(), "r.jsonl") })
	rep, err := RunGraded(context.Background(), cfg, tasks, []Arm{{Name: "p", Strategy: panicky{}}}, grade, nil)
	if err != nil {
		t.Fatalf("RunGraded: %v", err)
	}
	r := rep.Rows[0]
	if r.N != 3 || r.Correct != 1 || r.Errors != 1 || r.Dollars != 0 || r.TokensIn != 0 {
		t.Errorf("n, correct, errors, dollars, tokens in = %d, %d, %d, %v, %v, want 3, 1, 1, 0, 0",
			r.N, r.Correct, r.Errors, r.Dollars, r.TokensIn)
	}
	// Scores 80 and 60 (b has none): mean 70, standard error 10.
	if r.Scored != 2 || r.Score != 70 || math.Abs(r.ScoreCI.Lo-50.4) > 1e-9 || math.Abs(r.ScoreCI.Hi-89.6) > 1e-9 {
		t.Errorf("scored, score, interval = %d, %v, %+v, want 2, 70, [50.4, 89.6]", r.Scored, r.Score, r.ScoreCI)
	}
	got := rep.Grading["judge"]
	if got.Calls != 6 || got.Usage.PromptTokens != 300 || got.Cost != 1.5 {
		t.Errorf("report grading = %+v, want 6 calls, 300 tokens in, $1.5", got)
	}
	for _, rec := range readAll(t, cfg.Results) {
		if rec.Grading["judge"] != judgeCall {
			t.Errorf("task %s: grading %+v, want %+v", rec.TaskID, rec.Grading, judgeCall)
		}
		if want := rec.TaskID == "b"; want != strings.Contains(rec.Error, "parsed") {
			t.Errorf("task %s: error %q", rec.TaskID, rec.Error)
		}
	}
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if want := "| p | panicky | 3 | 33.3 [6.1, 79.2] | 70.0 [50.4, 89.6] | baseline |"; !strings.Contains(md.String(), want) {
		t.Errorf("markdown lacks the row %q:\n%s", want, md.String())
	}
	if want := "- Grading (role judge, not in the rows): 6 calls, 0 failed, 300 tokens in, 30 out, $1.500000 in all."; !strings.Contains(md.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, md.String())
	}
}
