package dataset_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/dataset"
	"github.com/delegatelab/delegate/score"
)

// sharedDir holds the benchmark files beside the checkout, in ../shared.
// They are there on this project's machines and in CI; the test skips where
// they are absent.
var sharedDir = filepath.Join("..", "..", "shared", "datasets")

// TestSharedDatasets loads the full benchmark files and checks their counts.
// The counts are those their README gives. It then feeds every reference
// answer back to its own verifier as a model answer.
func TestSharedDatasets(t *testing.T) {
	if _, err := os.Stat(sharedDir); err != nil {
		t.Skipf("%s not present: %v", sharedDir, err)
	}
	cases := []struct {
		format, path string
		want         int
	}{
		{"gsm8k", "gsm8k/test.jsonl", 1319},
		{"math", "math/test.jsonl", 5000},
		{"math", "math/math500_test.jsonl", 500},
		{"mmlu", "mmlu/test", 14042},
		{"mmlu", "mmlu/val", 1531},
		{"bbh", "bbh/bbh", 6511},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			t.Parallel()
			tasks, rep, err := dataset.Load(c.format, filepath.Join(sharedDir, c.path), dataset.Options{})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := len(tasks); got != c.want || rep.Read != c.want || len(rep.Skipped) != 0 {
				t.Fatalf("got %d tasks (Read %d, %d skipped), want %d", got, rep.Read, len(rep.Skipped), c.want)
			}
			ids := map[string]bool{}
			for _, task := range tasks {
				if ids[task.ID] {
					t.Errorf("duplicate ID %q", task.ID)
				}
				ids[task.ID] = true
			}
			if raceEnabled {
				tasks = dataset.Sample(tasks, len(tasks)/5, 1)
			}
			bad := 0
			for _, task := range tasks {
				for _, resp := range selfAnswers(task) {
					r, err := score.Verify(task, resp)
					if err != nil {
						t.Fatalf("Verify(%s): %v", task.ID, err)
					}
					if !r.Correct {
						bad++
						if bad <= 20 {
							t.Errorf("%s: reference %q fed back as %q: got %+v", task.ID, task.Answer, resp, r)
						}
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d self-answers rejected", bad, 2*len(tasks))
			}
			// The other direction: a neighbour's different reference answer must
			// be rejected, or the verifier accepts anything.
			falseAccept, compared := 0, 0
			for i, task := range tasks {
				other := tasks[(i+1)%len(tasks)]
				if other.Answer == task.Answer || (task.Dataset == "bbh" && other.Subject != task.Subject) || sameValue[task.ID] {
					continue
				}
				compared++
				r, _ := score.Verify(task, selfAnswers(other)[0])
				if r.Correct {
					falseAccept++
					t.Logf("%s: reference %q accepted %q", task.ID, task.Answer, other.Answer)
				}
			}
			if falseAccept > 0 {
				t.Errorf("%d of %d different answers accepted", falseAccept, compared)
			}
		})
	}
}

// selfAnswers writes the reference answer of task the way a model would.
func selfAnswers(task delegate.Task) []string {
	a := task.Answer
	switch task.Dataset {
	case "math":
		return []string{"So we get the result.\nThe answer is $" + a + "$.", `Therefore the answer is $\boxed{` + a + `}$.`}
	case "bbh":
		return []string{"Let's think step by step. So the answer is " + a + ".", a}
	}
	return []string{"Let's compute step by step. The answer is " + a + ".", `Thus the final answer is \boxed{` + a + `}`}
}

// sameValue lists tasks whose neighbour's reference has the same value.
// It is written differently, so accepting it is right: "5" and "x=5",
// "120^\circ" and "120", "7\%" and "7".
var sameValue = map[string]bool{
	"math/math500_test/23": true,
	"math/test/3597":       true,
	"math/test/4160":       true,
	"math/test/1661":       true, // "\frac{3}{4}" and "\frac34"
}
