package reward

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// attempt is a hand-built route episode: the delegator's sample and one solver sample per question.
// Each solver sample has its own result, nil when unverifiable.
func attempt(reward float64, solver ...any) *delegate.Episode {
	e := &delegate.Episode{Version: delegate.EpisodeVersion, Outcome: delegate.Outcome{Reward: reward},
		Samples: []delegate.Sample{{Role: "delegator", Trained: true, Question: "12*34 + 56*78?"}}}
	for k := 0; k < len(solver); k += 2 {
		s := delegate.Sample{Role: "subagent", Trained: true, Question: solver[k].(string)}
		if c, ok := solver[k+1].(bool); ok {
			s.Correct = &c
		}
		e.Samples = append(e.Samples, s)
	}
	return e
}

func TestRoleCreditGolden(t *testing.T) {
	tests := []struct {
		name string
		est  Estimator
		eps  []*delegate.Episode
	}{
		{"repeated subtasks", GRPO, []*delegate.Episode{
			attempt(0.8, "12*34", true, "56*78", true),
			attempt(0.1, "12*34", false, "56*78", true),
			attempt(0.6),
			attempt(0.7, "12*34", true),
		}},
		{"subtasks that do not repeat", DrGRPO, []*delegate.Episode{
			attempt(0.8, "12*34", true),
			attempt(0.1, "12*35", false),
			attempt(0.7, "56*78", true),
		}},
		{"unverifiable subtasks take the task reward", RLOO, []*delegate.Episode{
			attempt(0.8, "what is 12 times 34", nil),
			attempt(0.1, "what is 12 times 34", nil),
			attempt(0.5, "12*34", true),
		}},
		{"one attempt", GRPO, []*delegate.Episode{
			attempt(0.8, "12*34", true),
		}},
		{"solver only", GRPO, func() []*delegate.Episode {
			eps := []*delegate.Episode{attempt(0.8, "12*34", true), attempt(0.3, "12*34", false)}
			for _, e := range eps {
				e.Samples = e.Samples[1:] // the delegator is frozen
			}
			return eps
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RoleCredit(tc.est, tc.eps)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			for i, cs := range got {
				if len(cs) != len(tc.eps[i].Samples) {
					t.Fatalf("episode %d: got %d credits, want one per sample (%d)", i, len(cs), len(tc.eps[i].Samples))
				}
				if err := enc.Encode(map[string]any{"episode": i, "estimator": tc.est, "samples": cs}); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join("testdata", "credit", strings.ReplaceAll(tc.name, " ", "-")+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("credits differ from %s:\ngot:\n%s\nwant:\n%s", path, b.Bytes(), want)
			}
		})
	}
}

// With one sample per attempt, the delegator's credit is the task's.
func TestRoleCreditOfALeadIsTaskCredit(t *testing.T) {
	rewards := []float64{0.8, 0.1, 0.6, 0.7, 0.7}
	for _, est := range []Estimator{GRPO, DrGRPO, RLOO} {
		t.Run(string(est), func(t *testing.T) {
			var eps []*delegate.Episode
			for _, r := range rewards {
				eps = append(eps, attempt(r, "12*34", r > 0.5))
			}
			got, err := RoleCredit(est, eps)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Advantages(est, rewards)
			if err != nil {
				t.Fatal(err)
			}
			for i := range eps {
				if got[i][0].Advantage != want[i] {
					t.Errorf("attempt %d: got %v, want the task's %v", i, got[i][0].Advantage, want[i])
				}
			}
		})
	}
}

func TestRoleCreditErrors(t *testing.T) {
	tests := []struct {
		name string
		est  Estimator
		eps  []*delegate.Episode
	}{
		{"unknown estimator", "ppo", []*delegate.Episode{attempt(1), attempt(0)}},
		{"non-finite reward", GRPO, []*delegate.Episode{attempt(1), attempt(inf())}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := RoleCredit(tc.est, tc.eps); err == nil {
				t.Error("got no error")
			}
		})
	}
}

func inf() float64 { return math.Inf(1) }

func TestParseCredit(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{{"task", true}, {"role", true}, {"decision", true}, {"counterfactual", true}, {"", false}, {"Role", false}} {
		_, err := ParseCredit(tc.in)
		if got := err == nil; got != tc.ok {
			t.Errorf("ParseCredit(%q): got ok %v, want %v", tc.in, got, tc.ok)
		}
	}
}
