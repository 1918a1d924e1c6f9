package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/strategy"
)

// seededPolicies is a decompose policy whose delegator samples by the request's seed alone.
// A seeded backend does the same.
// The aggregation answers "score <seed mod 4>", and the scorer rewards the score.
// A plan whose seed is a multiple of 9 fails with a call error: a failed rollout.
// One whose seed is a multiple of 7 has no subtasks: a format failure, rewarded -1.
// Its Sampler seeds rollout k of item i with 10·i + 3·k, or 100·i + 4·k for items 2, 5 and on.
// Each rollout then depends on its seed only, whatever else runs beside it.
func seededPolicies(t *testing.T) (Policies, delegate.Strategy, Scorer) {
	t.Helper()
	delegator := modeltest.New("delegator-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		if req.Seed == nil {
			return nil, fmt.Errorf("unseeded request")
		}
		s := *req.Seed
		if modeltest.Contains(req, "Subtask 1") {
			return withTokens(req, modeltest.Text(fmt.Sprintf("Merged.\nFinal Output:\nscore %d", s%4))), nil
		}
		if s%9 == 0 {
			return nil, &delegate.APIError{Status: 500, Type: "server_error", Message: "scripted failure", Attempts: 1}
		}
		if s%7 == 0 {
			return withTokens(req, modeltest.Text("I will just answer.")), nil
		}
		return withTokens(req, modeltest.Text(planText("Find A.", "Find B.", "Find C."))), nil
	})
	subagent, single := subagentModel(), singleModel()
	cfg := strategy.DefaultConfig()
	policies := func(item, k int) (delegate.Strategy, error) {
		seed := int64(10*item + 3*k)
		if item%3 == 2 {
			seed = int64(100*item + 4*k) // every score (seed+1) mod 4 = 1: a tie
		}
		return strategy.New(strategy.NameDecompose, strategy.Roles{
			Delegator: delegate.Agent{Model: delegator, Price: delegate.Price{Input: 1, Output: 2}, Sampler: delegate.NewSampler(delegate.Sampling{Seed: &seed, Logprobs: true})},
			Subagent:  delegate.Agent{Model: subagent},
		}, cfg)
	}
	baseline, err := strategy.New(strategy.NameSingle, strategy.Roles{Single: delegate.Agent{Model: single}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	scorer := ScorerFunc(func(ctx context.Context, rec *delegate.Recorder, task delegate.Task, base, tr *delegate.Trace) (Score, error) {
		if tr.Failure != "" {
			return Score{Reward: -1, Fixed: FixedFormat}, nil
		}
		v, err := strconv.Atoi(strings.TrimPrefix(tr.Answer, "score "))
		if err != nil {
			return Score{}, fmt.Errorf("answer %q has no score", tr.Answer)
		}
		return Score{Reward: float64(v), Candidate: float64(v), Baseline: 1}, nil
	})
	return policies, baseline, scorer
}

// TestGroupsMatchRun checks that Groups and Run give the same groups for the same seeds and policy.
// Groups is what the trainer consumes; Run is what a trajectory API receives.
// The groups match field for field but for the run identifier, with the same advantages,
// at different concurrencies. The same groups are dropped for the same reasons.
func TestGroupsMatchRun(t *testing.T) {
	for _, keepTies := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep_ties=%v", keepTies), func(t *testing.T) {
			policies, baseline, scorer := seededPolicies(t)
			const items, g = 6, 4
			dir := t.TempDir()
			cfg := DefaultConfig()
			cfg.Items, cfg.GroupSize, cfg.Concurrency, cfg.KeepTies, cfg.Seed, cfg.OutDir = items, g, 3, keepTies, 7, dir
			sum, err := Run(context.Background(), cfg, tasks(items), baseline, policies, scorer, nil)
			if err != nil {
				t.Fatal(err)
			}
			written := map[int]*GroupRecord{}
			for _, rec := range readGroups(t, dir) {
				rec.Run = ""
				written[rec.Item] = rec
			}

			cfg.Concurrency, cfg.OutDir = 5, ""
			groups, err := Groups(context.Background(), cfg, tasks(items), policies, baseline, scorer, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(groups) != items {
				t.Fatalf("%d groups, want %d", len(groups), items)
			}
			dropped := map[string]int{}
			var advantages, failed int
			for i, gr := range groups {
				want := written[i]
				if gr.Record == nil {
					dropped[gr.Dropped]++
					if want != nil {
						t.Errorf("item %d: Groups dropped it (%s), Run wrote it", i, gr.Dropped)
					}
					continue
				}
				if want == nil {
					t.Errorf("item %d: Groups kept it, Run dropped it", i)
					continue
				}
				if len(gr.Record.Episodes) != len(gr.Record.Rollouts) {
					t.Errorf("item %d: %d episodes for %d members", i, len(gr.Record.Episodes), len(gr.Record.Rollouts))
				}
				got, err := json.Marshal(timeless(gr.Record))
				if err != nil {
					t.Fatal(err)
				}
				w, err := json.Marshal(timeless(want))
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(w) {
					t.Errorf("item %d: Groups' record\n%s\nRun's\n%s", i, got, w)
				}
				for _, m := range gr.Record.Rollouts {
					if m.Advantage != 0 {
						advantages++
					}
					res := gr.Rollouts[m.Index]
					if res.Score == nil || res.Trace == nil || res.Score.Reward != m.Reward {
						t.Errorf("item %d rollout %d: result %+v does not match the member %+v", i, m.Index, res, m)
					}
				}
				for _, miss := range gr.Record.Missing {
					failed++
					if res := gr.Rollouts[miss.Index]; res.Score != nil || res.Reason != "call server_error" {
						t.Errorf("item %d rollout %d: missing member, result %+v", i, miss.Index, res)
					}
				}
			}
			for reason, n := range sum.Dropped {
				if dropped[reason] != n {
					t.Errorf("dropped for %s: Groups %d, Run %d", reason, dropped[reason], n)
				}
			}
			// The seeds give a mix: groups with a failed rollout, tied
			// groups, groups with a signal.
			if advantages == 0 || failed == 0 || sum.Ties[DropEqual] == 0 {
				t.Errorf("%d non-zero advantages, %d failed members, %d ties: the case tests too little", advantages, failed, sum.Ties[DropEqual])
			}
			for _, rec := range written {
				for _, a := range rec.Advantages {
					if math.IsNaN(a) {
						t.Errorf("group %s: advantage NaN", rec.ID)
					}
				}
			}
		})
	}
}

// timeless is rec with its episodes' timings zeroed.
// Two runs of the same seeds make the same records but for when their calls ran and how long they took.
// The timings also move the critical path.
func timeless(rec *GroupRecord) *GroupRecord {
	out := *rec
	out.Episodes = nil
	for _, e := range rec.Episodes {
		c := *e
		c.CriticalPath, c.CriticalCalls, c.Outcome.Latency = 0, 0, 0
		c.Calls = slices.Clone(e.Calls)
		for i := range c.Calls {
			c.Calls[i].Latency = 0
		}
		c.Samples = slices.Clone(e.Samples)
		for i := range c.Samples {
			c.Samples[i].Latency = 0
		}
		out.Episodes = append(out.Episodes, &c)
	}
	return &out
}
