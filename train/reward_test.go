package train

import (
	"context"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
)

// criticalPathFormula is reward.CriticalPath's reward written out. It is q
// less the critical path's latency, plus the annealed bonus times the share
// of calls off the critical path; after a format failure the penalty takes
// q's place and no bonus is paid.
func criticalPathFormula(c reward.CriticalPath, o reward.Outcome) float64 {
	q := 0.0
	if o.Correct != nil && *o.Correct {
		q = 1
	}
	lat := c.LatencyWeight * math.Min(math.Max(float64(o.CriticalPath)/float64(c.LatencyScale), 0), 1)
	if !o.FormatOK {
		return c.FormatPenalty - lat
	}
	par := 0.0
	if o.AllCalls > 0 {
		par = 1 - float64(o.CriticalCalls)/float64(o.AllCalls)
	}
	return q - lat + c.Bonus*math.Max(0, 1-float64(o.Step)/float64(c.AnnealSteps))*par
}

// TestTrainingReward: the reward kind selected is the one scored, on a
// hand-built outcome; the default is the world's graded reward.
func TestTrainingReward(t *testing.T) {
	yes := true
	o := reward.Outcome{FormatOK: true, Correct: &yes, Tokens: 200, Calls: 2, Cost: 0.002, Latency: 30 * time.Second,
		CriticalPath: 20 * time.Second, CriticalCalls: 2, AllCalls: 4, Step: 25,
		ModelCalls: map[string]int{"router": 2, "solver": 2}}
	def := DefaultConfig().CostReward
	tests := []struct {
		kind string
		want float64
	}{
		{"", 1 - 0.001*200 - 0.02*2},
		{reward.KindGraded, 1 - 0.001*200 - 0.02*2},
		{reward.KindCriticalPath, 1 - 0.2*20.0/60 + 0.2*(1-25.0/100)*0.5},
		{reward.KindSuccessGated, 1 - 0.5*0.002/0.01},
		{reward.KindEfficiency, 1 - 0.2*0.002/0.01 - 0.1*30.0/60},
		{reward.KindPerCall, 1 - 1*(2*0.001+2*0.0001)/0.01},
	}
	for _, tc := range tests {
		t.Run("kind "+tc.kind, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.RewardKind = tc.kind
			cfg.CostReward.PerCall.Fees = map[string]float64{"router": 0.001, "solver": 0.0001}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			got := cfg.trainScorer().Reward(o)
			if math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if tc.kind == reward.KindCriticalPath {
				if f := criticalPathFormula(def.CriticalPath, o); math.Abs(got-f) > 1e-12 {
					t.Errorf("got %v, the formula %v", got, f)
				}
			}
		})
	}
}

// TestTrainingRewardValidate: an unknown kind, a cost-aware kind outside
// route and a kind's bad settings are refused, naming the key.
func TestTrainingRewardValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"unknown kind", func(c *Config) { c.RewardKind = "cheap" }, `reward_kind: want one of`},
		{"not route", func(c *Config) { c.RewardKind, c.Mode = reward.KindCriticalPath, ModeDecompose }, "reward_kind: critical_path goes with mode route"},
		{"bad settings", func(c *Config) { c.RewardKind, c.CostReward.CriticalPath.AnnealSteps = reward.KindCriticalPath, 0 }, "critical_path.anneal_steps"},
		{"per call without fees", func(c *Config) { c.RewardKind = reward.KindPerCall }, "per_call.fees"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.edit(&cfg)
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestTrainingRewardIdentity: the training reward is part of a run's
// identity; the default leaves the run file as it was.
func TestTrainingRewardIdentity(t *testing.T) {
	cfg := DefaultConfig()
	if got := identityOf(cfg).TrainingReward; got != "" {
		t.Errorf("default: training_reward %q, want none", got)
	}
	cfg.OutDir = t.TempDir()
	cfg.RewardKind = reward.KindCriticalPath
	if err := checkIdentity(cfg); err != nil {
		t.Fatal(err)
	}
	if err := checkIdentity(cfg); err != nil {
		t.Errorf("the same run again: %v", err)
	}
	other := cfg
	other.CostReward.CriticalPath.Bonus = 0.5
	if err := checkIdentity(other); err == nil || !strings.Contains(err.Error(), "training_reward") {
		t.Errorf("another bonus: got %v, want training_reward named", err)
	}
	other = cfg
	other.RewardKind = ""
	if err := checkIdentity(other); err == nil || !strings.Contains(err.Error(), "training_reward") {
		t.Errorf("the graded reward: got %v, want training_reward named", err)
	}
}

// TestTrainCriticalPathReward trains the shipped delegator three steps
// under critical_path, its bonus annealed over two steps. It checks every
// rollout's reward against the formula at its step. It checks each step's
// mean reward in metrics.jsonl against the formula's mean. A turn's
// delegate calls wait for one another (turnBarrier), so calls off the
// critical path, which the bonus pays for, occur at any load.
func TestTrainCriticalPathReward(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the shipped models")
	}
	ctx := context.Background()
	const steps = 3
	cfg := DefaultConfig()
	cfg.OutDir = t.TempDir()
	cfg.RL.GroupSize, cfg.RL.ItemsPerStep, cfg.RL.Steps = 4, 2, steps
	cfg.RL.Schedule.Warmup, cfg.RL.Schedule.Total = 0, steps
	cfg.RL.Concurrency = 8
	cfg.RewardKind = reward.KindCriticalPath
	cfg.CostReward.CriticalPath.Bonus, cfg.CostReward.CriticalPath.AnnealSteps = 0.5, 2
	r, err := newRunner(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	rcfg := r.trainerConfigs()[0]
	src, err := r.source(ctx, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	s := src.(*rollouts)
	// Each rollout gets its barrier, around the models of its seats.
	var waited atomic.Int64
	build := s.build
	s.build = func(p *world.Problem, delegator, solver delegate.Agent) (delegate.Strategy, error) {
		b := &turnBarrier{limit: r.scfg.ToolConcurrency, timeouts: &waited}
		delegator.Model = turnCounter{delegator.Model, b}
		solver.Model = heldSolver{solver.Model, b}
		return build(p, delegator, solver)
	}
	var (
		mu       sync.Mutex
		outcomes = map[int][]reward.Outcome{}
	)
	rs, ok := s.scorer.(*rollout.RewardScorer)
	if !ok {
		t.Fatalf("route's training scorer is a %T", s.scorer)
	}
	sc := *rs
	score := sc.Reward
	sc.Reward = func(o reward.Outcome) float64 {
		mu.Lock()
		outcomes[o.Step] = append(outcomes[o.Step], o)
		mu.Unlock()
		return score(o)
	}
	s.scorer = &sc
	tr, err := rl.New(rcfg, r.policyP, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Run(ctx); err != nil {
		t.Fatal(err)
	}
	ms := readMetrics(t, rcfg.OutDir)
	if len(ms) != steps {
		t.Fatalf("%d steps of metrics, want %d", len(ms), steps)
	}
	bonusPaid, notGraded := false, false
	for _, m := range ms {
		got := outcomes[m.Step]
		if len(got) != m.Rollouts {
			t.Fatalf("step %d: %d rollouts scored, %d in metrics", m.Step, len(got), m.Rollouts)
		}
		var sum, graded float64
		for _, o := range got {
			sum += criticalPathFormula(cfg.CostReward.CriticalPath, o)
			graded += cfg.Reward.Reward(o)
			if o.FormatOK && o.AllCalls > o.CriticalCalls && o.Step < 2 {
				bonusPaid = true
			}
		}
		if want := sum / float64(len(got)); math.Abs(m.Reward-want) > 1e-9 {
			t.Errorf("step %d: reward %v in metrics, the formula's mean %v", m.Step, m.Reward, want)
		}
		notGraded = notGraded || math.Abs(m.Reward-graded/float64(len(got))) > 1e-6
	}
	if !notGraded {
		t.Error("the world's graded reward gives the same means: the test cannot tell the rewards apart")
	}
	if !bonusPaid {
		t.Error("no rollout of steps 0 and 1 had calls off its critical path: the annealed bonus was never tested")
	}
	if n := waited.Load(); n > 0 {
		t.Errorf("%d delegate calls waited %v for a sibling that never came", n, siblingWait)
	}
}

// siblingWait bounds how long a delegate call waits for its siblings. They
// start together, so only a barrier that miscounts them waits this long.
const siblingWait = 10 * time.Second

// turnBarrier makes the delegate calls of one rollout's turns overlap in
// time. turnCounter counts each turn's calls; heldSolver holds each call
// until all of them have started, at most limit, or siblingWait passes.
// A rollout's turns follow one another, so one barrier serves a rollout.
type turnBarrier struct {
	limit    int           // route's ToolConcurrency: more calls never run at once
	timeouts *atomic.Int64 // calls released by siblingWait

	mu      sync.Mutex
	want    int           // calls of the current turn that run at once
	arrived int           // calls of the current turn started
	release chan struct{} // closed when want calls have started
}

// turn starts a turn of n delegate calls.
func (b *turnBarrier) turn(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.want, b.arrived, b.release = min(n, b.limit), 0, make(chan struct{})
}

// wait returns once every call of the turn that runs at once has started.
// It also returns after siblingWait, counted in timeouts, or with ctx.
func (b *turnBarrier) wait(ctx context.Context) error {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.want {
		close(b.release)
	}
	release := b.release
	b.mu.Unlock()
	timer := time.NewTimer(siblingWait)
	defer timer.Stop()
	select {
	case <-release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		b.timeouts.Add(1)
		return nil
	}
}

// turnCounter is the delegator's model; it tells the barrier how many
// delegate calls each of its turns makes, counted as route counts them.
type turnCounter struct {
	delegate.Model
	b *turnBarrier
}

func (m turnCounter) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	resp, err := m.Model.Chat(ctx, req)
	if err != nil || resp == nil || len(resp.Choices) == 0 {
		return resp, err
	}
	n := 0
	for _, tc := range resp.Choices[0].Message.ToolCalls {
		if _, perr := strategy.ParseDelegateArgs(tc.Arguments); tc.Name == strategy.DelegateToolName && perr == nil {
			n++
		}
	}
	m.b.turn(n)
	return resp, nil
}

// heldSolver is the solver's model; each call waits at the barrier.
type heldSolver struct {
	delegate.Model
	b *turnBarrier
}

func (m heldSolver) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	if err := m.b.wait(ctx); err != nil {
		return nil, err
	}
	return m.Model.Chat(ctx, req)
}

// TestConfigGate checks where a gated world reward may go: route, under
// any credit but step's, with a finite gate of at least 0.
func TestConfigGate(t *testing.T) {
	for _, tt := range []struct {
		name  string
		set   func(*Config)
		wants string // "" when valid
	}{
		{"route, task credit", func(c *Config) { c.Reward.Gate = 2 }, ""},
		{"route, counterfactual credit", func(c *Config) { c.Reward.Gate, c.Credit = 2, reward.CreditCounterfactual }, ""},
		{"step credit", func(c *Config) { c.Reward.Gate, c.Credit = 2, reward.CreditStep }, `reward.gate: does not go with credit "step"`},
		{"mlpo", func(c *Config) { c.Reward.Gate, c.Mode = 2, ModeMLPO }, "reward.gate: goes with mode route, not mlpo"},
		{"negative", func(c *Config) { c.Reward.Gate = -1 }, "reward.gate: must be non-negative"},
		{"infinite", func(c *Config) { c.Reward.Gate = math.Inf(1) }, "reward.gate: must be non-negative and finite"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.set(&c)
			err := c.Validate()
			switch {
			case tt.wants == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.wants != "" && (err == nil || !strings.Contains(err.Error(), tt.wants)):
				t.Errorf("Validate() = %v, want an error with %q", err, tt.wants)
			}
		})
	}
}

// TestRewardNote checks that the table's note names the gate when there
// is one and is the graded one, word for word, when there is none.
func TestRewardNote(t *testing.T) {
	g := world.NamedReward("band")
	if got, want := rewardNote(g), "Reward = correct − 0.003·delegator generated tokens − 0.02·sub-agent calls; its interval"; !strings.HasPrefix(got, want) {
		t.Errorf("graded note %q, want it to start %q", got, want)
	}
	g.Gate = 2
	if got, want := rewardNote(g), "Reward (gated at 2) = 1 − min(0.003·delegator generated tokens + 0.02·sub-agent calls, 2) for a right answer, −2 for any other"; !strings.HasPrefix(got, want) {
		t.Errorf("gated note %q, want it to start %q", got, want)
	}
}
