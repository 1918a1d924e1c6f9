package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// The tools of the delegation environment.
const (
	ToolDelegate = strategy.DelegateToolName // hand a self-contained question to the sub-agent
	ToolAnswer   = "answer"                  // give the final answer; ends the episode
)

// MaxQuestions is the most questions one delegate call may hand at once.
const MaxQuestions = 8

// DelegationConfig sets up the delegation environment. Nil and zero
// fields take the defaults noted.
type DelegationConfig struct {
	// Subagent answers delegate calls. Required; shared by every episode,
	// so it must be safe for concurrent use.
	Subagent delegate.Model
	// World generates the problems. Default world.DefaultConfig().
	World *world.Config
	// Split is the split episodes draw from. Default world.Train.
	Split world.Split
	// MaxSteps ends an episode unanswered after so many tool calls.
	// Default 8.
	MaxSteps int
	// Budget ends an episode unanswered once its spend reaches so many
	// dollars. Zero: no budget.
	Budget float64
	// EpisodeTime ends an episode unanswered once so long has passed
	// since its reset. A sub-agent call running then is cut short. Zero:
	// no limit.
	EpisodeTime time.Duration
	// Prices price the two roles. Default world.DefaultPrices().
	Prices *world.Prices
	// Reward scores an ended episode. Default world.DefaultReward().
	Reward *reward.Graded
	// Score, when set, scores an ended episode instead of Reward. It gets
	// the episode's Outcome, as a reward.Config's Func or a
	// reward.Graded's Reward reads it, and must be safe for concurrent use.
	Score func(reward.Outcome) float64
	// ScoreName names Score in the ended episode's terms.
	ScoreName string
	// GeneratedTokens makes the outcome's tokens the delegator's
	// completion tokens, as the world's reward counts them; else its
	// whole usage.
	GeneratedTokens bool
	// Generation is how the sub-agent is asked. Default the route
	// strategy's weak stage in this world (transcript.StrategyConfig).
	Generation *strategy.Generation
	// Tasks, when set, are the problems instead of the world's: a reset
	// with seed s draws Tasks[s mod len(Tasks)]. Each needs a reference
	// answer.
	Tasks []delegate.Task
	// Verify scores an answer to one of Tasks. Required with Tasks. It
	// gets the answer boxed, \boxed{ANSWER}, as the verifiers of package
	// score read a reply, unless the answer has a box already.
	Verify delegate.Verifier
	// Judge, when set, scores an answer to a task without a reference
	// answer, such as an open question: it sets o.Verdict, the judge's
	// comparison of answer with a baseline. The quality is the verdict's
	// Diff/100. It must be safe for concurrent use. Without it, every task
	// needs a reference answer.
	Judge func(ctx context.Context, t delegate.Task, answer string, o *reward.Outcome) error
	// Ended, when set, sees each episode once it ends, or once its
	// session resets or closes first. It runs on the session's goroutine
	// and must not block.
	Ended func(EpisodeRecord)
}

// EpisodeRecord is an episode as DelegationConfig.Ended sees it.
type EpisodeRecord struct {
	State   DelegationState
	Start   time.Time
	Latency time.Duration
	Steps   []StepRecord
}

// StepRecord is one tool call of an episode. Subagent is the sub-agent's
// call of a delegate step, nil when it made none. Parallel are the calls
// of a delegate step with several questions, in their order.
type StepRecord struct {
	CallID, Tool string
	Start        time.Time
	Latency      time.Duration
	Error        *ToolError
	Subagent     *delegate.Node
	Parallel     []*delegate.Node
}

// Delegation is the delegation environment of package world.
// An episode is one problem, a step is one tool call of the policy, and the reward is the world's.
// New makes one Environment per session.
type Delegation struct {
	sub      delegate.Model
	world    world.Config
	split    world.Split
	maxSteps int
	budget   float64
	time     time.Duration // EpisodeTime
	prices   world.Prices
	reward   reward.Graded
	score    func(reward.Outcome) float64
	scoreAs  string // Score's name
	genOnly  bool   // GeneratedTokens
	gen      strategy.Generation
	tasks    []delegate.Task
	verify   delegate.Verifier
	judge    func(ctx context.Context, t delegate.Task, answer string, o *reward.Outcome) error
	ended    func(EpisodeRecord)
	dataset  string // the tasks' dataset, world.Dataset for the world's
	tools    []byte // Tools encoded once: every observation carries them
}

// NewDelegation checks cfg and returns the environment it sets up.
func NewDelegation(cfg DelegationConfig) (*Delegation, error) {
	if cfg.Subagent == nil {
		return nil, errors.New("delegation environment: a sub-agent model is required")
	}
	d := &Delegation{sub: cfg.Subagent, world: world.DefaultConfig(), split: cfg.Split, maxSteps: cfg.MaxSteps, budget: cfg.Budget, time: cfg.EpisodeTime, ended: cfg.Ended,
		prices: world.DefaultPrices(), reward: world.DefaultReward(), gen: transcript.StrategyConfig().Weak,
		score: cfg.Score, scoreAs: cfg.ScoreName, genOnly: cfg.GeneratedTokens}
	if cfg.World != nil {
		d.world = *cfg.World
	}
	if err := d.world.Validate(); err != nil {
		return nil, fmt.Errorf("delegation environment: %w", err)
	}
	if cfg.Prices != nil {
		d.prices = *cfg.Prices
	}
	if cfg.Reward != nil {
		d.reward = *cfg.Reward
	}
	if cfg.Generation != nil {
		d.gen = *cfg.Generation
	}
	if d.maxSteps == 0 {
		d.maxSteps = 8
	}
	if d.maxSteps < 0 || d.budget < 0 || math.IsNaN(d.budget) || math.IsInf(d.budget, 0) || d.time < 0 {
		return nil, fmt.Errorf("delegation environment: max steps %d, budget %g and episode time %v must not be negative", d.maxSteps, d.budget, d.time)
	}
	d.dataset = world.Dataset
	if len(cfg.Tasks) > 0 {
		if cfg.Verify == nil {
			return nil, errors.New("delegation environment: tasks need a verifier")
		}
		for _, t := range cfg.Tasks {
			if t.Answer == "" && cfg.Judge == nil {
				return nil, fmt.Errorf("delegation environment: task %q of %s has no reference answer", t.ID, t.Dataset)
			}
		}
		d.tasks, d.verify, d.judge, d.dataset = cfg.Tasks, cfg.Verify, cfg.Judge, cfg.Tasks[0].Dataset
	}
	tools, err := json.Marshal(d.Tools())
	if err != nil {
		return nil, fmt.Errorf("delegation environment: encode tools: %w", err)
	}
	d.tools = tools
	return d, nil
}

// Task is the task an episode reset with seed draws: Tasks[seed mod
// len(Tasks)], or the world's problem of seed (Problem).
func (d *Delegation) Task(seed int64) (delegate.Task, error) {
	if len(d.tasks) > 0 {
		return d.tasks[seed%int64(len(d.tasks))], nil
	}
	p, err := d.Problem(seed)
	if err != nil {
		return delegate.Task{}, err
	}
	return p.Task(), nil
}

// MaxSteps is the number of tool calls that ends an episode.
func (d *Delegation) MaxSteps() int { return d.maxSteps }

// Problem is the world's problem of seed: the first problem of the split
// from a generator seeded so.
func (d *Delegation) Problem(seed int64) (*world.Problem, error) {
	g, err := world.NewGenerator(d.world, uint64(seed), d.split)
	if err != nil {
		return nil, fmt.Errorf("problem of seed %d: %w", seed, err)
	}
	p, err := g.Next()
	if err != nil {
		return nil, fmt.Errorf("problem of seed %d: %w", seed, err)
	}
	return p, nil
}

// New makes one session's environment. It never fails.
func (d *Delegation) New() (Environment, error) { return &episode{d: d}, nil }

// Metadata describes the environment.
func (d *Delegation) Metadata() Metadata {
	v := "1"
	what := fmt.Sprintf("a %s problem of delegate's arithmetic world", d.split)
	if len(d.tasks) > 0 {
		what = fmt.Sprintf("one of %d %s tasks", len(d.tasks), d.dataset)
	}
	rw := fmt.Sprintf("reward = correct - %g x delegator generated tokens - %g x sub-agent calls", d.reward.Lambda, d.reward.Mu)
	if d.score != nil {
		rw = "reward: " + d.scoreAs
	}
	return Metadata{
		Name:        "delegate-" + d.dataset,
		Description: fmt.Sprintf("Solve %s, delegating steps to the sub-agent %s; %s.", what, d.sub.Name(), rw),
		Version:     &v,
	}
}

// Tools are the tools an episode offers, with their argument schemas.
func (d *Delegation) Tools() []Tool {
	return []Tool{
		{Name: ToolDelegate, Description: "Hand a self-contained question, such as 47*28, to the sub-agent model and get its answer. " +
			"Or hand several at once as questions: they run in parallel, and the answers come back as a JSON array in their order.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string","description":"the question, complete in itself"},` +
				`"questions":{"type":"array","items":{"type":"string"},"description":"instead of question: up to ` + strconv.Itoa(MaxQuestions) + ` questions, each complete in itself, asked in parallel"}}}`)},
		{Name: ToolAnswer, Description: d.answerDescription(),
			InputSchema: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string","description":"the final answer"}},"required":["answer"]}`)},
	}
}

func (d *Delegation) answerDescription() string {
	switch d.dataset {
	case world.Dataset:
		return "Give the final answer, an integer. It ends the episode."
	case "mmlu":
		return "Give the final answer, the letter of the right option. It ends the episode."
	}
	return "Give the final answer, the value alone. It ends the episode."
}

// billTools are the tools as the delegator's bill renders them: names
// only, as transcript.Tool declares delegate.
var billTools = []delegate.Tool{transcript.Tool, {Name: ToolAnswer}}

// DelegationObservation is the observation of every reset and step.
// ToolName, Result and Error are the last call's, empty at reset.
type DelegationObservation struct {
	Task     string     `json:"task"`
	Tools    []Tool     `json:"tools"`
	ToolName string     `json:"tool_name"`
	Result   string     `json:"result"`
	Error    *ToolError `json:"error"`
	Spend    Spend      `json:"spend"`

	tools []byte // Tools as json.Marshal encodes them, when known
}

// appendJSON appends o as json.Marshal encodes it. Tools encoded once
// save most of the work: they are the larger part of an observation. The
// rest is written by hand, without reflection.
func (o DelegationObservation) appendJSON(dst []byte) ([]byte, error) {
	if o.tools == nil || !o.Spend.finite() {
		b, err := json.Marshal(o)
		return append(dst, b...), err
	}
	dst = slices.Grow(dst, len(o.tools)+len(o.Task)+len(o.Result)+512)
	dst = append(dst, `{"task":`...)
	dst = appendString(dst, o.Task)
	dst = append(dst, `,"tools":`...)
	dst = append(dst, o.tools...)
	dst = append(dst, `,"tool_name":`...)
	dst = appendString(dst, o.ToolName)
	dst = append(dst, `,"result":`...)
	dst = appendString(dst, o.Result)
	if o.Error == nil {
		dst = append(dst, `,"error":null`...)
	} else {
		dst = append(dst, `,"error":{"error_type":`...)
		dst = appendString(dst, o.Error.ErrorType)
		dst = append(dst, `,"message":`...)
		dst = appendString(dst, o.Error.Message)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"spend":{"delegator":`...)
	dst = o.Spend.Delegator.appendJSON(dst)
	dst = append(dst, `,"subagent":`...)
	dst = o.Spend.Subagent.appendJSON(dst)
	dst = append(dst, `,"dollars":`...)
	dst = appendFloat(dst, o.Spend.Dollars)
	dst = append(dst, `,"critical_path_s":`...)
	dst = appendFloat(dst, o.Spend.CriticalPathS)
	return append(dst, "}}"...), nil
}

// finite reports whether every float of s can be written as JSON.
func (s Spend) finite() bool {
	for _, f := range []float64{s.Delegator.Dollars, s.Subagent.Dollars, s.Dollars, s.CriticalPathS} {
		if !finite(f) {
			return false
		}
	}
	return true
}

// appendJSON appends r as json.Marshal encodes it; its dollars are finite.
func (r RoleSpend) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.PromptTokens), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.CompletionTokens), 10)
	dst = append(dst, `,"cached_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.CachedTokens), 10)
	dst = append(dst, `,"calls":`...)
	dst = strconv.AppendInt(dst, int64(r.Calls), 10)
	dst = append(dst, `,"dollars":`...)
	dst = appendFloat(dst, r.Dollars)
	return append(dst, '}')
}

// callText is the text of the observation's tools/call result: the
// call's result, or its error's message.
func (o DelegationObservation) callText() (string, bool) {
	if o.Error != nil {
		return o.Error.Message, true
	}
	return o.Result, false
}

// RoleSpend is what one role spent in an episode.
type RoleSpend struct {
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	CachedTokens     int     `json:"cached_tokens"`
	Calls            int     `json:"calls"`
	Dollars          float64 `json:"dollars"`
}

// Spend is an episode's spend so far. The delegator's tokens are its tool
// calls billed under this project's chat template, as the world's reward
// counts them; the sub-agent's are its API usage. The critical path is
// the sub-agent calls' wall time: they run one after another.
type Spend struct {
	Delegator     RoleSpend `json:"delegator"`
	Subagent      RoleSpend `json:"subagent"`
	Dollars       float64   `json:"dollars"`
	CriticalPathS float64   `json:"critical_path_s"`
}

// DelegationState is an episode's state. Correct and Reward are null
// until it ends.
type DelegationState struct {
	EpisodeID *string  `json:"episode_id"`
	StepCount int      `json:"step_count"`
	Seed      *int64   `json:"seed"`
	Dataset   string   `json:"dataset"`
	Split     string   `json:"split"` // the world's; "" for other datasets
	ProblemID string   `json:"problem_id"`
	Done      bool     `json:"done"`
	Correct   *bool    `json:"correct"`
	Reward    *float64 `json:"reward"`
	Spend     Spend    `json:"spend"`
	// Terms are what the configured reward (DelegationConfig.Score) was
	// made of, once the episode ended; absent under the world's reward.
	Terms *Terms `json:"terms,omitempty"`
}

// Terms are what an ended episode's configured reward was made of.
type Terms struct {
	// Reward names the reward function (DelegationConfig.ScoreName).
	Reward string `json:"reward"`
	// Quality is the verifier's word, 1 right and 0 wrong, or the judge's Diff/100.
	Quality float64 `json:"quality"`
	// Outcome is the reward function's whole input. Cost is the episode's
	// dollars, tokens the delegator's, calls the sub-agent's that
	// answered. Latency runs from the reset to the end.
	reward.Outcome
}

// Schema returns the JSON schemas of the environment's actions,
// observations and states.
func (d *Delegation) Schema() Schema {
	role := `{"type":"object","properties":{"prompt_tokens":{"type":"integer"},"completion_tokens":{"type":"integer"},"cached_tokens":{"type":"integer"},"calls":{"type":"integer"},"dollars":{"type":"number"}}}`
	spend := `{"type":"object","properties":{"delegator":` + role + `,"subagent":` + role + `,"dollars":{"type":"number"},"critical_path_s":{"type":"number"}}}`
	return Schema{
		Action: json.RawMessage(`{"title":"ToolAction","oneOf":[` +
			`{"type":"object","properties":{"type":{"const":"call_tool"},"tool_name":{"type":"string","enum":["delegate","answer"]},"arguments":{"type":"object"},"metadata":{"type":"object"}},"required":["tool_name"],"additionalProperties":false},` +
			`{"type":"object","properties":{"type":{"const":"list_tools"},"metadata":{"type":"object"}},"required":["type"],"additionalProperties":false}]}`),
		Observation: json.RawMessage(`{"title":"DelegationObservation","type":"object","properties":{` +
			`"task":{"type":"string"},"tools":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"description":{"type":"string"},"input_schema":{"type":"object"}}}},` +
			`"tool_name":{"type":"string"},"result":{"type":"string"},` +
			`"error":{"anyOf":[{"type":"null"},{"type":"object","properties":{"error_type":{"type":"string","enum":["execution_error","invalid_args","transport_error","tool_not_found","timeout"]},"message":{"type":"string"}}}]},` +
			`"spend":` + spend + `}}`),
		State: json.RawMessage(`{"title":"DelegationState","type":"object","properties":{` +
			`"episode_id":{"type":["string","null"]},"step_count":{"type":"integer","minimum":0},"seed":{"type":["integer","null"]},` +
			`"dataset":{"type":"string"},"split":{"type":"string"},"problem_id":{"type":"string"},"done":{"type":"boolean"},` +
			`"correct":{"type":["boolean","null"]},"reward":{"type":["number","null"]},"spend":` + spend + `}}`),
	}
}

// episode is one session's environment. Its methods are called from one
// goroutine at a time (Environment's contract).
type episode struct {
	d       *Delegation
	started bool
	id      string
	seed    int64
	task    delegate.Task
	msgs    []delegate.Message // the delegator's conversation
	// bill is msgs's usage and turns as account last billed them, while
	// billed says msgs has not changed since. A step billed the same
	// conversation two to five times under the chat template.
	bill    delegate.Usage
	billN   int
	billed  bool
	turn    string // the last call's metadata turn, "" without one
	turnMsg int    // the index in msgs of the last call's assistant turn
	steps   int
	done    bool
	correct *bool
	reward  *float64
	terms   *Terms
	sub     delegate.Usage // the sub-agent's usage
	subN    int            // sub-agent calls that answered
	path    time.Duration  // the sub-agent calls' wall time; of parallel calls, the slowest's
	pathN   int            // answered calls on the critical path
	// With DelegationConfig.Ended: the episode's start, its steps, the
	// last delegate call, and whether Ended saw it.
	start   time.Time
	log     []StepRecord
	lastSub *delegate.Node
	lastPar []*delegate.Node
	seen    bool
}

// Reset draws the problem of seed (a random seed when nil) and starts an
// episode on it.
func (e *episode) Reset(_ context.Context, seed *int64, episodeID string) (Observation, error) {
	s := rand.Int64N(math.MaxInt64)
	if seed != nil {
		s = *seed
	}
	t, err := e.d.Task(s)
	if err != nil {
		return Observation{}, err
	}
	if episodeID == "" {
		episodeID = fmt.Sprintf("%016x", rand.Uint64())
	}
	e.report()
	*e = episode{d: e.d, started: true, id: episodeID, seed: s, task: t, msgs: transcript.RouteMessages(t.Prompt), start: time.Now()}
	return e.observation("", "", nil), nil
}

// Step runs one tool call.
func (e *episode) Step(ctx context.Context, raw json.RawMessage) (Observation, error) {
	a, err := parseAction(raw)
	if err != nil {
		return Observation{}, err
	}
	if a.Type == ActionListTools {
		return e.observation("", "", nil), nil
	}
	switch {
	case !e.started:
		return Observation{}, ErrNoEpisode
	case e.done:
		return Observation{}, ErrEpisodeDone
	}
	e.steps++
	stepStart := time.Now()
	args, err := canonicalArgs(a.Arguments)
	if err != nil {
		return Observation{}, &ValidationError{[]FieldError{{Type: "dict_type", Loc: []any{"arguments"}, Msg: err.Error()}}}
	}
	call := delegate.ToolCall{ID: "call_" + strconv.Itoa(e.steps), Name: a.ToolName, Arguments: args}
	// Calls whose metadata name the same turn as the last call's were one
	// reply of the policy: they are billed as one assistant turn.
	turn, ok := a.Metadata["turn"]
	key := ""
	if ok {
		key = fmt.Sprint(turn)
	}
	if key != "" && key == e.turn && a.ToolName != ToolAnswer {
		m := &e.msgs[e.turnMsg]
		m.ToolCalls = append(m.ToolCalls, call)
	} else {
		e.msgs = append(e.msgs, delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{call}})
		e.turnMsg = len(e.msgs) - 1
	}
	e.billed = false
	e.turn = key
	var result string
	var terr *ToolError
	switch {
	case e.timeUp():
		// The time ran out before this call: it does not run.
	case a.ToolName == ToolDelegate:
		result, terr, err = e.delegateBy(ctx, args)
		if err != nil {
			e.msgs = append(e.msgs, delegate.ToolResult(call.ID, "error: "+err.Error()))
			e.billed = false
			return Observation{}, fmt.Errorf("delegate call %d of episode %s: %w", e.steps, e.id, err)
		}
	case a.ToolName == ToolAnswer:
		result, terr, err = e.answer(ctx, args)
		if err != nil {
			return Observation{}, fmt.Errorf("answer call %d of episode %s: %w", e.steps, e.id, err)
		}
	default:
		terr = &ToolError{ErrorType: ToolNotFound, Message: fmt.Sprintf("tool %q not found: the tools are %s and %s", a.ToolName, ToolDelegate, ToolAnswer)}
	}
	if !e.done {
		text := result
		if terr != nil {
			text = "error: " + terr.Message
		}
		e.msgs = append(e.msgs, delegate.ToolResult(call.ID, text))
		e.billed = false
	}
	if !e.done {
		result += e.limit()
	}
	if e.d.ended != nil {
		e.log = append(e.log, StepRecord{CallID: call.ID, Tool: a.ToolName, Start: stepStart, Latency: time.Since(stepStart), Error: terr, Subagent: e.lastSub, Parallel: e.lastPar})
		e.lastSub, e.lastPar = nil, nil
		if e.done {
			e.report()
		}
	}
	return e.observation(a.ToolName, strings.TrimPrefix(result, "\n"), terr), nil
}

// limit ends the episode unanswered when it reached a limit: its time,
// its steps or its budget. It returns the line that says so, or "".
func (e *episode) limit() string {
	switch sp := e.spend(); {
	case e.timeUp(): // first: past the limit the call did not run
		e.end(false)
		return fmt.Sprintf("\n[episode ended: %v passed without an answer]", e.d.time)
	case e.steps >= e.d.maxSteps:
		e.end(false)
		return fmt.Sprintf("\n[episode ended: %d tool calls without an answer]", e.steps)
	case e.d.budget > 0 && sp.Dollars >= e.d.budget:
		e.end(false)
		return fmt.Sprintf("\n[episode ended: spend $%.6f reached the budget $%.6f]", sp.Dollars, e.d.budget)
	}
	return ""
}

// report hands a started episode to DelegationConfig.Ended, once.
func (e *episode) report() {
	if e.d.ended == nil || !e.started || e.seen {
		return
	}
	e.seen = true
	st, _ := e.State().(DelegationState) // State always returns one
	e.d.ended(EpisodeRecord{State: st, Start: e.start, Latency: time.Since(e.start), Steps: e.log})
}

// parseAction reads an action strictly: OpenEnv's actions forbid fields
// they do not declare.
func parseAction(raw json.RawMessage) (ToolAction, error) {
	var a ToolAction
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, &ValidationError{[]FieldError{{Type: "value_error", Loc: []any{}, Msg: err.Error()}}}
	}
	if a.Type == "" {
		a.Type = ActionCallTool // OpenEnv reads an action without a type as a call
	}
	switch {
	case a.Type != ActionCallTool && a.Type != ActionListTools:
		return a, &ValidationError{[]FieldError{{Type: "union_tag_invalid", Loc: []any{"type"}, Msg: fmt.Sprintf("type %q: want call_tool or list_tools", a.Type)}}}
	case a.Type == ActionListTools && (a.ToolName != "" || a.Arguments != nil):
		return a, &ValidationError{[]FieldError{{Type: "extra_forbidden", Loc: []any{}, Msg: "list_tools takes no tool_name and no arguments"}}}
	case a.Type == ActionCallTool && a.ToolName == "":
		return a, &ValidationError{[]FieldError{{Type: "missing", Loc: []any{"tool_name"}, Msg: "Field required"}}}
	case a.Arguments != nil && !isObject(a.Arguments) && string(a.Arguments) != "null":
		return a, &ValidationError{[]FieldError{{Type: "dict_type", Loc: []any{"arguments"}, Msg: "Input should be a valid dictionary"}}}
	}
	if string(a.Arguments) == "null" {
		a.Arguments = nil
	}
	return a, nil
}

// canonicalArgs returns a call's arguments in the one form the episode
// transcribes and bills. The form is compact, with keys sorted, numbers
// as written, and strings as Go's encoder writes them without HTML
// escaping. So the bill of a call does not depend on how its client encoded it.
// A local model that writes this form is billed as in-process route bills it.
// raw is nil or a valid JSON object.
func canonicalArgs(raw json.RawMessage) (string, error) {
	if raw == nil {
		return "{}", nil
	}
	if isCanonical(raw) {
		return string(raw), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	b, err := MarshalUnescaped(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// isCanonical reports whether raw, a valid JSON object, is already in
// canonicalArgs's form. It spares the decode in the common case: flat,
// compact, keys ascending, no escapes. Other objects report false.
// FuzzCanonicalArgs holds it to the decode's answer.
func isCanonical(raw []byte) bool {
	if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) || bytes.Contains(raw, []byte("\u2028")) || bytes.Contains(raw, []byte("\u2029")) {
		return false // an escape to rewrite, or a rune Go's encoder escapes
	}
	n, ok := 2, true // the braces
	var prev []byte
	members(raw, func(k, v []byte) bool {
		if prev != nil && bytes.Compare(prev, k) >= 0 || len(v) == 0 || v[0] == '{' || v[0] == '[' {
			ok = false
			return false
		}
		if prev != nil {
			n++ // the comma
		}
		prev = k
		n += len(k) + 3 + len(v) // quotes, colon and value
		return true
	})
	return ok && n == len(raw) // no space between the members
}

// timeUp reports whether the episode has run for its time limit.
func (e *episode) timeUp() bool {
	return e.d.time > 0 && time.Since(e.start) >= e.d.time
}

// delegateBy runs delegate within the episode's time limit. A call cut
// by the limit is a timeout tool error; only the caller's context fails
// the step.
func (e *episode) delegateBy(ctx context.Context, args string) (string, *ToolError, error) {
	if e.d.time == 0 {
		return e.delegate(ctx, args)
	}
	dctx, cancel := context.WithDeadline(ctx, e.start.Add(e.d.time))
	defer cancel()
	result, terr, err := e.delegate(dctx, args)
	if err != nil && ctx.Err() == nil {
		return "", &ToolError{ErrorType: ToolTimeout, Message: fmt.Sprintf("the sub-agent's call was cut at the episode's time limit %v", e.d.time)}, nil
	}
	return result, terr, err
}

// delegate asks the sub-agent a question as route's delegate tool does,
// or several at once (parallel). A failed call is a tool error; only a
// done context fails the step.
func (e *episode) delegate(ctx context.Context, args string) (string, *ToolError, error) {
	if qs, many, terr := questionsOf(args); terr != nil {
		return "", terr, nil
	} else if many {
		return e.parallel(ctx, qs)
	}
	q, err := strategy.ParseDelegateArgs(args)
	if err != nil {
		return "", &ToolError{ErrorType: ToolInvalidArgs, Message: err.Error() + `; call delegate with {"question": "..."}`}, nil
	}
	t := e.d.gen.Temperature
	req := &delegate.Request{Messages: transcript.SolverMessages(q), Temperature: &t, MaxTokens: e.d.gen.MaxTokens, Seed: e.d.gen.Seed}
	start := time.Now()
	resp, err := e.d.sub.Chat(ctx, req)
	e.path += time.Since(start)
	if e.d.ended != nil {
		e.lastSub = subagentNode(e.d.sub.Name(), e.d.prices.Solver, start, resp, err)
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", nil, err
		}
		return "", &ToolError{ErrorType: ToolExecutionError, Message: "the sub-agent failed: " + err.Error()}, nil
	}
	e.sub = e.sub.Add(resp.Usage)
	e.subN++
	e.pathN++
	text, terr := subagentResult(resp)
	return text, terr, nil
}

// subagentResult is the tool result of the sub-agent's answer, as
// route's delegate tool returns it.
func subagentResult(resp *delegate.Response) (string, *ToolError) {
	text := strings.TrimSpace(resp.Text())
	switch {
	case text == "":
		return "", &ToolError{ErrorType: ToolExecutionError, Message: "the sub-agent returned an empty answer"}
	case resp.Choices[0].FinishReason == delegate.FinishLength:
		return text + "\n[the answer was cut at max_tokens]", nil
	}
	return transcript.RouteResult(text), nil
}

// subagentNode records a sub-agent call as a trace node, for Ended.
func subagentNode(model string, price delegate.Price, start time.Time, resp *delegate.Response, err error) *delegate.Node {
	n := &delegate.Node{Name: ToolDelegate, Role: "subagent", Model: model, Start: start, Latency: time.Since(start)}
	if err != nil {
		n.Error = err.Error()
		n.ErrorStatus, n.ErrorType = delegate.ErrorClass(err)
		return n
	}
	n.Usage, n.Cost, n.Retries, n.PolicyVersion = resp.Usage, price.Cost(resp.Usage), resp.Retries, resp.PolicyVersion
	if len(resp.Choices) > 0 {
		n.FinishReason = resp.Choices[0].FinishReason
	}
	return n
}

// answer ends the episode with the policy's answer, a string or a number.
// It replaces the call's message, the conversation's last. A judge that
// fails is a tool error; only a done context fails the step.
func (e *episode) answer(ctx context.Context, args string) (string, *ToolError, error) {
	var v struct {
		Answer json.RawMessage `json:"answer"`
	}
	if err := json.Unmarshal([]byte(args), &v); err != nil || v.Answer == nil {
		return "", &ToolError{ErrorType: ToolInvalidArgs, Message: `call answer with {"answer": "..."}`}, nil
	}
	var text string
	if err := json.Unmarshal(v.Answer, &text); err != nil {
		var n json.Number
		if err := json.Unmarshal(v.Answer, &n); err != nil {
			return "", &ToolError{ErrorType: ToolInvalidArgs, Message: "answer must be a string or a number"}, nil
		}
		text = n.String()
	}
	if e.task.Answer == "" && e.d.judge != nil {
		return e.judged(ctx, text)
	}
	verdict, err := e.d.check(e.task, text)
	if err != nil {
		return "", &ToolError{ErrorType: ToolExecutionError, Message: err.Error()}, nil
	}
	// The answer is billed as the text reply route's strong model ends
	// with, not as a tool call: so an episode costs what route's does.
	e.msgs[len(e.msgs)-1] = delegate.Assistant(text)
	e.billed = false
	e.end(verdict.Correct)
	if verdict.Correct {
		return "correct", nil, nil
	}
	return "wrong", nil, nil
}

// judged ends the episode with the judge's verdict on answer, a task
// without a reference answer.
func (e *episode) judged(ctx context.Context, text string) (string, *ToolError, error) {
	var o reward.Outcome
	if err := e.d.judge(ctx, e.task, text, &o); err != nil {
		if ctx.Err() != nil {
			return "", nil, err
		}
		return "", &ToolError{ErrorType: ToolExecutionError, Message: "the judge failed: " + err.Error()}, nil
	}
	if o.Verdict == nil {
		return "", &ToolError{ErrorType: ToolExecutionError, Message: "the judge gave no verdict"}, nil
	}
	e.msgs[len(e.msgs)-1] = delegate.Assistant(text)
	e.billed = false
	e.finish(nil, &o)
	if o.Verdict.Unparseable {
		return "judged: the verdict could not be read", nil, nil
	}
	return fmt.Sprintf("judged: quality %.2f against the baseline", o.Verdict.Diff/100), nil, nil
}

// check scores an answer with the world's verifier or the tasks'.
func (d *Delegation) check(t delegate.Task, answer string) (delegate.Verdict, error) {
	if d.verify == nil {
		return world.Verify(t, answer)
	}
	if !strings.Contains(answer, `\boxed`) {
		answer = `\boxed{` + answer + `}`
	}
	return d.verify(t, answer)
}

// end ends the episode and scores it.
func (e *episode) end(correct bool) { e.finish(&correct, nil) }

// finish ends the episode and scores it: verified when correct is set,
// else by the judge's verdict in judged.
func (e *episode) finish(correct *bool, judged *reward.Outcome) {
	e.done = true
	e.correct = correct
	o := e.outcome(correct)
	if judged != nil {
		o.Verdict = judged.Verdict
	}
	if e.d.score == nil {
		if correct != nil {
			r := world.RewardOf(e.d.reward, *correct, e.account())
			e.reward = &r
			return
		}
		// The world's reward of the judge's quality, counting tokens as
		// world.RewardOf does.
		wo := reward.Outcome{FormatOK: true, Verdict: o.Verdict, Tokens: e.account().Delegator.CompletionTokens, Calls: o.Calls}
		if r := e.d.reward.Reward(wo); finite(r) {
			e.reward = &r
		}
		return
	}
	t := &Terms{Reward: e.d.scoreAs, Outcome: o}
	switch {
	case correct != nil && *correct:
		t.Quality = 1
	case o.Verdict != nil && !o.Verdict.Unparseable:
		t.Quality = o.Verdict.Diff / 100
	}
	e.terms = t
	// A reward that is not finite cannot be sent as JSON: it stays null,
	// and the terms say why.
	if r := e.d.score(o); finite(r) {
		e.reward = &r
	}
}

// outcome is the ended episode as the configured reward reads it.
func (e *episode) outcome(correct *bool) reward.Outcome {
	a, sp := e.account(), e.spend()
	o := reward.Outcome{FormatOK: true, Correct: correct, Cost: sp.Dollars, Calls: a.SubagentCalls,
		Latency: time.Since(e.start), CriticalPath: e.path, AllCalls: a.DelegatorCalls + a.SubagentCalls, CriticalCalls: e.pathN}
	o.Tokens = a.Delegator.Total()
	if e.d.genOnly {
		o.Tokens = a.Delegator.CompletionTokens
	}
	if a.SubagentCalls > 0 {
		o.ModelCalls = map[string]int{e.d.sub.Name(): a.SubagentCalls}
	}
	return o
}

// account is the episode's bill so far.
func (e *episode) account() world.Account {
	if !e.billed {
		e.bill, e.billN = transcript.Transcript{Kind: transcript.KindRoute, Messages: e.msgs, Tools: billTools}.Usage(false)
		e.billed = true
	}
	return world.Account{Delegator: e.bill, Solver: e.sub, DelegatorCalls: e.billN, SubagentCalls: e.subN}
}

func (e *episode) spend() Spend {
	if !e.started {
		return Spend{}
	}
	a := e.account()
	del, sub := e.d.prices.Delegator.Cost(a.Delegator), e.d.prices.Solver.Cost(a.Solver)
	return Spend{
		Delegator:     RoleSpend{PromptTokens: a.Delegator.PromptTokens, CompletionTokens: a.Delegator.CompletionTokens, CachedTokens: a.Delegator.CachedTokens, Calls: a.DelegatorCalls, Dollars: del},
		Subagent:      RoleSpend{PromptTokens: a.Solver.PromptTokens, CompletionTokens: a.Solver.CompletionTokens, CachedTokens: a.Solver.CachedTokens, Calls: a.SubagentCalls, Dollars: sub},
		Dollars:       del + sub,
		CriticalPathS: e.path.Seconds(),
	}
}

func (e *episode) observation(tool, result string, terr *ToolError) Observation {
	return Observation{
		Value:  DelegationObservation{Task: e.task.Prompt, Tools: e.d.Tools(), ToolName: tool, Result: result, Error: terr, Spend: e.spend(), tools: e.d.tools},
		Reward: e.reward,
		Done:   e.done,
	}
}

// State returns the episode's state.
func (e *episode) State() any {
	st := DelegationState{StepCount: e.steps, Dataset: e.d.dataset, Done: e.done, Correct: e.correct, Reward: e.reward, Spend: e.spend(), Terms: e.terms}
	if e.started {
		id, seed := e.id, e.seed
		st.EpisodeID, st.Seed, st.ProblemID = &id, &seed, e.task.ID
	}
	if e.d.tasks == nil {
		st.Split = e.d.split.String()
	}
	return st
}

// Close reports an episode left unended; it releases nothing: the
// sub-agent is shared.
func (e *episode) Close() error {
	e.report()
	return nil
}
