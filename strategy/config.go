package strategy

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/delegatelab/delegate"
)

// Generation holds the sampling settings of one stage's calls.
type Generation struct {
	// Temperature is sent with every call of the stage; 0 is greedy.
	Temperature float64 `yaml:"temperature" json:"temperature"`
	// MaxTokens caps each completion; 0 leaves the backend's default.
	MaxTokens int `yaml:"max_tokens" json:"max_tokens"`
	// Seed, when set, is sent for reproducible sampling. Where one stage makes
	// calls that would otherwise be identical, call i (from 0) gets Seed+i:
	// lead's peer i+1, decompose's sub-agent retry i.
	Seed *int64 `yaml:"seed,omitempty" json:"seed,omitempty"`
}

// Config holds every knob of the four strategies. DefaultConfig gives the
// documented defaults; a config read from a file starts from it and
// overrides what the file names.
type Config struct {
	// Per-stage generation settings.
	Single    Generation `yaml:"single" json:"single"`       // single: the one call
	Plan      Generation `yaml:"plan" json:"plan"`           // decompose stage 1: the delegator plans
	Subagent  Generation `yaml:"subagent" json:"subagent"`   // decompose stage 2; MaxTokens is the output budget, required
	Aggregate Generation `yaml:"aggregate" json:"aggregate"` // decompose stage 3: the delegator answers
	Strong    Generation `yaml:"strong" json:"strong"`       // route: the strong model's turns
	Weak      Generation `yaml:"weak" json:"weak"`           // route: the weak model answering a delegated question
	Peer      Generation `yaml:"peer" json:"peer"`           // lead: each peer's answer and refinement
	Leader    Generation `yaml:"leader" json:"leader"`       // lead: the leader's aggregation

	// decompose.
	MinSubtasks int `yaml:"min_subtasks" json:"min_subtasks"` // fewest subtasks a plan may have
	MaxSubtasks int `yaml:"max_subtasks" json:"max_subtasks"` // most subtasks a plan may have
	// SubagentConcurrency bounds the sub-agent calls in flight at once.
	SubagentConcurrency int `yaml:"subagent_concurrency" json:"subagent_concurrency"`
	// SubagentContext gives each sub-agent the user's request besides its
	// subtask; false reproduces the reference, where it saw the subtask only.
	SubagentContext bool `yaml:"subagent_context" json:"subagent_context"`
	// SubagentRetries is how many times a failed sub-agent call is repeated.
	// After that, its failure is stated in its place and the path goes on.
	SubagentRetries int `yaml:"subagent_retries" json:"subagent_retries"`

	// route.
	MaxTurns int `yaml:"max_turns" json:"max_turns"` // strong-model turns before the run stops with "max turns"
	// ToolConcurrency bounds the delegate calls of one turn run at once.
	ToolConcurrency int `yaml:"tool_concurrency" json:"tool_concurrency"`
	// ToolResult is what a delegate call returns to the strong model.
	// ToolResultFull, the default, returns the weak model's whole reply.
	// ToolResultAnswer returns only its FinalAnswer, which keeps the weak
	// model's working out of every later turn's prompt.
	ToolResult string `yaml:"tool_result" json:"tool_result"`
	// StrictToolCalls asks the strong model for well-formed calls only.
	// Each call it opens names a declared tool with valid arguments, as
	// delegate.Request.StrictToolCalls asks; a local model enforces it while
	// sampling. A malformed call would otherwise end the run.
	StrictToolCalls bool `yaml:"strict_tool_calls" json:"strict_tool_calls,omitempty"`

	// lead.
	Peers  int `yaml:"peers" json:"peers"`   // K: peers answering each round
	Rounds int `yaml:"rounds" json:"rounds"` // T: refinement rounds after round 0

	// Prompts overrides embedded prompt templates by name (see PromptNames).
	// Each is a text/template over the data documented with the template.
	Prompts map[string]string `yaml:"prompts,omitempty" json:"prompts,omitempty"`

	// Tool, when set, is how route declares its delegate tool instead of DelegateTool.
	// Its name must be DelegateToolName; its description or schema may
	// differ, such as the shorter declaration a small model was trained on.
	Tool *delegate.Tool `yaml:"-" json:"tool,omitempty"`
}

// DefaultConfig returns the defaults. This is the one place they are
// written down:
//
//	single:    temperature 0.7, max_tokens 2048
//	plan:      temperature 0.7, max_tokens 1024
//	subagent:  temperature 0.5, max_tokens 512 (the budget each output is cut to)
//	aggregate: temperature 0.7, max_tokens 2048
//	strong:    temperature 0.7, max_tokens 1024
//	weak:      temperature 0,   max_tokens 512
//	peer:      temperature 0.7, max_tokens 1024
//	leader:    temperature 0.7, max_tokens 1024
//	seed: unset for every stage
//	min_subtasks 3, max_subtasks 5, subagent_concurrency 5, subagent_context true, subagent_retries 1
//	max_turns 8, tool_concurrency 4, tool_result full
//	peers 3, rounds 1
//	prompts: none overridden
func DefaultConfig() Config {
	return Config{
		Single:              Generation{Temperature: 0.7, MaxTokens: 2048},
		Plan:                Generation{Temperature: 0.7, MaxTokens: 1024},
		Subagent:            Generation{Temperature: 0.5, MaxTokens: 512},
		Aggregate:           Generation{Temperature: 0.7, MaxTokens: 2048},
		Strong:              Generation{Temperature: 0.7, MaxTokens: 1024},
		Weak:                Generation{Temperature: 0, MaxTokens: 512},
		Peer:                Generation{Temperature: 0.7, MaxTokens: 1024},
		Leader:              Generation{Temperature: 0.7, MaxTokens: 1024},
		MinSubtasks:         3,
		MaxSubtasks:         5,
		SubagentConcurrency: 5,
		SubagentContext:     true,
		SubagentRetries:     1,
		MaxTurns:            8,
		ToolConcurrency:     4,
		ToolResult:          ToolResultFull,
		Peers:               3,
		Rounds:              1,
	}
}

// What a delegate call returns to route's strong model (Config.ToolResult).
const (
	ToolResultFull   = "full"   // the weak model's whole reply
	ToolResultAnswer = "answer" // only its final answer
)

// Limits checked by Validate.
const (
	maxTemperature = 2.0
	maxMaxTokens   = 1 << 20
	maxSubtasks    = 64
	maxConcurrency = 256
	maxRetries     = 5
	maxTurnsLimit  = 100
	maxPeers       = 32
	maxRounds      = 16
)

// Validate reports every out-of-range knob, broken relation and bad prompt override.
// A bad override names no template or does not parse. Each error names its
// key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	stages := []struct {
		key string
		g   Generation
	}{
		{"single", c.Single}, {"plan", c.Plan}, {"subagent", c.Subagent}, {"aggregate", c.Aggregate},
		{"strong", c.Strong}, {"weak", c.Weak}, {"peer", c.Peer}, {"leader", c.Leader},
	}
	for _, s := range stages {
		if s.g.Temperature < 0 || s.g.Temperature > maxTemperature || s.g.Temperature != s.g.Temperature {
			bad(s.key+".temperature", "%v is outside [0, %v]", s.g.Temperature, maxTemperature)
		}
		if s.g.MaxTokens < 0 || s.g.MaxTokens > maxMaxTokens {
			bad(s.key+".max_tokens", "%d is outside [0, %d]", s.g.MaxTokens, maxMaxTokens)
		}
	}
	if c.Subagent.MaxTokens == 0 {
		bad("subagent.max_tokens", "must be set: it is the token budget of each sub-agent output")
	}
	if c.MinSubtasks < 1 || c.MinSubtasks > maxSubtasks {
		bad("min_subtasks", "%d is outside [1, %d]", c.MinSubtasks, maxSubtasks)
	}
	if c.MaxSubtasks < 1 || c.MaxSubtasks > maxSubtasks {
		bad("max_subtasks", "%d is outside [1, %d]", c.MaxSubtasks, maxSubtasks)
	}
	if c.MinSubtasks > c.MaxSubtasks {
		bad("min_subtasks", "%d exceeds max_subtasks %d", c.MinSubtasks, c.MaxSubtasks)
	}
	if c.SubagentConcurrency < 1 || c.SubagentConcurrency > maxConcurrency {
		bad("subagent_concurrency", "%d is outside [1, %d]", c.SubagentConcurrency, maxConcurrency)
	}
	if c.SubagentRetries < 0 || c.SubagentRetries > maxRetries {
		bad("subagent_retries", "%d is outside [0, %d]", c.SubagentRetries, maxRetries)
	}
	if c.MaxTurns < 1 || c.MaxTurns > maxTurnsLimit {
		bad("max_turns", "%d is outside [1, %d]", c.MaxTurns, maxTurnsLimit)
	}
	if c.ToolConcurrency < 1 || c.ToolConcurrency > maxConcurrency {
		bad("tool_concurrency", "%d is outside [1, %d]", c.ToolConcurrency, maxConcurrency)
	}
	if c.ToolResult != ToolResultFull && c.ToolResult != ToolResultAnswer {
		bad("tool_result", "%q is neither %q nor %q", c.ToolResult, ToolResultFull, ToolResultAnswer)
	}
	if c.Peers < 1 || c.Peers > maxPeers {
		bad("peers", "%d is outside [1, %d]", c.Peers, maxPeers)
	}
	if c.Rounds < 0 || c.Rounds > maxRounds {
		bad("rounds", "%d is outside [0, %d]", c.Rounds, maxRounds)
	}
	if c.Tool != nil && c.Tool.Name != DelegateToolName {
		bad("tool", "named %q; route's tool must be named %q", c.Tool.Name, DelegateToolName)
	}
	names := make([]string, 0, len(c.Prompts))
	for name := range c.Prompts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := defaultPrompts[name]; !ok {
			bad("prompts."+name, "no such template (known: %s)", strings.Join(PromptNames(), ", "))
			continue
		}
		if err := checkPrompt(name, c.Prompts[name]); err != nil {
			bad("prompts."+name, "%v", err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("strategy config: %w", errors.Join(errs...))
	}
	return nil
}

// request builds a request for a stage's call.
// call is the index of the call within the stage, added to a set seed.
func (g Generation) request(call int, msgs []delegate.Message) *delegate.Request {
	t := g.Temperature
	req := &delegate.Request{Messages: msgs, Temperature: &t, MaxTokens: g.MaxTokens}
	if g.Seed != nil {
		s := *g.Seed + int64(call)
		req.Seed = &s
	}
	return req
}
