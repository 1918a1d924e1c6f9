package world

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
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
// training: the assistant messages are the tokens to learn (tokenizer.
// RenderSpans locates them), the rest is context. Tools are the tools the
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

// Policy decides, for step i of a problem, whether the delegator hands it
// to the solver (true) or computes it with a scratchpad (false).
type Policy func(p *Problem, i int) bool

// Never computes every step.
func Never(*Problem, int) bool { return false }

// Always delegates every step.
func Always(*Problem, int) bool { return true }

// Random delegates each step with probability prob, drawn from rng. The
// policy is not safe for concurrent use (rng is not).
func Random(prob float64, rng *rand.Rand) Policy {
	return func(*Problem, int) bool { return rng.Float64() < prob }
}

// Selective is the policy this world rewards: delegate exactly the steps
// that are worth it (WorthDelegating) and that the solver was trained on
// (SolverCovers).
func Selective(p *Problem, i int) bool {
	s := p.Steps[i]
	return WorthDelegating(s) && SolverCovers(s.Op, s.X.Value, s.Y.Value)
}

// SolverMaxFactor is the most digits of either factor of a product in the
// solver's training data: the products of the default world, two 2-digit
// numbers. Past it the solver has never seen the shape of the answer and
// is unreliable ("larger numbers").
const SolverMaxFactor = 2

// SolverCovers reports whether x op y is in the solver's training
// coverage: every sum, and products whose factors have at most
// SolverMaxFactor digits. No difference is: the designed weakness the
// default world leans on. The solver has never seen a subtraction, and
// every "gives away" and "how many more" step is one, which the delegator
// computes in a 60-token scratchpad.
func SolverCovers(op Op, x, y int64) bool {
	switch op {
	case Sub:
		return false
	case Mul:
		return x < pow10(SolverMaxFactor) && y < pow10(SolverMaxFactor)
	}
	return true
}

// WorthDelegating reports whether handing a step to the solver saves the
// delegator tokens: a product by a number of two or more digits, whose
// scratchpad (161 tokens for two 2-digit numbers) is far longer than a
// delegate call (54). Sums, differences and products by one digit have
// scratchpads of 51 to 57 tokens, about as long as the call.
func WorthDelegating(s Step) bool { return s.Op == Mul && s.Y.Value >= 10 }

// decide applies a policy to every step of p.
func decide(p *Problem, pol Policy) []bool {
	d := make([]bool, len(p.Steps))
	for i := range p.Steps {
		d[i] = pol(p, i)
	}
	return d
}

// Episode is everything the models say for one problem under one protocol
// and one policy: the delegator's conversations (route: one, multi-turn;
// decompose: plan then aggregate; lead: the leader's) and the sub-agents'
// (the solver's calls; lead: the peers'), in call order.
type Episode struct {
	Problem   *Problem
	Protocol  string // strategy.NameSingle, NameRoute, NameDecompose or NameLead
	Delegator []Transcript
	Subagents []Transcript
	Delegated []bool // per step: handed to a sub-agent
}

// block is the scratchpad of step s; it never fails for a generated
// problem's steps (non-negative, bounded operands).
func block(s Step) string {
	text, _, err := Scratchpad(s.Op, s.X.Value, s.Y.Value)
	if err != nil {
		panic(fmt.Sprintf("world: %v", err)) // generated steps are always valid operands; tested
	}
	return text
}

func solverText(op Op, x, y int64) string {
	text, _, err := SolverAnswer(op, x, y)
	if err != nil {
		panic(fmt.Sprintf("world: %v", err)) // as block
	}
	return text
}

// SolverTranscript is the solver answering x op y under route's prompts.
func SolverTranscript(op Op, x, y int64) Transcript {
	msgs := worldPrompts.messages("weak_system", "weak_user", strategy.PromptData{Question: Expr(op, x, y)})
	return Transcript{Kind: KindSolver, Messages: append(msgs, delegate.Assistant(solverText(op, x, y)))}
}

func subagentTranscript(s Step) Transcript {
	msgs := worldPrompts.messages("subagent_system", "subagent_user", strategy.PromptData{Subtask: s.Expr()})
	return Transcript{Kind: KindSubagent, Messages: append(msgs, delegate.Assistant(solverText(s.Op, s.X.Value, s.Y.Value)))}
}

// SolverTranscripts are the solver's training conversations from a set
// of problems: one per step inside SolverCovers. Steps outside it are left
// out on purpose (see SolverCovers).
func SolverTranscripts(problems []*Problem) []Transcript {
	var out []Transcript
	for _, p := range problems {
		for _, s := range p.Steps {
			if SolverCovers(s.Op, s.X.Value, s.Y.Value) {
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

// Single is the delegator solving p alone under the single strategy: every
// step's scratchpad, then \boxed{answer}.
func Single(p *Problem) Episode {
	msgs := SingleMessages(p.Text)
	var blocks []string
	for _, s := range p.Steps {
		blocks = append(blocks, block(s))
	}
	blocks = append(blocks, Boxed(p.Answer))
	t := Transcript{Kind: KindSingle, Messages: append(msgs, delegate.Assistant(strings.Join(blocks, "\n")))}
	return Episode{Problem: p, Protocol: strategy.NameSingle, Delegator: []Transcript{t}, Delegated: make([]bool, len(p.Steps))}
}

// delegateArgs is the JSON arguments of a delegate call asking q.
func delegateArgs(q string) string {
	b, err := json.Marshal(struct {
		Question string `json:"question"`
	}{q})
	if err != nil {
		panic(fmt.Sprintf("world: marshal question: %v", err)) // a struct of one string always marshals
	}
	return string(b)
}

// Route is the delegator solving p under the route strategy with a policy.
// Each turn writes the scratchpads of every step it can compute now
// (operands known, not delegated), then calls delegate for every step it
// hands over whose operands are known; the solver's answers come back as
// tool results in call order, and the next turn goes on from there. The
// last turn ends with \boxed{answer}. The solver's answers are always
// right here: transcripts teach the protocol, not the solver's errors.
func Route(p *Problem, pol Policy) Episode {
	ep := Episode{Problem: p, Protocol: strategy.NameRoute, Delegated: decide(p, pol)}
	msgs := worldPrompts.messages("route_system", "route_user", strategy.PromptData{Request: p.Text})
	known := make([]bool, len(p.Steps))
	ready := func(i int) bool {
		s := p.Steps[i]
		return !known[i] && (s.X.Ref == Literal || known[s.X.Ref]) && (s.Y.Ref == Literal || known[s.Y.Ref])
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
				out.ToolCalls = append(out.ToolCalls, delegate.ToolCall{
					ID: "call_" + strconv.Itoa(calls), Name: strategy.DelegateToolName, Arguments: delegateArgs(s.Expr()),
				})
				asked = append(asked, i)
			}
		}
		if len(asked) == 0 {
			blocks = append(blocks, Boxed(p.Answer))
			done = true
		}
		out.Content = strings.Join(blocks, "\n")
		msgs = append(msgs, out)
		for j, i := range asked {
			s := p.Steps[i]
			st := SolverTranscript(s.Op, s.X.Value, s.Y.Value)
			ep.Subagents = append(ep.Subagents, st)
			msgs = append(msgs, delegate.ToolResult(out.ToolCalls[j].ID, st.Messages[len(st.Messages)-1].Content))
			known[i] = true
		}
	}
	ep.Delegator = []Transcript{{Kind: KindRoute, Messages: msgs, Tools: []delegate.Tool{Tool}}}
	return ep
}

// planText is the compact plan of p: "s1=23*47 s2=s1-85 ..." with earlier
// results named by their step.
func planText(p *Problem) string {
	var parts []string
	for i, s := range p.Steps {
		operand := func(o Operand) string {
			if o.Ref == Literal {
				return strconv.FormatInt(o.Value, 10)
			}
			return "s" + strconv.Itoa(o.Ref+1)
		}
		parts = append(parts, fmt.Sprintf("s%d=%s%s%s", i+1, operand(s.X), s.Op, operand(s.Y)))
	}
	return strings.Join(parts, " ")
}

// Decompose is the delegator solving p under the decompose strategy with
// a policy: the plan's subtasks are the steps computable from the text
// alone that the policy hands over (at least one: the first such step when
// the policy hands none, at most MaxSubtasks); the aggregation writes the
// scratchpads of the other steps and "Final Output: answer".
func Decompose(p *Problem, pol Policy) Episode {
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
	blocks = append(blocks, strategy.FinalOutputMarker+" "+strconv.FormatInt(p.Answer, 10))
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
// then <answer>. A slip at step slip (-1: none) replaces that result by
// wrong, and the later steps go on from it.
func PeerAnswer(p *Problem, slip int, wrong int64) (text string, answer int64) {
	vals := make([]int64, len(p.Steps))
	var b strings.Builder
	for i, s := range p.Steps {
		x, y := s.X.Value, s.Y.Value
		if s.X.Ref != Literal {
			x = vals[s.X.Ref]
		}
		if s.Y.Ref != Literal {
			y = vals[s.Y.Ref]
		}
		v := s.Op.apply(x, y)
		if i == slip {
			v = wrong
		}
		vals[i] = v
		fmt.Fprintf(&b, "%s=%d\n", Expr(s.Op, x, y), v)
	}
	answer = vals[len(vals)-1]
	fmt.Fprintf(&b, "<answer>%d</answer>", answer)
	return b.String(), answer
}

// Condense turns a reply in single's format (every step's scratchpad, then
// \boxed{}) into a peer's terse answer (PeerAnswer's form): one
// "expr=result" line per step, the result being the one the reply's
// scratchpad reached, right or wrong, then <answer> with the boxed value.
// A step is a header in Expr's form followed by its blocks (a product:
// one per digit of its second factor, then one summing them when there
// are several); its result is its last block's "=N" line. Lines that are
// neither are skipped, and so is an unfinished step; a
// reply without a \boxed{} integer gets no <answer> line. It lets peers
// that need scratch work answer under lead, whose leader reads three
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
		if s, ok := delegate.Boxed(l); ok {
			if v, err := parseInt(s, `\boxed{}`); err == nil {
				out = append(out, "<answer>"+strconv.FormatInt(v, 10)+"</answer>")
			}
			break
		}
		op, x, y, err := ParseExpr(l)
		i++
		if err != nil {
			continue
		}
		blocks := 1
		if op == Mul && l == Expr(op, x, y) {
			if n := len(digitsLSD(y)); n > 1 {
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
		out = append(out, Expr(op, x, y)+"="+strconv.FormatInt(v, 10))
	}
	return strings.Join(out, "\n")
}

// PeerTranscript is a peer solving p correctly under lead's peer prompts.
func PeerTranscript(p *Problem) Transcript {
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

// Lead is the leader solving p under the lead strategy (round 0) with k
// peers, some of them wrong: the number of wrong peers is uniform in
// 0..k, and wrong peers share one slip with probability 1/2, so that the
// majority is sometimes wrong; never are all k wrong the same way. The
// leader goes through the steps: a step on which every peer wrote the same
// line is copied; a step where they differ is computed with its
// scratchpad; then <answer>. Subagents holds the peers' transcripts.
func Lead(p *Problem, k int, rng *rand.Rand) Episode {
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
