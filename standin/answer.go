package standin

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/delegatelab/delegate/openai/wire"
)

// Kind is the kind of answer a request gets, recognised from the request itself.
// The signs are the tools offered, tool results present, and the wording of the strategy package's prompts.
type Kind int

// The kinds of answer, in the order Stats.Answers counts them.
const (
	KindPlain      Kind = iota // anything else: a plain answer
	KindSingle                 // single: reasoning, "Final answer:" and \boxed{}
	KindRouteCalls             // route's strong model, first turn: ToolCalls parallel delegate calls
	KindRouteFinal             // route's strong model after tool results: an answer in \boxed{}
	KindWeak                   // route's weak model: a brief answer in \boxed{}
	KindPlan                   // decompose's planner: reasoning and Subtasks subtasks in tags
	KindSubagent               // decompose's sub-agent: a brief result
	KindAggregate              // decompose's aggregator: the answer after "Final Output:"
	KindPeer                   // lead's peer: reasoning and an <answer>
	KindLeader                 // lead's leader: reasoning and an <answer>
	NumKinds                   // the number of kinds
)

var kindNames = [NumKinds]string{"plain", "single", "route_calls", "route_final", "weak", "plan", "subagent", "aggregate", "peer", "leader"}

func (k Kind) String() string {
	if k < 0 || k >= NumKinds {
		return "kind(" + strconv.Itoa(int(k)) + ")"
	}
	return kindNames[k]
}

// Markers: phrases of the strategy package's prompt templates that tell the
// stages apart. A test checks each against the embedded templates.
const (
	// DelegateTool is the name of route's tool.
	DelegateTool = "delegate"

	markerPlan        = "<|subtask|>"   // plan_system
	markerAggregate   = "Final Output:" // aggregate_system
	markerSubagent    = "sub-agent"     // subagent_system (lower case: aggregate's "Sub-agents" is not it)
	markerLeader      = "lead a team"   // leader_system
	markerLeaderUser  = "'s response:"  // leader_user: "Agent i's response:"
	markerAnswerTag   = "<answer>"      // peer_system, leader_system
	markerFinalAnswer = "Final answer:" // single_system (route_system too, but route offers a tool)
	markerBoxed       = `\boxed{}`      // weak_system (single_system too, checked before)
)

// facts is what the answer depends on, read from the request in one pass.
type facts struct {
	kind        Kind
	hash        uint64 // of the messages and the seed
	promptBytes int    // the rendered prompt's size
	cachedBytes int    // the part of it before the last assistant message
	request     string // the first user message, for quoting
	system      string
}

// fnv-1a 64.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// perMessageBytes is the chat template's overhead per message, in bytes of
// rendered prompt (role markers and separators).
const perMessageBytes = 16

// read classifies the request and measures it.
func read(r *wire.ChatRequest, seed uint64) facts {
	var f facts
	h := uint64(fnvOffset) ^ splitmix64(seed)
	lastAssistant := -1
	toolResults := 0
	for i := range r.Messages {
		m := &r.Messages[i]
		h = fnvString(h, m.Role)
		content, _ := m.Content.Text() // validated
		h = fnvString(h^0xff, content)
		n := perMessageBytes + len(m.Role) + len(content) + len(m.Name) + len(m.ToolCallID)
		for j := range m.ToolCalls {
			tc := &m.ToolCalls[j]
			h = fnvString(h^0xfe, tc.Function.Name)
			h = fnvString(h^0xfd, string(tc.Function.Arguments))
			n += len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments) + perMessageBytes
		}
		f.promptBytes += n
		switch m.Role {
		case "system", "developer":
			if f.system == "" {
				f.system = content
			}
		case "user":
			if f.request == "" {
				f.request = content
			}
		case "assistant":
			lastAssistant = i
			f.cachedBytes = f.promptBytes - n
		case "tool":
			toolResults++
		}
	}
	if lastAssistant < 0 {
		f.cachedBytes = 0
	}
	delegateTool := false
	for i := range r.Tools {
		t := &r.Tools[i]
		f.promptBytes += perMessageBytes + len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters)
		if t.Function.Name == DelegateTool {
			delegateTool = true
		}
	}
	f.hash = splitmix64(h)
	sys := f.system
	switch {
	case delegateTool && toolResults == 0:
		f.kind = KindRouteCalls
	case delegateTool:
		f.kind = KindRouteFinal
	case strings.Contains(sys, markerPlan):
		f.kind = KindPlan
	case strings.Contains(sys, markerAggregate):
		f.kind = KindAggregate
	case strings.Contains(sys, markerSubagent):
		f.kind = KindSubagent
	case strings.Contains(sys, markerLeader) || strings.Contains(sys, markerAnswerTag) && strings.Contains(f.request, markerLeaderUser):
		f.kind = KindLeader
	case strings.Contains(sys, markerAnswerTag):
		f.kind = KindPeer
	case strings.Contains(sys, markerFinalAnswer):
		f.kind = KindSingle
	case strings.Contains(sys, markerBoxed):
		f.kind = KindWeak
	default:
		f.kind = KindPlain
	}
	return f
}

// reply is one choice's answer: text content, or tool calls whose
// arguments are each a {"question": ...} object.
type reply struct {
	text      []byte // nil with tool calls: content null
	questions [][]byte
	finish    string
}

// filler is the precomputed reasoning text answers quote slices of.
type filler struct {
	text   string
	starts []int // offsets of sentence starts
}

var sentences = []string{
	"First I restate the problem in my own words to be sure nothing is missed.",
	"The quantities involved are small, so the arithmetic can be checked by hand.",
	"Breaking the request into parts makes each step easy to verify.",
	"I keep track of the units at every step.",
	"A quick sanity check: the result should be of the same order as the inputs.",
	"Nothing in the statement suggests a trick, so the direct approach works.",
	"Each intermediate value is carried forward exactly, without rounding.",
	"I compare the two possible readings of the question and take the plainer one.",
	"The constraints are satisfied by the candidate found so far.",
	"Adding the partial results gives the total asked for.",
	"To double-check, I work backwards from the result to the given values.",
	"The edge cases do not change the outcome here.",
}

// newFiller builds at least n bytes of text from the sentences, in an order
// fixed by the seed.
func newFiller(n int, seed uint64) filler {
	var b strings.Builder
	var starts []int
	d := draws{key: splitmix64(seed ^ 0x5eed)}
	for b.Len() < n {
		starts = append(starts, b.Len())
		b.WriteString(sentences[int(d.float()*float64(len(sentences)))])
		b.WriteByte(' ')
	}
	return filler{text: b.String(), starts: starts}
}

// slice returns about n bytes of reasoning starting at a sentence chosen by
// h, ending on a word boundary.
func (f *filler) slice(h uint64, n int) string {
	if n <= 0 {
		return ""
	}
	// The filler holds 2n + 4 KiB at least, so the first half of the starts
	// always leaves n bytes after them.
	max := len(f.starts) / 2
	if max < 1 {
		max = 1
	}
	start := f.starts[h%uint64(max)]
	end := start + n
	if end > len(f.text) {
		end = len(f.text)
	}
	if sp := strings.LastIndexByte(f.text[start:end], ' '); sp > 0 {
		end = start + sp
	}
	return f.text[start:end]
}

// excerpt returns at most n bytes of s on one line, cut at a rune boundary.
func excerpt(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// number is the answer's figure for hash h.
func number(h uint64) int { return int(h%9000) + 100 }

// subtaskBounds reads "between MIN and MAX" from the planner's prompt; ok
// is false when it does not say.
func subtaskBounds(sys string) (lo, hi int, ok bool) {
	i := strings.Index(sys, "between ")
	if i < 0 {
		return 0, 0, false
	}
	rest := sys[i+len("between "):]
	a, rest, ok := leadingInt(rest)
	if !ok || !strings.HasPrefix(rest, " and ") {
		return 0, 0, false
	}
	b, _, ok := leadingInt(rest[len(" and "):])
	if !ok || a > b {
		return 0, 0, false
	}
	return a, b, true
}

func leadingInt(s string) (int, string, bool) {
	n := 0
	for n < len(s) && n < 6 && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if n == 0 {
		return 0, s, false
	}
	v, err := strconv.Atoi(s[:n])
	return v, s[n:], err == nil
}

// compose writes the answer of kind f.kind for choice c (from 0).
func (s *Server) compose(f *facts, c int) reply {
	h := splitmix64(f.hash + uint64(c))
	full, brief := s.cfg.ReplyBytes, s.cfg.ReplyBytes/4
	n := number(h)
	var b []byte
	switch f.kind {
	case KindRouteCalls:
		k := s.cfg.ToolCalls
		qs := make([][]byte, k)
		req := excerpt(f.request, 80)
		for i := range k {
			hi := splitmix64(h + uint64(i) + 1)
			q := make([]byte, 0, 160+len(req))
			q = append(q, "Part "...)
			q = strconv.AppendInt(q, int64(i+1), 10)
			q = append(q, " of "...)
			q = strconv.AppendInt(q, int64(k), 10)
			q = append(q, " of the problem \""...)
			q = append(q, req...)
			q = append(q, "\": what is "...)
			q = strconv.AppendInt(q, int64(hi%900+100), 10)
			q = append(q, " times "...)
			q = strconv.AppendInt(q, int64((hi>>20)%90+10), 10)
			q = append(q, '?')
			qs[i] = q
		}
		return reply{questions: qs, finish: "tool_calls"}
	case KindRouteFinal:
		b = append(b, "I checked the answers the assistant returned and combined them. "...)
		b = append(b, s.filler.slice(h, full)...)
		b = append(b, "\n\nFinal answer: \\boxed{"...)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, '}')
	case KindWeak:
		b = append(b, s.filler.slice(h, brief)...)
		b = append(b, "\nThe result is \\boxed{"...)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, '}')
	case KindPlan:
		k := s.cfg.Subtasks
		if lo, hi, ok := subtaskBounds(f.system); ok {
			k = min(max(k, lo), hi)
		}
		req := excerpt(f.request, 80)
		b = append(b, "<|reasoning|>\n"...)
		b = append(b, s.filler.slice(h, full)...)
		b = append(b, "\n</|reasoning|>\n"...)
		for i := range k {
			b = append(b, "<|subtask|>\nWork out part "...)
			b = strconv.AppendInt(b, int64(i+1), 10)
			b = append(b, " of "...)
			b = strconv.AppendInt(b, int64(k), 10)
			b = append(b, " of the request \""...)
			b = append(b, req...)
			b = append(b, "\": compute the quantity it needs and state it with its unit.\n<|end_subtask|>\n"...)
		}
	case KindSubagent:
		b = append(b, s.filler.slice(h, brief)...)
		b = append(b, "\nResult: the quantity for this part is "...)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, '.')
	case KindAggregate:
		b = append(b, s.filler.slice(h, full)...)
		b = append(b, "\n\nFinal Output:\nCombining the sub-agents' results, the answer is "...)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, '.')
	case KindPeer, KindLeader:
		b = append(b, s.filler.slice(h, full)...)
		b = append(b, "\n<answer>"...)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, "</answer>"...)
	case KindSingle:
		b = append(b, s.filler.slice(h, full)...)
		b = append(b, "\n\nFinal answer: \\boxed{"...)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, '}')
	default:
		b = append(b, s.filler.slice(h, full)...)
	}
	return reply{text: b, finish: "stop"}
}

// limit cuts a text reply to maxTokens tokens (4 bytes each) at a rune
// boundary, setting finish_reason "length".
func (r *reply) limit(maxTokens int) {
	if maxTokens <= 0 || r.text == nil || tokens(len(r.text)) <= maxTokens {
		return
	}
	n := maxTokens * bytesPerToken
	for n > 0 && n < len(r.text) && !utf8.RuneStart(r.text[n]) {
		n--
	}
	r.text = r.text[:n]
	r.finish = "length"
}

const bytesPerToken = 4

// tokens converts a byte count to tokens, rounding up.
func tokens(n int) int { return (n + bytesPerToken - 1) / bytesPerToken }
