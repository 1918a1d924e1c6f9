package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/scripted"
	"github.com/delegatelab/delegate/world/transcript"
)

// Files of a run's OutDir besides rl's metrics.jsonl and checkpoint/.
const (
	EvalFile  = "eval.jsonl"  // per-item results of every arm (bench.Record)
	RulesFile = "rules.jsonl" // the fixed rules' results on training items, to choose the best
	// KeywordsFile is the keyword rules' results on training items, to
	// choose the best.
	KeywordsFile = "keywords.jsonl"
	TableFile    = "table.md"    // the before/after table
	TimingFile   = "timing.json" // how long evaluating the starting policy took
)

// Arm names of the table, in its order.
const (
	ArmAlone = "delegator alone (no delegation)"
	ArmRule  = "fixed rule" // followed by ": " and world.PositionRuleName
	// ArmKeyword is followed by ": " and the rule's name
	// (scripted.KeywordRule.Name).
	ArmKeyword = "best keyword rule on training items"
	// ArmThreshold is followed by ": " and the rule. The rule is the
	// first-factor threshold fitted on training items
	// (scripted.FitThreshold), where the solver's coverage narrows the
	// products.
	ArmThreshold  = "threshold rule fitted on training items"
	ArmOracle     = "oracle router (upper bound)"
	ArmPretrained = "pretrained delegator"
	ArmTrained    = "RL-trained delegator"
	// With Config.Train solver or both: the pretrained delegator with the
	// RL-trained solver, and (both) the two trained together. The
	// RL-trained delegator's arm is then the trained delegator with the
	// pretrained solver.
	ArmTrainedSolver = "pretrained delegator + RL-trained solver"
	ArmTrainedBoth   = "RL-trained delegator + RL-trained solver"
	ArmRandom        = "random at the trained rate"

	ArmTeam        = "trained leader + peers"
	ArmLeaderAlone = "trained leader alone"
	ArmUntrained   = "untrained leader alone"
	ArmPretrTeam   = "untrained leader + peers"
	ArmMajority    = "peers' majority vote"
	ArmPeerAlone   = "peer alone"                                       // followed by " (checkpoint, greedy)", one row per peer model
	ArmPeersCost   = "peers' majority at the team's cost"               // followed by " (n answers, step s)"
	ArmOwnMajority = "trained leader's own majority at the team's cost" // followed by " (n samples, step s)"
)

// Options are a run's observers. Every field may be nil.
type Options struct {
	// TrainProgress and EvalProgress receive progress by non-blocking
	// sends; the caller owns and closes them after Run returns.
	TrainProgress chan<- rl.Progress
	EvalProgress  chan<- bench.Progress
	// Phase, when set, is called as each phase begins ("evaluate
	// baselines", "train", ...), from Run's goroutine.
	Phase func(name string)
	Log   *slog.Logger
}

// Result is what a run produced.
type Result struct {
	Table     *Table
	Steps     int    // RL steps completed, over every process of the run
	StoppedBy string // "steps", "time" (TrainTime or Deadline) or "" when not trained here
	// TrainSeconds is the rollout and update time of every step done.
	TrainSeconds float64
	// Checkpoint is the trained policy's checkpoint directory (the
	// delegator's when it is trained, else the solver's).
	Checkpoint string
	// SolverCheckpoint is the trained solver's checkpoint directory, ""
	// when the solver is not trained.
	SolverCheckpoint string
}

// Run trains the policies Config.Train names from cfg's checkpoints. Under
// MLPO it trains the leader. It evaluates every arm of the table on held-out
// items: first the baselines, then training until RL.Steps or TrainTime, then
// the trained policies. Everything lands in cfg.OutDir as it is done, so a
// run interrupted at any point resumes there: finished evaluation items are
// not run again, and training goes on from its last checkpoint with what is
// left of TrainTime. When ctx ends, Run returns its error after saving what
// it finished.
func Run(ctx context.Context, cfg Config, opt Options) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	phase, err := begin(cfg, &opt)
	if err != nil {
		return nil, err
	}
	r, err := newRunner(cfg, opt)
	if err != nil {
		return nil, err
	}
	defer r.close()

	reserve, err := r.start(ctx, phase)
	if err != nil {
		return nil, err
	}
	phase("train")
	res, err := r.train(ctx, reserve)
	if err != nil {
		return nil, err
	}
	if err := r.final(ctx, phase, res); err != nil {
		return nil, err
	}
	return res, nil
}

// begin readies cfg.OutDir and opt's logger for a run, writing or checking
// its identity. It returns the function that announces each phase.
func begin(cfg Config, opt *Options) (func(string), error) {
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	if err := checkIdentity(cfg); err != nil {
		return nil, err
	}
	return func(name string) {
		if opt.Phase != nil {
			opt.Phase(name)
		}
		opt.Log.Info("train: " + name)
	}, nil
}

// trainedElsewhere says whether cfg's policies can be trained outside Run
// (by a trajectory API's trainer), as Evaluate and EvaluateBaselines need.
func trainedElsewhere(cfg Config) error {
	if cfg.Mode != ModeRoute {
		return fmt.Errorf("train: evaluate a checkpoint: mode %s: only %s's policies are trained from a trajectory API", cfg.Mode, ModeRoute)
	}
	return nil
}

// EvaluateBaselines evaluates the part of Evaluate's table that does not
// depend on the trained policy. Those are the fixed rules on training
// items and the baselines on held-out items. It writes them into
// cfg.OutDir, where Evaluate then finds them done. The otherwise idle
// supervisor of a multi-process run evaluates them while its trainer
// trains.
func EvaluateBaselines(ctx context.Context, cfg Config, opt Options) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := trainedElsewhere(cfg); err != nil {
		return err
	}
	phase, err := begin(cfg, &opt)
	if err != nil {
		return err
	}
	r, err := newRunner(cfg, opt)
	if err != nil {
		return err
	}
	defer r.close()
	_, err = r.start(ctx, phase)
	return err
}

// Evaluate makes Run's table for a policy trained elsewhere, as by train
// --api in a multi-process run. It evaluates cfg's baselines as Run does.
// In place of the policies Run would train, it takes trained.Checkpoint
// (the delegator's) and trained.SolverCheckpoint after trained.Steps
// steps: nn checkpoint directories, such as a trainer's
// OUT/checkpoint/policy. trained's StoppedBy and TrainSeconds go
// into the table's notes. Everything lands in cfg.OutDir as in Run, and an
// interrupted evaluation resumes there.
func Evaluate(ctx context.Context, cfg Config, trained Result, opt Options) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := trainedElsewhere(cfg); err != nil {
		return nil, err
	}
	phase, err := begin(cfg, &opt)
	if err != nil {
		return nil, err
	}
	r, err := newRunner(cfg, opt)
	if err != nil {
		return nil, err
	}
	defer r.close()
	// Each trained role's checkpoint, and the parameters it replaces.
	type load struct {
		what, dir string
		into      *nn.Params
	}
	var loads []load
	if cfg.trainsDelegator() {
		loads = append(loads, load{"trained delegator", trained.Checkpoint, r.policyP})
	}
	if cfg.trainsSolver() {
		loads = append(loads, load{"trained solver", trained.SolverCheckpoint, r.solverP})
	}
	loaded := make([]*nn.Params, len(loads))
	for i, l := range loads {
		if loaded[i], err = loadCheckpoint(l.what, l.dir); err != nil {
			return nil, err
		}
		if loaded[i].Config != l.into.Config {
			return nil, fmt.Errorf("train: %s checkpoint %s: its shape %+v is not the starting one's %+v", l.what, l.dir, loaded[i].Config, l.into.Config)
		}
	}
	if _, err := r.start(ctx, phase); err != nil {
		return nil, err
	}
	// The trained models read these parameters at every call: from here
	// on they are the trained policies.
	for i, l := range loads {
		copy(l.into.Data, loaded[i].Data)
	}
	res := &trained
	res.Table = nil
	if err := r.final(ctx, phase, res); err != nil {
		return nil, err
	}
	return res, nil
}

// start chooses what the mode's baselines need on training items and
// evaluates the baselines. It returns how long the final evaluation should
// take (evaluateBaselines).
func (r *runner) start(ctx context.Context, phase func(string)) (time.Duration, error) {
	if err := r.mode.prepare(ctx, phase); err != nil {
		return 0, err
	}
	phase("evaluate baselines")
	return r.evaluateBaselines(ctx)
}

// final evaluates res's trained policy and the mode's arms that depend on
// it, beside the baselines. It writes the table.
func (r *runner) final(ctx context.Context, phase func(string), res *Result) error {
	cfg := r.cfg
	phase("evaluate trained")
	arms := append(r.baselines(), r.trainedArms(res.Steps)...)
	tab, err := r.evaluate(ctx, arms)
	if err != nil {
		return err
	}
	if _, tab, err = r.mode.final(ctx, phase, arms, tab, res.Steps); err != nil {
		return err
	}
	res.Table = tab
	tab.Notes = r.notes(res)
	if cfg.trainsDelegator() {
		tab.Checks = r.mode.acceptance(tab)
	}
	if cfg.trainsSolver() {
		tab.Checks = append(tab.Checks, SolverAcceptance(tab, cfg.Train)...)
		phase("the solver's held-out calls, before and after")
		if tab.Roles, err = r.roleReport(ctx, tab, res.Steps); err != nil {
			return err
		}
		tab.Checks = append(tab.Checks, tab.Roles.checks()...)
		tab.Checks = append(tab.Checks, tab.Roles.handedCheck()...)
	}
	return writeTable(filepath.Join(cfg.OutDir, TableFile), tab)
}

// runner holds the models and problems of a run.
type runner struct {
	cfg  Config
	opt  Options
	scfg strategy.Config
	mode mode

	trainSet, testSet []*world.Problem
	byText            map[string]*world.Problem
	byID              map[string]*world.Problem
	split             world.Split          // of testSet
	bestRule          string               // the arm of the best fixed rule on training items (route)
	bestKeyword       scripted.KeywordRule // the best keyword rule on training items (route)
	keywordRules      int                  // the keyword rules run to choose it
	threshold         int64                // the threshold rule fitted on training items, 0 when the coverage does not narrow products (route)

	policyP *nn.Params
	solver  *local.Model // the solver's starting weights, frozen
	// solverP and trainedSolver, with Config.Train solver or both: the
	// solver's parameters that training updates, and its model over them.
	solverP       *nn.Params
	trainedSolver *local.Model
	pretrained    *local.Model     // the delegator's starting weights, frozen
	policy        *local.Model     // over policyP, which training updates
	peers         []delegate.Model // MLPO's frozen peer models solving with scratch work (scratchPeer), each answer computed once; peer i is peers[i mod len]
	closers       []*local.Model
}

// newRunner readies a run of cfg: its strategy settings, its problems
// and its models. The caller closes it.
func newRunner(cfg Config, opt Options) (*runner, error) {
	r := &runner{cfg: cfg, opt: opt, scfg: transcript.StrategyConfig()}
	r.mode = newMode(cfg.Mode, r)
	r.scfg.MaxTurns = cfg.MaxTurns
	r.scfg.StrictToolCalls = cfg.StrictToolCalls
	r.scfg.Peers = cfg.PeerCount
	r.scfg.Weak.Temperature = 0 // the solver is a greedy tool; peers sample (0.7) with per-item seeds
	r.scfg.Strong.Temperature = cfg.EvalTemperature
	r.scfg.Single.Temperature = cfg.EvalTemperature
	r.scfg.Leader.Temperature = cfg.EvalTemperature
	// RL.MaxNewTokens caps every call, in training and in the table alike.
	for _, g := range []*strategy.Generation{&r.scfg.Single, &r.scfg.Strong, &r.scfg.Weak, &r.scfg.Peer, &r.scfg.Leader} {
		g.MaxTokens = min(g.MaxTokens, cfg.RL.MaxNewTokens)
	}
	if cfg.trainsSolver() {
		// A turn's delegate calls one at a time: the solver's samples then
		// take their seeds, and join its groups, in call order, so that a
		// resumed run trains on the same samples bit for bit (two products
		// delegated in one turn would otherwise race).
		r.scfg.ToolConcurrency = 1
	}
	r.mode.settings(&r.scfg)
	if err := r.scfg.Validate(); err != nil {
		return nil, fmt.Errorf("train: strategy config: %w", err)
	}
	if err := r.generate(); err != nil {
		return nil, err
	}
	if err := r.openModels(); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// generate makes the run's training and held-out problems.
func (r *runner) generate() error {
	cfg := r.cfg
	var err error
	if r.trainSet, err = world.Generate(cfg.World, cfg.Seed, world.Train, cfg.TrainProblems); err != nil {
		return fmt.Errorf("train: generate training problems: %w", err)
	}
	if r.split, err = world.ParseSplit(cfg.EvalSplit); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if r.testSet, err = world.Generate(cfg.World, cfg.Seed, r.split, cfg.EvalItems); err != nil {
		return fmt.Errorf("train: generate held-out problems: %w", err)
	}
	r.byText = make(map[string]*world.Problem, len(r.trainSet)+len(r.testSet))
	r.byID = make(map[string]*world.Problem, len(r.trainSet)+len(r.testSet))
	for _, p := range append(append([]*world.Problem(nil), r.trainSet...), r.testSet...) {
		r.byText[p.Text] = p
		r.byID[p.ID] = p
	}
	return nil
}

// openModels loads the solver, the delegator twice, frozen and trained,
// and the mode's own models. The caller closes r when it fails.
func (r *runner) openModels() error {
	cfg := r.cfg
	solverP, err := loadCheckpoint("solver", cfg.Solver)
	if err != nil {
		return err
	}
	pretrainedP, err := loadCheckpoint(cfg.StartModel(), cfg.Delegator)
	if err != nil {
		return err
	}
	if r.policyP, err = nn.Alloc(pretrainedP.Config); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	copy(r.policyP.Data, pretrainedP.Data)
	if r.solver, err = r.open(solverP, "solver"); err != nil {
		return err
	}
	if cfg.trainsSolver() {
		if r.solverP, err = nn.Alloc(solverP.Config); err != nil {
			return fmt.Errorf("train: %w", err)
		}
		copy(r.solverP.Data, solverP.Data)
		if r.trainedSolver, err = r.open(r.solverP, "solver-trained"); err != nil {
			return err
		}
	}
	if r.pretrained, err = r.open(pretrainedP, "delegator-pretrained"); err != nil {
		return err
	}
	if r.policy, err = r.open(r.policyP, "delegator"); err != nil {
		return err
	}
	return r.mode.open()
}

// open starts a local model over p, closed with r.
func (r *runner) open(p *nn.Params, name string) (*local.Model, error) {
	m, err := local.New(p, local.Config{Name: name, MaxBatch: 64, Seed: r.cfg.Seed})
	if err != nil {
		return nil, fmt.Errorf("train: start %s: %w", name, err)
	}
	r.closers = append(r.closers, m)
	return m, nil
}

func (r *runner) close() {
	for _, m := range r.closers {
		_ = m.Close() // Close only stops the engine; nothing to report
	}
}

// Agents of the two seats.
func (r *runner) delegatorAgent(m delegate.Model) delegate.Agent {
	return delegate.Agent{Role: RoleDelegator, Model: m, Price: r.cfg.Prices.Delegator}
}

func (r *runner) subagent(m delegate.Model, price delegate.Price) delegate.Agent {
	return delegate.Agent{Role: RoleSubagent, Model: m, Price: price}
}

// seatAgents are the agents of the delegator's and solver's seats around
// models d and s. The delegator's runs in its conversation.
func (r *runner) seatAgents(d, s delegate.Model) (delegator, solver delegate.Agent) {
	return r.delegatorAgent(newConversation(d, r.cfg.CacheMinTokens)), r.subagent(s, r.cfg.Prices.Solver)
}

// perRun is a strategy built afresh for every run. Each run then has its
// own conversation accounting, and in training its own seeds.
type perRun struct {
	name  string
	build func(request string) (delegate.Strategy, error)
}

func (s perRun) Name() string { return s.name }

func (s perRun) Run(ctx context.Context, request string, events chan<- delegate.Event) (*delegate.Trace, error) {
	st, err := s.build(request)
	if err != nil {
		return nil, err
	}
	return st.Run(ctx, request, events)
}

// observed hands each run's trace to the job's Traces.
type observed struct {
	delegate.Strategy
	traces func(*delegate.Trace)
}

func (s observed) Run(ctx context.Context, request string, events chan<- delegate.Event) (*delegate.Trace, error) {
	t, err := s.Strategy.Run(ctx, request, events)
	if t != nil {
		s.traces(t)
	}
	return t, err
}

// observe returns a built strategy whose traces go to the job's Traces,
// when it has one.
func (r *runner) observe(s delegate.Strategy, err error) (delegate.Strategy, error) {
	if err != nil || r.cfg.Traces == nil {
		return s, err
	}
	return observed{Strategy: s, traces: r.cfg.Traces}, nil
}

// single builds single with a in the one seat.
func (r *runner) single(a delegate.Agent) (delegate.Strategy, error) {
	return r.observe(strategy.New(strategy.NameSingle, strategy.Roles{Single: a}, r.scfg))
}

// baselines are the arms that do not depend on training.
func (r *runner) baselines() []bench.Arm { return r.mode.baselines() }

// trainedArms are the arms of the trained policy after steps steps. The
// step is in the arm's name, so results of an earlier state of a resumed
// run are never mixed in.
func (r *runner) trainedArms(steps int) []bench.Arm { return r.mode.trainedArms(steps) }

// startArms is the number of baselines, last in their list, that run the
// starting policies in the trained seats.
func (r *runner) startArms() int { return r.mode.startArms() }

func trainedName(arm string, steps int) string {
	return arm + " (step " + strconv.Itoa(steps) + ")"
}

// tasksOf returns problems as eval tasks.
func tasksOf(problems []*world.Problem) []delegate.Task {
	out := make([]delegate.Task, len(problems))
	for i, p := range problems {
		out[i] = p.Task()
	}
	return out
}

// evaluateCounting runs arms on the held-out items, skipping those
// already in the results file, and returns how many it ran.
func (r *runner) evaluateCounting(ctx context.Context, arms []bench.Arm) (int, error) {
	path := filepath.Join(r.cfg.OutDir, EvalFile)
	ecfg := bench.DefaultConfig()
	ecfg.Results, ecfg.Concurrency, ecfg.Label = path, r.cfg.EvalConcurrency, r.evalLabel()
	rep, err := bench.Run(ctx, ecfg, tasksOf(r.testSet), arms, world.Verify, r.opt.EvalProgress)
	if err != nil {
		return 0, fmt.Errorf("train: evaluate: %w", err)
	}
	return len(r.testSet)*len(arms) - rep.Resumed, nil
}

// chooseRule runs the mode's fixed rules on the first RuleItems training
// problems. It returns the arm of highest mean reward, the first on a tie.
// That is the best input-independent policy, chosen without the held-out
// items.
func (r *runner) chooseRule(ctx context.Context, arms []bench.Arm) (string, error) {
	problems := r.trainSet[:min(r.cfg.RuleItems, len(r.trainSet))]
	path := filepath.Join(r.cfg.OutDir, RulesFile)
	ecfg := bench.DefaultConfig()
	ecfg.Results, ecfg.Concurrency, ecfg.Label = path, r.cfg.EvalConcurrency, labelDelegated
	if _, err := bench.Run(ctx, ecfg, tasksOf(problems), arms, world.Verify, r.opt.EvalProgress); err != nil {
		return "", fmt.Errorf("train: fixed rules on training items: %w", err)
	}
	records, _, err := bench.ReadResults(path)
	if err != nil {
		return "", fmt.Errorf("train: fixed rules on training items: %w", err)
	}
	names := make([]string, len(arms))
	for i, a := range arms {
		names[i] = a.Name
	}
	tab, err := NewTable(names, tasksOf(problems), records, r.cfg.Reward, r.byID)
	if err != nil {
		return "", fmt.Errorf("train: fixed rules on training items: %w", err)
	}
	best := &tab.Rows[0]
	for i := range tab.Rows {
		if tab.Rows[i].Reward > best.Reward {
			best = &tab.Rows[i]
		}
	}
	r.opt.Log.Info("train: best fixed rule on training items", "rule", best.Arm, "reward", best.Reward, "items", len(problems))
	return best.Arm, nil
}

// labelDelegated labels a trace with which kinds of step were delegated.
// The label is the operations of the sub-agents' questions, in call order
// ("*-").
func labelDelegated(tr *delegate.Trace) map[string]string {
	var ops []byte
	for _, n := range tr.Calls() {
		if n.Role == RoleSubagent && len(n.Messages) > 0 {
			if op, _, _, err := world.ParseExpr(strings.TrimSpace(n.Messages[len(n.Messages)-1].Content)); err == nil {
				ops = append(ops, byte(op))
			}
		}
	}
	return map[string]string{LabelDelegated: string(ops)}
}

// LabelDelegated is the record label of the delegated operations.
const LabelDelegated = "delegated_ops"

// evaluate runs arms on the held-out items not yet in the results file. It
// returns the table of arms over every record.
func (r *runner) evaluate(ctx context.Context, arms []bench.Arm) (*Table, error) {
	path := filepath.Join(r.cfg.OutDir, EvalFile)
	if _, err := r.evaluateCounting(ctx, arms); err != nil {
		return nil, err
	}
	records, _, err := bench.ReadResults(path)
	if err != nil {
		return nil, fmt.Errorf("train: evaluate: %w", err)
	}
	names := make([]string, len(arms))
	for i, a := range arms {
		names[i] = a.Name
	}
	return NewTable(names, tasksOf(r.testSet), records, r.cfg.Reward, r.byID)
}

// timing is TimingFile.
type timing struct {
	// StartEvalSeconds is the wall time of evaluating the starting
	// policy's arms alone, which the trained policy's evaluation will
	// take again.
	StartEvalSeconds float64 `json:"start_eval_seconds"`
	// Items is the number of items (arms × problems) it covered.
	Items int `json:"items"`
}

// evaluateBaselines runs the baselines. First come those without the
// starting policy in its training seat. Then the arms with it run alone
// and timed. It returns how long the final evaluation should be expected
// to take: that time, from this invocation or an earlier one's TimingFile.
func (r *runner) evaluateBaselines(ctx context.Context) (time.Duration, error) {
	arms := r.baselines()
	split := len(arms) - r.startArms()
	if _, err := r.evaluate(ctx, arms[:split]); err != nil {
		return 0, err
	}
	path := filepath.Join(r.cfg.OutDir, TimingFile)
	var tm timing
	start := time.Now()
	ran, err := r.evaluateCounting(ctx, arms[split:])
	if err != nil {
		return 0, err
	}
	total := len(r.testSet) * (len(arms) - split)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &tm); err != nil {
			return 0, fmt.Errorf("train: timing file %s: %w", path, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return 0, fmt.Errorf("train: %w", err)
	case ran > 0:
		// Measured now; scaled up when an interrupted invocation had run
		// some of the items already.
		tm.StartEvalSeconds = time.Since(start).Seconds() * float64(total) / float64(ran)
		tm.Items = total
		b, err := json.Marshal(tm)
		if err == nil {
			err = os.WriteFile(path, b, 0o644)
		}
		if err != nil {
			return 0, fmt.Errorf("train: timing: %w", err)
		}
	}
	if tm.Items <= 0 {
		return 0, nil
	}
	// The final evaluation runs the trained arms, each about as long as
	// a starting one, whatever EvalItems was when the time was measured.
	final := len(r.testSet) * len(r.trainedArms(0))
	return time.Duration(tm.StartEvalSeconds / float64(tm.Items) * float64(final) * float64(time.Second)), nil
}

// train runs the RL phase with what is left of TrainTime. It stops early
// enough before the Deadline to leave reserve for the final evaluation.
// Each trained policy has its own trainer (the delegator's in OutDir, the
// solver's in OutDir/SolverDir), all stepping together on one source's
// rollouts (rl.Lockstep).
func (r *runner) train(ctx context.Context, reserve time.Duration) (*Result, error) {
	cfgs := r.trainerConfigs()
	src, err := r.source(ctx, cfgs[0])
	if err != nil {
		return nil, err
	}
	used, err := trainSeconds(r.cfg.OutDir)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if r.cfg.TrainTime > 0 {
		left := r.cfg.TrainTime - time.Duration(used*float64(time.Second))
		var c2 context.CancelFunc
		// With nothing left the trainer still resumes its checkpoint
		// (the trained weights) before it sees the deadline.
		tctx, c2 = context.WithTimeout(tctx, max(left, 0))
		defer c2()
	}
	if !r.cfg.Deadline.IsZero() {
		// A margin of a tenth and 5 s for loading, plots and the table.
		stop := r.cfg.Deadline.Add(-reserve - reserve/10 - 5*time.Second)
		var c3 context.CancelFunc
		tctx, c3 = context.WithDeadline(tctx, stop)
		defer c3()
	}
	trainers := make([]*rl.Trainer, len(cfgs))
	for i, c := range cfgs {
		s, params := src, r.policyP
		if i > 0 {
			s = src.(*rollouts).View(i)
		}
		if c.PolicyRole == RoleSubagent {
			params = r.solverP
		}
		progress := r.opt.TrainProgress
		if i > 0 {
			progress = nil // one bar: the lead trainer's steps
		}
		if trainers[i], err = rl.New(c, params, s, progress); err != nil {
			return nil, fmt.Errorf("train: %s: %w", c.PolicyRole, err)
		}
	}
	res := &Result{Checkpoint: rl.CheckpointDir(cfgs[0].OutDir)}
	if r.cfg.trainsSolver() {
		res.SolverCheckpoint = rl.CheckpointDir(filepath.Join(r.cfg.OutDir, SolverDir))
	}
	err = rl.Lockstep(tctx, trainers...)
	res.Steps = trainers[0].StepsDone()
	for _, t := range trainers[1:] {
		res.Steps = min(res.Steps, t.StepsDone())
	}
	switch {
	case err == nil:
		res.StoppedBy = "steps"
	case ctx.Err() != nil:
		return nil, fmt.Errorf("train: %w", err)
	case tctx.Err() != nil && errors.Is(err, context.DeadlineExceeded), tctx.Err() != nil && errors.Is(err, context.Canceled):
		res.StoppedBy = "time"
	default:
		return nil, fmt.Errorf("train: %w", err)
	}
	if res.TrainSeconds, err = trainSeconds(r.cfg.OutDir); err != nil {
		return nil, err
	}
	return res, nil
}

// trainerConfigs are the configs of the run's trainers. The lead comes
// first, the delegator's when it is trained. Each is the run's RL config
// with the policy's role and directory. The solver's calls are capped at
// its token budget.
func (r *runner) trainerConfigs() []rl.Config {
	cfg := r.cfg.RL
	cfg.PolicyRole, cfg.OutDir, cfg.Seed = RoleDelegator, r.cfg.OutDir, r.cfg.RLSeed()
	var out []rl.Config
	if r.cfg.trainsDelegator() {
		out = append(out, cfg)
	}
	if r.cfg.trainsSolver() {
		sc := cfg
		sc.PolicyRole, sc.OutDir = RoleSubagent, filepath.Join(r.cfg.OutDir, SolverDir)
		sc.MaxNewTokens = r.scfg.Weak.MaxTokens
		out = append(out, sc)
	}
	return out
}

// trainSeconds sums the rollout and update time of the run in dir. It reads
// the delegator's and the solver's metrics logs.
func trainSeconds(dir string) (float64, error) {
	var s float64
	for _, d := range []string{dir, filepath.Join(dir, SolverDir)} {
		x, err := logSeconds(d)
		if err != nil {
			return 0, err
		}
		s += x
	}
	return s, nil
}

// logSeconds sums the rollout and update time of dir's metrics log.
func logSeconds(dir string) (float64, error) {
	f, err := os.Open(filepath.Join(dir, rl.MetricsFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("train: %w", err)
	}
	defer f.Close()
	ms, err := rl.ReadMetrics(f)
	if err != nil {
		return 0, fmt.Errorf("train: metrics of %s: %w", dir, err)
	}
	var s float64
	for _, m := range ms {
		s += m.RolloutSeconds + m.UpdateSeconds
	}
	return s, nil
}

// source is where the lead trainer's groups come from: the mode's
// rollouts on the training problems, run in process.
func (r *runner) source(ctx context.Context, cfg rl.Config) (rl.Source, error) {
	return r.mode.source(ctx, cfg)
}

// problemEnv is the in-process source whose item i is problems[i]. Each
// rollout runs the strategy build makes, with the policy in the
// delegator's seat and the pretrained solver untrained. The one trained
// role is cfg.PolicyRole.
func (r *runner) problemEnv(cfg rl.Config, problems []*world.Problem, build func(p *world.Problem, delegator, solver delegate.Agent) (delegate.Strategy, error)) *rollouts {
	return &rollouts{r: r, cfg: cfg, problems: problems, build: build,
		delegator: seat{m: r.policy, trained: true, maxNew: cfg.MaxNewTokens}, solver: seat{m: r.solver},
		roles: []trainedRole{{cfg.PolicyRole, r.policyP.Config.Context}},
		items: rl.NewItems(cfg.Seed, len(problems), cfg.ItemsPerStep), scorer: Scorer(r.cfg.Reward)}
}

// Scorer scores a world rollout in training, as `process --reward world`
// does. It is rollout.RewardScorer with the world's settings. The final
// answer is verified against the problem's (world.ParseAnswer), with no
// baseline. g rewards the correctness and the bill: the tokens RoleDelegator
// generated and the calls of every other role. An answer the strategy reports
// a failure for (a reply not in the protocol's format, max turns) is never
// verified: it is wrong even when its number is right, or RL learns to drop
// the format; with a format penalty of 0, as the world's reward has, its
// reward is a wrong answer's.
func Scorer(g reward.Graded) *rollout.RewardScorer {
	return &rollout.RewardScorer{
		Verify:          world.Verify,
		Reward:          g.Reward,
		PolicyRoles:     []string{RoleDelegator},
		GeneratedTokens: true,
	}
}

// scored is whether an item of the table counts right, and its reward, by
// Scorer's rule. An answer the strategy reports a failure for is wrong
// even when its number verifies. Its reward is g's of a wrong answer. Such
// failures are a reply not in the protocol's format, such as a leader's
// answer without <answer></answer>, max turns, or a failed call.
func scored(rew reward.Graded, verified, failed bool, roles map[string]delegate.Totals) (bool, float64) {
	correct := verified && !failed
	return correct, world.RewardOf(rew, correct, world.Account{Delegator: roles[RoleDelegator].Usage, SubagentCalls: roles[RoleSubagent].Calls})
}

// scalars are the named scalars of one rollout in the step's metrics.
// Where cov narrows the products, they count the products worth
// delegating inside and outside it, and those of each delegated.
func scalars(tr *delegate.Trace, p *world.Problem, cov world.Coverage) map[string]float64 {
	sub := tr.Roles[RoleSubagent]
	del := tr.Roles[RoleDelegator]
	m := map[string]float64{
		"subagent_calls":   float64(sub.Calls),
		"delegator_tokens": float64(del.Usage.CompletionTokens),
		"cost":             tr.Total.Cost,
		// The solver's answers the world judges wrong: each costs the
		// rollout its answer unless the delegator checks it.
		"subagent_wrong": float64(solverWrong(tr)),
	}
	// Per kind of step: how many the problem has and how many were handed
	// over; the step's means of the two make the delegation rate per kind.
	// Both keys are set for each kind the problem has, zeros included, so
	// that both means are over the same rollouts.
	for _, s := range p.Steps {
		m[StepsMetric(s.Op)]++
		m[DelegatedMetric(s.Op)] += 0
	}
	for _, op := range []byte(labelDelegated(tr)[LabelDelegated]) {
		m[DelegatedMetric(world.Op(op))]++
	}
	if cov.Narrowed() {
		coverageScalars(m, tr, p, cov)
	}
	return m
}

// The rollout scalars of coverageScalars: products worth delegating
// inside and outside the solver's coverage, and those delegated.
const (
	StepsCoveredMetric       = "steps_product_covered"
	StepsUncoveredMetric     = "steps_product_uncovered"
	DelegatedCoveredMetric   = "delegated_product_covered"
	DelegatedUncoveredMetric = "delegated_product_uncovered"
)

// coverageScalars adds to m the products of p worth delegating, inside and
// outside cov (world.WorthDelegating). It adds how many of each tr handed
// to the solver. Every key is set, zeros included, so that a
// step's means are over all its rollouts.
func coverageScalars(m map[string]float64, tr *delegate.Trace, p *world.Problem, cov world.Coverage) {
	m[StepsCoveredMetric], m[StepsUncoveredMetric] = 0, 0
	m[DelegatedCoveredMetric], m[DelegatedUncoveredMetric] = 0, 0
	for _, s := range p.Steps {
		switch {
		case !world.WorthDelegating(s):
		case cov.Covers(s.Op, s.X.Value, s.Y.Value):
			m[StepsCoveredMetric]++
		default:
			m[StepsUncoveredMetric]++
		}
	}
	for _, n := range tr.Calls() {
		if n.Role != RoleSubagent || len(n.Messages) == 0 {
			continue
		}
		op, x, y, err := world.ParseExpr(strings.TrimSpace(n.Messages[len(n.Messages)-1].Content))
		if err != nil || !world.WorthDelegating(world.Step{Op: op, X: world.Operand{Value: x}, Y: world.Operand{Value: y}}) {
			continue
		}
		if cov.Covers(op, x, y) {
			m[DelegatedCoveredMetric]++
		} else {
			m[DelegatedUncoveredMetric]++
		}
	}
}

// StepsMetric and DelegatedMetric name the rollout scalars counting the
// steps of kind op and those delegated.
func StepsMetric(op world.Op) string { return "steps_" + opName[op] }

func DelegatedMetric(op world.Op) string { return "delegated_" + opName[op] }

// opName names the kinds of step in metric names.
var opName = map[world.Op]string{world.Mul: "product", world.Add: "sum", world.Sub: "difference"}
