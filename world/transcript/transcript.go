package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/world"
)

// Kind names whose conversation a transcript is: which model speaks in it
// and under which prompts.
type Kind string

// The kinds of transcripts.
const (
	KindSolver    Kind = "solver"    // the solver answering one question (route's weak_* prompts)
	KindSubagent  Kind = "subagent"  // the solver answering a decompose subtask (subagent_* prompts)
	KindSingle    Kind = "single"    // the delegator solving alone (single_*)
	KindRoute     Kind = "route"     // the delegator under route, every turn (route_*, the delegate tool)
	KindPlan      Kind = "plan"      // the delegator planning under decompose (plan_*)
	KindAggregate Kind = "aggregate" // the delegator aggregating under decompose (aggregate_*)
	KindPeer      Kind = "peer"      // a peer answering under lead (peer_*)
	KindLeader    Kind = "leader"    // the leader aggregating K peers under lead (leader_*)
)

// Transcript is one conversation as a model sees it, for supervised
// training. The assistant messages are the tokens to learn, located by
// tokenizer.RenderSpans; the rest is context. Tools are the tools the
// request offered, rendered in the prompt.
type Transcript struct {
	Kind     Kind
	Messages []delegate.Message
	Tools    []delegate.Tool
}

// Tokens renders the transcript with the chat template.
func (t Transcript) Tokens() ([]int, []tokenizer.Span) {
	return tokenizer.RenderSpans(t.Messages, t.Tools, false)
}

// decide applies a policy to every step of p.
func decide(p *world.Problem, pol world.Policy) []bool {
	d := make([]bool, len(p.Steps))
	for i := range p.Steps {
		d[i] = pol(p, i)
	}
	return d
}

// Episode is everything the models say for one problem under one protocol
// and policy. It holds the delegator's conversations and the sub-agents',
// in call order. Route has one multi-turn delegator conversation;
// decompose has a plan then an aggregation; lead has the leader's. The
// sub-agents are the solver's calls, or under lead the peers.
type Episode struct {
	Problem   *world.Problem
	Protocol  string // strategy.NameSingle, NameRoute, NameDecompose or NameLead
	Delegator []Transcript
	Subagents []Transcript
	Delegated []bool // per step: handed to a sub-agent
}

// block is the scratchpad of step s. It never fails for a generated
// problem's steps, whose operands are non-negative and bounded.
func block(s world.Step) string {
	text, _, err := world.Scratchpad(s.Op, s.X.Value, s.Y.Value)
	if err != nil {
		panic(fmt.Sprintf("transcript: %v", err)) // generated steps are always valid operands; tested
	}
	return text
}

func solverText(op world.Op, x, y int64) string {
	text, _, err := world.SolverAnswer(op, x, y)
	if err != nil {
		panic(fmt.Sprintf("transcript: %v", err)) // as block
	}
	return text
}

// SolverMessages are the system and user messages that ask the solver
// question. They are route's prompts, as its delegate tool sends them.
func SolverMessages(question string) []delegate.Message {
	return worldPrompts.messages("weak_system", "weak_user", strategy.PromptData{Question: question})
}

// SolverTranscript is the solver answering x op y under route's prompts.
func SolverTranscript(op world.Op, x, y int64) Transcript {
	msgs := SolverMessages(world.Expr(op, x, y))
	return Transcript{Kind: KindSolver, Messages: append(msgs, delegate.Assistant(solverText(op, x, y)))}
}

func subagentTranscript(s world.Step) Transcript {
	msgs := worldPrompts.messages("subagent_system", "subagent_user", strategy.PromptData{Subtask: s.Expr()})
	return Transcript{Kind: KindSubagent, Messages: append(msgs, delegate.Assistant(solverText(s.Op, s.X.Value, s.Y.Value)))}
}

// SolverTranscripts are the solver's training conversations from a set of
// problems: one per step inside world.SolverCovers. Steps outside it are left
// out on purpose; world.SolverCovers says why.
func SolverTranscripts(problems []*world.Problem) []Transcript {
	var out []Transcript
	for _, p := range problems {
		for _, s := range p.Steps {
			if world.SolverCovers(s.Op, s.X.Value, s.Y.Value) {
				out = append(out, SolverTranscript(s.Op, s.X.Value, s.Y.Value))
			}
		}
	}
	return out
}

// SingleMessages are the system and user messages that ask the delegator
// to solve request alone, as single sends them.
func SingleMessages(request string) []delegate.Message {
	return worldPrompts.messages("single_system", "single_user", strategy.PromptData{Request: request})
}

// RouteMessages are the system and user messages that ask the delegator
// to solve request under route, as route sends them.
func RouteMessages(request string) []delegate.Message {
	return worldPrompts.messages("route_system", "route_user", strategy.PromptData{Request: request})
}

// Single is the delegator solving p alone under the single strategy: every
// step's scratchpad, then \boxed{answer}.
func Single(p *world.Problem) Episode {
	msgs := SingleMessages(p.Text)
	var blocks []string
	for _, s := range p.Steps {
		blocks = append(blocks, block(s))
	}
	blocks = append(blocks, world.Boxed(p.Answer))
	t := Transcript{Kind: KindSingle, Messages: append(msgs, delegate.Assistant(strings.Join(blocks, "\n")))}
	return Episode{Problem: p, Protocol: strategy.NameSingle, Delegator: []Transcript{t}, Delegated: make([]bool, len(p.Steps))}
}

// DelegateCall is the n-th delegate call of a route conversation, from 1.
// It asks the solver question, as the route transcripts write it. The
// arguments are written as OpenEnv's environment bills them: compact, and
// without HTML escaping of <, > and &.
func DelegateCall(n int, question string) delegate.ToolCall {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		Question string `json:"question"`
	}{question}); err != nil {
		panic(fmt.Sprintf("transcript: marshal question: %v", err)) // a struct of one string always marshals
	}
	args := strings.TrimSuffix(b.String(), "\n")
	return delegate.ToolCall{ID: "call_" + strconv.Itoa(n), Name: strategy.DelegateToolName, Arguments: args}
}

// RouteResult is what route hands the delegator for the solver's reply.
// Under StrategyConfig it is the boxed answer without the working, padded
// as the solver writes it: "0972". A reply with no answer is handed back
// whole.
func RouteResult(reply string) string {
	if a, ok := strategy.FinalAnswer(strings.TrimSpace(reply)); ok {
		return a
	}
	return strings.TrimSpace(reply)
}

// Route is the delegator solving p under the route strategy with a policy.
// Each turn writes the scratchpads of every step it can compute now: its
// operands are known and it is not delegated. Then it calls delegate for
// every step it hands over whose operands are known. The solver's answers,
// RouteResult's, come back as tool results in call order, and the next
// turn goes on from there. The last turn ends with \boxed{answer}. The
// solver's answers are always right here: transcripts teach the protocol,
// not the solver's errors.
func Route(p *world.Problem, pol world.Policy) Episode {
	ep := Episode{Problem: p, Protocol: strategy.NameRoute, Delegated: decide(p, pol)}
	msgs := RouteMessages(p.Text)
	known := make([]bool, len(p.Steps))
	ready := func(i int) bool {
		s := p.Steps[i]
		return !known[i] && (s.X.Ref == world.Literal || known[s.X.Ref]) && (s.Y.Ref == world.Literal || known[s.Y.Ref])
	}
	calls := 0
	for done := false; !done; {
		var blocks []string
		for progress := true; progress; {
			progress = false
			for i := range p.Steps {
				if ready(i) && !ep.Delegated[i] {
					blocks = append(blocks, block(p.Steps[i]))
					known[i], progress = true, true
				}
			}
		}
		out := delegate.Message{Role: delegate.RoleAssistant}
		var asked []int
		for i := range p.Steps {
			if ready(i) && ep.Delegated[i] {
				calls++
				s := p.Steps[i]
				out.ToolCalls = append(out.ToolCalls, DelegateCall(calls, s.Expr()))
				asked = append(asked, i)
			}
		}
		if len(asked) == 0 {
			blocks = append(blocks, world.Boxed(p.Answer))
			done = true
		}
		out.Content = strings.Join(blocks, "\n")
		msgs = append(msgs, out)
		for j, i := range asked {
			s := p.Steps[i]
			st := SolverTranscript(s.Op, s.X.Value, s.Y.Value)
			ep.Subagents = append(ep.Subagents, st)
			msgs = append(msgs, delegate.ToolResult(out.ToolCalls[j].ID, RouteResult(st.Messages[len(st.Messages)-1].Content)))
			known[i] = true
		}
	}
	ep.Delegator = []Transcript{{Kind: KindRoute, Messages: msgs, Tools: []delegate.Tool{Tool}}}
	return ep
}

// planText is the compact plan of p: "s1=23*47 s2=s1-85 ..." with earlier
// results named by their step.
func planText(p *world.Problem) string {
	var parts []string
	for i, s := range p.Steps {
		operand := func(o world.Operand) string {
			if o.Ref == world.Literal {
				return strconv.FormatInt(o.Value, 10)
			}
			return "s" + strconv.Itoa(o.Ref+1)
		}
		parts = append(parts, fmt.Sprintf("s%d=%s%s%s", i+1, operand(s.X), s.Op, operand(s.Y)))
	}
	return strings.Join(parts, " ")
}

// Decompose is the delegator solving p under decompose with a policy. The
// plan's subtasks are the ready steps the policy hands over. There is at
// least one, the first ready step when the policy hands none, and at most
// MaxSubtasks. The aggregation writes the other steps' scratchpads and
// "Final Output: answer".
func Decompose(p *world.Problem, pol world.Policy) Episode {
	want := decide(p, pol)
	ep := Episode{Problem: p, Protocol: strategy.NameDecompose, Delegated: make([]bool, len(p.Steps))}
	var subs []int
	for i, s := range p.Steps {
		if s.Ready() && want[i] && len(subs) < MaxSubtasks {
			subs = append(subs, i)
		}
	}
	if len(subs) == 0 {
		for i, s := range p.Steps {
			if s.Ready() {
				subs = append(subs, i)
				break
			}
		}
	}
	reasoning := planText(p)
	var plan strings.Builder
	plan.WriteString(strategy.ReasoningOpen + reasoning + strategy.ReasoningCloses[0])
	results := make([]strategy.SubtaskResult, len(subs))
	for j, i := range subs {
		s := p.Steps[i]
		ep.Delegated[i] = true
		plan.WriteString("\n" + strategy.SubtaskOpen + s.Expr() + strategy.SubtaskCloses[0])
		st := subagentTranscript(s)
		ep.Subagents = append(ep.Subagents, st)
		results[j] = strategy.SubtaskResult{Index: j + 1, Subtask: s.Expr(), Result: st.Messages[len(st.Messages)-1].Content}
	}
	planMsgs := worldPrompts.messages("plan_system", "plan_user", strategy.PromptData{
		Request: p.Text, Min: MinSubtasks, Max: MaxSubtasks,
	})
	var blocks []string
	for i, s := range p.Steps {
		if !ep.Delegated[i] {
			blocks = append(blocks, block(s))
		}
	}
	blocks = append(blocks, delegate.FinalOutputMarker+" "+strconv.FormatInt(p.Answer, 10))
	aggMsgs := worldPrompts.messages("aggregate_system", "aggregate_user", strategy.PromptData{
		Request: p.Text, Reasoning: reasoning, Results: results,
	})
	ep.Delegator = []Transcript{
		{Kind: KindPlan, Messages: append(planMsgs, delegate.Assistant(plan.String()))},
		{Kind: KindAggregate, Messages: append(aggMsgs, delegate.Assistant(strings.Join(blocks, "\n")))},
	}
	return ep
}

// PeerAnswer is a peer's terse solution: one "expr=result" line per step,
// then <answer>. A slip at step slip replaces that result by wrong, and
// the later steps go on from it. A slip of -1 makes none.
func PeerAnswer(p *world.Problem, slip int, wrong int64) (text string, answer int64) {
	vals := make([]int64, len(p.Steps))
	var b strings.Builder
	for i, s := range p.Steps {
		x, y := s.X.Value, s.Y.Value
		if s.X.Ref != world.Literal {
			x = vals[s.X.Ref]
		}
		if s.Y.Ref != world.Literal {
			y = vals[s.Y.Ref]
		}
		v := s.Op.Apply(x, y)
		if i == slip {
			v = wrong
		}
		vals[i] = v
		fmt.Fprintf(&b, "%s=%d\n", world.Expr(s.Op, x, y), v)
	}
	answer = vals[len(vals)-1]
	fmt.Fprintf(&b, "<answer>%d</answer>", answer)
	return b.String(), answer
}

// Condense turns a reply in single's format into a peer's terse answer.
// The reply is every step's scratchpad, then \boxed{}. The answer, in
// PeerAnswer's form, is one "expr=result" line per step, then <answer>
// with the boxed value. Each result is the one the scratchpad reached,
// right or wrong.
//
// A step is a header in world.Expr's form followed by its blocks. A
// product has one per digit of its second factor, then one summing them
// when there are several. A step's result is its last block's "=N" line.
// Lines that are neither are skipped, and so is an unfinished step. A
// reply without a \boxed{} integer gets no <answer> line. Condense lets
// peers that need scratch work answer under lead, whose leader reads three
// answers in a 768-token context: their reasoning is elided, not redone.
func Condense(reply string) string {
	lines := strings.Split(strings.TrimSpace(reply), "\n")
	var out []string
	// result returns the value of the next "=N" line from lines[*i] on,
	// moving *i past it.
	result := func(i *int) (int64, bool) {
		for ; *i < len(lines); *i++ {
			l := strings.TrimSpace(lines[*i])
			if strings.HasPrefix(l, `\boxed{`) {
				return 0, false
			}
			if v, err := strconv.ParseInt(strings.TrimPrefix(l, "="), 10, 64); strings.HasPrefix(l, "=") && err == nil {
				*i++
				return v, true
			}
		}
		return 0, false
	}
	for i := 0; i < len(lines); {
		l := strings.TrimSpace(lines[i])
		if _, ok := delegate.Boxed(l); ok {
			if v, err := world.ParseAnswer(l); err == nil { // the boxed value: ParseAnswer reads \boxed{} first
				out = append(out, "<answer>"+strconv.FormatInt(v, 10)+"</answer>")
			}
			break
		}
		op, x, y, err := world.ParseExpr(l)
		i++
		if err != nil {
			continue
		}
		blocks := 1
		if op == world.Mul && l == world.Expr(op, x, y) {
			if n := len(strconv.FormatInt(y, 10)); n > 1 {
				blocks = n + 1
			}
		}
		var v int64
		ok := true
		for range blocks {
			if v, ok = result(&i); !ok {
				break
			}
		}
		if !ok {
			continue // unfinished: i is at the \boxed{} line or the end
		}
		out = append(out, world.Expr(op, x, y)+"="+strconv.FormatInt(v, 10))
	}
	return strings.Join(out, "\n")
}

// PeerTranscript is a peer solving p correctly under lead's peer prompts.
func PeerTranscript(p *world.Problem) Transcript {
	text, _ := PeerAnswer(p, -1, 0)
	msgs := worldPrompts.messages("peer_system", "peer_user", strategy.PromptData{Request: p.Text, Index: 1})
	return Transcript{Kind: KindPeer, Messages: append(msgs, delegate.Assistant(text))}
}

// slipValue is a plausible wrong result: v with one digit changed.
func slipValue(v int64, rng *rand.Rand) int64 {
	s := []byte(strconv.FormatInt(v, 10))
	i := rng.IntN(len(s))
	lo := 0
	if i == 0 && len(s) > 1 {
		lo = 1 // no leading zero
	}
	for {
		if d := byte('0' + lo + rng.IntN(10-lo)); d != s[i] {
			s[i] = d
			break
		}
	}
	w, err := strconv.ParseInt(string(s), 10, 64)
	if err != nil {
		return v + 1 // unreachable: s is digits; stay wrong anyway
	}
	return w
}

// Lead is the leader solving p under lead, round 0, with k peers. The
// number of wrong peers is uniform in 0..k. Wrong peers share one slip with
// probability 1/2, so the majority is sometimes wrong. Never are all k
// wrong the same way. The
// leader goes through the steps: a step on which every peer wrote the same
// line is copied; a step where they differ is computed with its
// scratchpad; then <answer>. Subagents holds the peers' transcripts.
func Lead(p *world.Problem, k int, rng *rand.Rand) Episode {
	ep := Episode{Problem: p, Protocol: strategy.NameLead, Delegated: make([]bool, len(p.Steps))}
	texts := make([]string, k)
	for {
		wrong := rng.IntN(k + 1)
		shared := rng.IntN(2) == 0
		step := rng.IntN(len(p.Steps))
		val := slipValue(p.Steps[step].Result, rng)
		order := rng.Perm(k) // peer j is wrong when order[j] < wrong
		for j := range k {
			slip, v := -1, int64(0)
			switch {
			case order[j] >= wrong:
			case shared:
				slip, v = step, val
			default:
				slip = rng.IntN(len(p.Steps))
				v = slipValue(p.Steps[slip].Result, rng)
			}
			texts[j], _ = PeerAnswer(p, slip, v)
		}
		if wrong < k || !allSame(texts) {
			break
		}
	}
	peers := make([]strategy.PeerAnswer, k)
	lines := make([][]string, k)
	for j, text := range texts {
		peers[j] = strategy.PeerAnswer{Index: j + 1, Answer: text}
		lines[j] = strings.Split(text, "\n")
		msgs := worldPrompts.messages("peer_system", "peer_user", strategy.PromptData{Request: p.Text, Index: j + 1})
		ep.Subagents = append(ep.Subagents, Transcript{Kind: KindPeer, Messages: append(msgs, delegate.Assistant(text))})
	}
	var out []string
	for i, s := range p.Steps {
		right := s.Expr() + "=" + strconv.FormatInt(s.Result, 10)
		agree := true
		for j := 1; j < k; j++ {
			agree = agree && lines[j][i] == lines[0][i]
		}
		if agree && lines[0][i] == right {
			out = append(out, right)
		} else {
			out = append(out, block(s))
		}
	}
	out = append(out, "<answer>"+strconv.FormatInt(p.Answer, 10)+"</answer>")
	msgs := worldPrompts.messages("leader_system", "leader_user", strategy.PromptData{Request: p.Text, K: k, Peers: peers})
	ep.Delegator = []Transcript{{Kind: KindLeader, Messages: append(msgs, delegate.Assistant(strings.Join(out, "\n")))}}
	return ep
}

func allSame(texts []string) bool {
	for _, t := range texts[1:] {
		if t != texts[0] {
			return false
		}
	}
	return true
}
