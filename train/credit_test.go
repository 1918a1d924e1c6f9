package train

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/world"
)

// goldenCredits is the rule of role credit, worked out apart from the
// source. A solver answer to a world operation is judged by its exact
// value. Then reward.RoleCredit applies, the rule its golden files fix. In
// a tied group every sample judged by the task's outcome gets 0.
func goldenCredits(t *testing.T, est reward.Estimator, eps []*delegate.Episode, tied bool) [][]reward.SampleCredit {
	t.Helper()
	var copies []*delegate.Episode
	for _, e := range eps {
		c := *e
		c.Samples = slices.Clone(e.Samples)
		for j := range c.Samples {
			sm := &c.Samples[j]
			op, x, y, err := world.ParseExpr(strings.TrimSpace(sm.Question))
			if sm.Role != RoleSubagent || err != nil {
				continue
			}
			got, err := world.ParseAnswer(sm.Answer)
			ok := err == nil && got == op.Apply(x, y)
			sm.Correct = &ok
		}
		copies = append(copies, &c)
	}
	credits, err := reward.RoleCredit(est, copies)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range copies {
		for j, sm := range e.Samples {
			if tied && sm.Correct == nil {
				credits[i][j].Advantage = 0
			}
		}
	}
	return credits
}

// TestRoleCreditAdvantages checks that under --credit role a step's
// samples get the golden rule's advantages. That holds whichever roles
// are trained: both, the solver against a frozen delegator, or the
// delegator alone. The solver's samples are compared with the other
// attempts at the same question, each rewarded by its own answer.
// A frozen role's calls never become samples.
func TestRoleCreditAdvantages(t *testing.T) {
	ctx := context.Background()
	for _, which := range []string{TrainBoth, TrainSolver, TrainDelegator} {
		t.Run(which, func(t *testing.T) {
			cfg := bothConfig(t, 1)
			cfg.Train, cfg.Credit = which, reward.CreditRole
			r, err := newRunner(cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.close()
			cfgs := r.trainerConfigs()
			src, err := r.source(ctx, cfgs[0])
			if err != nil {
				t.Fatal(err)
			}
			s := src.(*rollouts)
			groups, items, problems, err := s.play(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			var want [][][]reward.SampleCredit
			for _, g := range groups {
				if g.Record == nil {
					want = append(want, nil)
					continue
				}
				want = append(want, goldenCredits(t, cfg.RL.Estimator, g.Record.Episodes, g.Record.Reason != ""))
			}
			out, err := s.split(groups, items, problems)
			if err != nil {
				t.Fatal(err)
			}
			var verified, own, solverSamples, delegatorSamples int
			for v, tr := range s.roles {
				for i, g := range out[v] {
					rec := groups[i].Record
					if rec == nil {
						continue
					}
					for k, sr := range g.Rollouts {
						e := rec.Episodes[k]
						if len(sr.EpisodeAdvantages) != len(sr.Episodes) {
							t.Fatalf("%s item %d rollout %d: %d advantages for %d sequences", tr.role, i, k, len(sr.EpisodeAdvantages), len(sr.Episodes))
						}
						for n, ep := range sr.Episodes {
							j := slices.IndexFunc(e.Samples, func(sm delegate.Sample) bool { return sm.Calls[0] == ep.IDs[0] })
							if j < 0 {
								t.Fatalf("%s item %d rollout %d: sequence %s is no sample", tr.role, i, k, ep.Node)
							}
							w := want[i][k][j]
							if got := sr.EpisodeAdvantages[n]; got != w.Advantage {
								t.Errorf("%s item %d rollout %d sample %q: advantage %v, want %v", tr.role, i, k, w.Question, got, w.Advantage)
							}
							if tr.role == RoleDelegator {
								delegatorSamples++
							}
							if tr.role == RoleSubagent {
								solverSamples++
								if e.Samples[j].Correct != nil {
									verified++
								}
								if sr.EpisodeAdvantages[n] != sr.Advantage {
									own++
								}
							}
						}
					}
				}
			}
			for _, g := range groups {
				if g.Record == nil {
					continue
				}
				for _, e := range g.Record.Episodes {
					for _, sm := range e.Samples {
						if !slices.Contains(e.Trained, sm.Role) || which == TrainSolver && sm.Role == RoleDelegator ||
							which == TrainDelegator && sm.Role == RoleSubagent {
							t.Errorf("a sample of frozen role %s", sm.Role)
						}
					}
				}
			}
			if which == TrainDelegator {
				// The frozen solver's calls are spent, never sampled.
				if delegatorSamples == 0 || solverSamples != 0 {
					t.Errorf("%d delegator samples, %d solver samples: want the delegator's only", delegatorSamples, solverSamples)
				}
				return
			}
			// Trained alone, the solver's rollouts differ only where it
			// slips, which a step of 8 rollouts seldom shows.
			if solverSamples == 0 || verified == 0 || which == TrainBoth && own == 0 {
				t.Errorf("%d solver samples, %d judged by their own answer, %d with an advantage not their rollout's: the case tests too little", solverSamples, verified, own)
			}
		})
	}
}

// TestRoleCreditResumesOnShippedModels trains both roles under role
// credit in a short run on the shipped models. A run stopped after step 1
// and resumed must end with the parameters of the one not stopped, for
// both roles. Under the race detector it would take minutes: there
// TestTrainBothTrainsEachPolicyOnItsOwnSamples checks the two trainers'
// concurrency and TestRoleCreditAdvantages role credit's. Its name puts it
// in the README's plain `-run Shipped` pass instead.
func TestRoleCreditResumesOnShippedModels(t *testing.T) {
	if raceEnabled {
		t.Skip("the README's -run Shipped pass runs it without the race detector")
	}
	ctx := context.Background()
	const steps = 2
	run := func(cfg Config, upTo int) {
		t.Helper()
		cfg.RL.Steps = upTo
		r, err := newRunner(cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.close()
		res, err := r.train(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Steps != upTo || res.StoppedBy != "steps" {
			t.Fatalf("run to step %d: %+v", upTo, res)
		}
	}
	whole, resumed := bothConfig(t, steps), bothConfig(t, steps)
	for _, c := range []*Config{&whole, &resumed} {
		// Enough attempts at each question for the solver to slip on
		// some: it is right on nearly every question it can answer.
		c.Credit, c.RL.ItemsPerStep, c.RL.GroupSize = reward.CreditRole, 4, 8
	}
	run(whole, steps)
	run(resumed, 1)
	run(resumed, steps)
	for _, sub := range []string{"", SolverDir} {
		what := map[string]string{"": whole.StartModel(), SolverDir: "solver"}[sub]
		start, err := loadCheckpoint(what, "")
		if err != nil {
			t.Fatal(err)
		}
		a := checkpointParams(t, filepath.Join(whole.OutDir, sub))
		b := checkpointParams(t, filepath.Join(resumed.OutDir, sub))
		if slices.Equal(a.Data, start.Data) {
			t.Errorf("%s: not trained", what)
		}
		if !slices.Equal(a.Data, b.Data) {
			t.Errorf("%s: resumed after step 1, the parameters differ from the run's that was not stopped", what)
		}
		if ms := readMetrics(t, filepath.Join(resumed.OutDir, sub)); len(ms) != steps {
			t.Errorf("%s: %d metrics lines, want %d", what, len(ms), steps)
		}
	}
}

func TestConfigCredit(t *testing.T) {
	for _, tc := range []struct {
		mode, credit string
		err          string // "" when valid
	}{
		{ModeRoute, reward.CreditTask, ""},
		{ModeRoute, reward.CreditRole, ""},
		{ModeRoute, "", ""},
		{ModeMLPO, reward.CreditTask, ""},
		{ModeRoute, "sample", `credit: credit "sample": want "task", "role", "step", "decision" or "counterfactual"`},
		{ModeMLPO, reward.CreditRole, `credit: "role" goes with mode route, not mlpo`},
	} {
		t.Run(tc.mode+"/"+tc.credit, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Mode, cfg.Credit = tc.mode, tc.credit
			err := cfg.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("err = %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// A task-credit run's file does not name credit, so run files written
// before it existed resume. A role-credit run is another run.
func TestIdentityCredit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OutDir = t.TempDir()
	if err := checkIdentity(cfg); err != nil {
		t.Fatal(err)
	}
	role := cfg
	role.Credit = reward.CreditRole
	if err := checkIdentity(role); err == nil || !strings.Contains(err.Error(), "credit") {
		t.Errorf("role credit on a task-credit run's directory: err = %v, want one naming credit", err)
	}
	unset := cfg
	unset.Credit = ""
	if err := checkIdentity(unset); err != nil {
		t.Errorf("credit unset on a task-credit run: %v", err)
	}
	// The credit's variants and the entropy bonus are the run's too.
	variants := []struct {
		key string
		set func(*Config)
	}{
		{"skip_credit", func(c *Config) { c.SkipCredit = true }},
		{"centre_calls", func(c *Config) { c.CentreCalls = true }},
		{"inline_credit", func(c *Config) { c.InlineCredit = true }},
		{"entropy_bonus", func(c *Config) { c.RL.EntropyBonus = 0.3 }},
	}
	for _, v := range variants {
		other := cfg
		v.set(&other)
		if err := checkIdentity(other); err == nil || !strings.Contains(err.Error(), v.key) {
			t.Errorf("%s on a run without it: err = %v, want one naming %s", v.key, err, v.key)
		}
	}
}
