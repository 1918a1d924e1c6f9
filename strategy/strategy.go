package strategy

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/delegatelab/delegate"
)

// Strategy names, as New and Names know them.
const (
	NameSingle    = "single"
	NameDecompose = "decompose"
	NameRoute     = "route"
	NameLead      = "lead"
)

// Names returns the strategy names New accepts.
func Names() []string { return []string{NameSingle, NameDecompose, NameRoute, NameLead} }

// Default role names, given to an Agent of Roles whose Role is empty. They
// key Trace.Roles.
const (
	RoleSingle    = "single"
	RoleDelegator = "delegator"
	RoleSubagent  = "subagent"
	RoleStrong    = "strong"
	RoleWeak      = "weak"
	RoleLeader    = "leader"
	RolePeer      = "peer"
)

// Roles assigns agents to the roles of the strategies. A strategy needs
// only its own roles: single Single; decompose Delegator and Subagent; route
// Strong and Weak; lead Leader and Peers. An agent with an empty Role gets
// the default role name above.
type Roles struct {
	Single              delegate.Agent
	Delegator, Subagent delegate.Agent
	Strong, Weak        delegate.Agent
	Leader              delegate.Agent
	// Peers are lead's peers: peer i (from 1) is Peers[(i-1) % len(Peers)],
	// so one agent may play all K peers. There may not be more than K.
	Peers []delegate.Agent
}

// New returns the named strategy with its roles and config. An unknown
// name, a missing role, or an invalid config is an error naming it. The
// strategy is safe for concurrent Runs. The strategies:
//
//   - single: one call to the Single agent, the baseline. Its prompt asks
//     for reasoning, then a "Final answer:" line, with \boxed{} for a number.
//   - decompose: the Delegator plans: reasoning in <|reasoning|> tags, then
//     MinSubtasks..MaxSubtasks subtasks in <|subtask|> tags, read by
//     ParsePlan. Subagent calls run concurrently, one per subtask. Each is
//     repeated on failure up to SubagentRetries times, and its output is cut
//     to the subagent.max_tokens budget by CutToBudget. The Delegator
//     aggregates the "Subtask i / Result i" pairs into the text after
//     "Final Output:".
//   - route: the Strong agent may call DelegateTool, which sends a
//     self-contained question to the Weak agent. A turn's calls run
//     concurrently. The run ends at the first turn without tool calls, whose
//     answer delegate.ExtractAnswer reads: the last \boxed{} or the text after
//     "Final answer:". Or it ends after MaxTurns turns with Failure "max turns".
//   - lead: K Peers answer independently, and the Leader aggregates into an
//     <answer>. Then, for Rounds rounds, peers refine given the leader's last
//     output and the leader aggregates again. The answer is the leader's last.
func New(name string, roles Roles, cfg Config) (delegate.Strategy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new strategy %s: %w", name, err)
	}
	p, err := newPrompts(cfg.Prompts)
	if err != nil {
		return nil, fmt.Errorf("new strategy %s: %w", name, err)
	}
	need := func(a *delegate.Agent, role, defaultRole string) error {
		if a.Model == nil {
			return fmt.Errorf("new strategy %s: missing role %s", name, role)
		}
		if a.Role == "" {
			a.Role = defaultRole
		}
		return nil
	}
	switch name {
	case NameSingle:
		if err := need(&roles.Single, "single", RoleSingle); err != nil {
			return nil, err
		}
		return &single{agent: roles.Single, cfg: cfg, p: p}, nil
	case NameDecompose:
		if err := need(&roles.Delegator, "delegator", RoleDelegator); err != nil {
			return nil, err
		}
		if err := need(&roles.Subagent, "subagent", RoleSubagent); err != nil {
			return nil, err
		}
		return &decompose{delegator: roles.Delegator, subagent: roles.Subagent, cfg: cfg, p: p}, nil
	case NameRoute:
		if err := need(&roles.Strong, "strong", RoleStrong); err != nil {
			return nil, err
		}
		if err := need(&roles.Weak, "weak", RoleWeak); err != nil {
			return nil, err
		}
		return &route{strong: roles.Strong, weak: roles.Weak, cfg: cfg, p: p}, nil
	case NameLead:
		if err := need(&roles.Leader, "leader", RoleLeader); err != nil {
			return nil, err
		}
		if len(roles.Peers) == 0 {
			return nil, fmt.Errorf("new strategy %s: missing role peers", name)
		}
		if len(roles.Peers) > cfg.Peers {
			return nil, fmt.Errorf("new strategy %s: %d peer agents given but peers is %d", name, len(roles.Peers), cfg.Peers)
		}
		peers := append([]delegate.Agent(nil), roles.Peers...)
		for i := range peers {
			if err := need(&peers[i], "peers["+strconv.Itoa(i)+"]", RolePeer); err != nil {
				return nil, err
			}
		}
		return &lead{leader: roles.Leader, peers: peers, cfg: cfg, p: p}, nil
	}
	return nil, fmt.Errorf("new strategy %q: unknown strategy (known: %s)", name, strings.Join(Names(), ", "))
}

// Node names of the trace. See the package documentation for the shape.
const (
	NodeAnswer    = "answer"    // single: the one call
	NodePlan      = "plan"      // decompose: stage-1 group
	NodeSubagents = "subagents" // decompose: stage-2 group
	NodeAggregate = "aggregate" // decompose: stage-3 group
	NodeDelegator = "delegator" // decompose: the delegator's call inside plan and aggregate
	NodeStrong    = "strong"    // route: the strong model's call inside a turn
	NodeLeader    = "leader"    // lead: the leader's call inside a round

	SubagentPrefix = "subagent " // decompose: "subagent i", i from 1
	TurnPrefix     = "turn "     // route: "turn i", i from 1
	DelegatePrefix = "delegate " // route: "delegate <tool call id>"
	ToolPrefix     = "tool "     // route: "tool <tool call id>", a call of an unknown tool
	RoundPrefix    = "round "    // lead: "round t", t from 0
	PeerPrefix     = "peer "     // lead: "peer i", i from 1

	// RetrySuffix follows the name of a repeated call: "subagent 2 retry",
	// "subagent 2 retry 2".
	RetrySuffix = " retry"
)

// SubagentNode, TurnNode, DelegateNode, ToolNode, RoundNode and PeerNode
// build the numbered node names.
func SubagentNode(i int) string     { return SubagentPrefix + strconv.Itoa(i) }
func TurnNode(i int) string         { return TurnPrefix + strconv.Itoa(i) }
func DelegateNode(id string) string { return DelegatePrefix + id }
func ToolNode(id string) string     { return ToolPrefix + id }
func RoundNode(t int) string        { return RoundPrefix + strconv.Itoa(t) }
func PeerNode(i int) string         { return PeerPrefix + strconv.Itoa(i) }

// retryName names repeat attempt of the call name, counting from 1.
// The names are "subagent 2 retry", then "subagent 2 retry 2" and so on.
func retryName(name string, attempt int) string {
	if attempt == 1 {
		return name + RetrySuffix
	}
	return name + RetrySuffix + " " + strconv.Itoa(attempt)
}

// chat makes one recorded call and checks that a reply came back. The error
// names the call.
func chat(ctx context.Context, rec *delegate.Recorder, parent *delegate.Node, name string, a delegate.Agent, req *delegate.Request) (*delegate.Response, error) {
	resp, err := rec.Call(ctx, parent, name, a, req)
	if err != nil {
		return resp, fmt.Errorf("%s: %w", name, err)
	}
	if resp == nil || len(resp.Choices) == 0 {
		return resp, fmt.Errorf("%s: response has no choices", name)
	}
	return resp, nil
}

// finishRun closes the trace. When ctx has ended, the failure becomes
// "canceled", unless the run had already failed for another reason. The
// context's error is then returned beside the partial trace.
func finishRun(ctx context.Context, rec *delegate.Recorder, strategy, answer string, fail delegate.Failure) (*delegate.Trace, error) {
	if err := ctx.Err(); err != nil {
		if fail.Kind == "" || fail.Kind == delegate.FailureCall {
			fail = delegate.Failed(delegate.FailureCanceled, "%v", err)
		}
		return rec.Finish(answer, fail), fmt.Errorf("run %s: %w", strategy, err)
	}
	return rec.Finish(answer, fail), nil
}

// panicked closes the trace of a run stopped by a panic in one of its goroutines.
// The failure holds the panic's first line; the returned error holds all of
// it, stack included.
func panicked(rec *delegate.Recorder, strategy, answer string, err error) (*delegate.Trace, error) {
	fail := delegate.Failed(delegate.FailurePanic, "%v", err)
	var pe *panicError
	if errors.As(err, &pe) {
		fail = delegate.Failed(delegate.FailurePanic, "%v", pe.value)
	}
	return rec.Finish(answer, fail), fmt.Errorf("run %s: %w", strategy, err)
}

// panicError is a recovered panic with the stack where it happened.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.value, e.stack) }

// protect runs f, turning a panic into an error that carries the stack. It
// guards every goroutine a strategy starts.
func protect(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return f()
}

// messages builds a system and a user message from two templates.
func (p prompts) messages(system, user string, d PromptData) ([]delegate.Message, error) {
	s, err := p.render(system, d)
	if err != nil {
		return nil, err
	}
	u, err := p.render(user, d)
	if err != nil {
		return nil, err
	}
	return []delegate.Message{delegate.System(s), delegate.User(u)}, nil
}
