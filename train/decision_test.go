package train

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/world"
)

// turn is a delegator's generated tokens built from parts: text, a
// delegate call of a question, or a raw call body.
type turn struct {
	ids  []int
	mask []bool
}

func (t *turn) text(s string) *turn { return t.add(tokenizer.Encode(s), false) }

// context adds tokens the policy did not generate, such as a tool result.
func (t *turn) context(s string) *turn { return t.add(tokenizer.Encode(s), true) }

// call adds a call of body and returns its span [start, end).
func (t *turn) call(body string) (start, end int) {
	start = len(t.ids)
	t.add(append(append([]int{tokenizer.ToolCall}, tokenizer.Encode(body)...), tokenizer.EndToolCall), false)
	return start, len(t.ids)
}

func (t *turn) add(ids []int, masked bool) *turn {
	t.ids = append(t.ids, ids...)
	for range ids {
		t.mask = append(t.mask, masked)
	}
	return t
}

func (t *turn) episode() rl.Episode {
	e := rl.Episode{Prompt: []int{tokenizer.BOS}, Completion: t.ids, Behaviour: make([]float32, len(t.ids))}
	if slices.Contains(t.mask, true) {
		e.Masked = t.mask
	}
	return e
}

// solverTrace is a trace whose solver answers questions with replies,
// in order.
func solverTrace(questions, replies []string) *delegate.Trace {
	root := &delegate.Node{Name: "route"}
	for i, q := range questions {
		out := delegate.Message{Role: delegate.RoleAssistant, Content: replies[i]}
		root.Children = append(root.Children, &delegate.Node{ID: 2 + i, Name: "solver", Model: "solver", Role: RoleSubagent,
			Messages: []delegate.Message{delegate.User(q)}, Output: &out})
	}
	return &delegate.Trace{Strategy: "route", Root: root}
}

// TestDecisions checks that each delegate call's tokens are found and
// valued by the world's reward: the scratchpad's tokens less the call's at
// λ, less μ, less 1 when the solver's answer is wrong.
func TestDecisions(t *testing.T) {
	rew := reward.Graded{Lambda: 0.003, Mu: 0.02}
	value := func(op world.Op, x, y int64, callTokens int, right bool) float64 {
		pad, _, err := world.Scratchpad(op, x, y)
		if err != nil {
			t.Fatal(err)
		}
		v := rew.Lambda*float64(len(pad)-callTokens) - rew.Mu
		if !right {
			v--
		}
		return v
	}
	// First turn: some work, two products in one turn, a malformed call.
	var a turn
	a.text("x=3\n")
	s1, e1 := a.call(`delegate{"question":"47*28"}`)
	s2, e2 := a.call(`delegate{"question":"67*28"}`)
	a.call(`delegate{"question":`)
	a.text("\n")
	// Second turn after a tool result: a sum, a call nobody answered, a
	// question not of the world, a product asked twice.
	var b turn
	b.text("ok").context("<tool result 1316>")
	s3, e3 := b.call(`delegate{"question":"1316+1876"}`)
	b.call(`delegate{"question":"12*34"}`)
	b.call(`delegate{"question":"what is two and two"}`)
	s4, e4 := b.call(`delegate{"question":"47*28"}`)
	eps := []rl.Episode{a.episode(), b.episode()}
	tr := solverTrace(
		[]string{"47*28", "67*28", "1316+1876", "what is two and two", "47*28"},
		[]string{`\boxed{1316}`, `\boxed{1877}`, `\boxed{3193}`, `\boxed{4}`, `\boxed{1316}`})

	got := decisions(eps, tr, rew)
	want := []decision{
		{0, s1, e1, world.Mul, value(world.Mul, 47, 28, e1-s1, true)},
		{0, s2, e2, world.Mul, value(world.Mul, 67, 28, e2-s2, false)},
		{1, s3, e3, world.Add, value(world.Add, 1316, 1876, e3-s3, false)},
		{1, s4, e4, world.Mul, value(world.Mul, 47, 28, e4-s4, true)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d decisions %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ep != w.ep || g.start != w.start || g.end != w.end || g.op != w.op || math.Abs(g.value-w.value) > 1e-12 {
			t.Errorf("decision %d: got %+v, want %+v", i, g, w)
		}
	}
	// The compact product call is 30 tokens: 161 - 30 = 131 saved.
	if g, w := got[0].value, 0.003*131-0.02; math.Abs(g-w) > 1e-12 {
		t.Errorf("a right product is worth %v, want %v", g, w)
	}
}

// TestCallValueGated checks a call's value under the gated band reward
// (λ 0.003, μ 0.02, gate 2) against the rewards of the two rollouts it
// compares: the one that delegated and the one that computed inline.
func TestCallValueGated(t *testing.T) {
	rew, err := world.WorldReward(world.NamedReward("band"), world.RewardGated)
	if err != nil {
		t.Fatal(err)
	}
	const saved = 131 // a product's scratchpad less its call
	gain := rew.Lambda*saved - rew.Mu
	for _, tt := range []struct {
		name   string
		tokens int // the delegating rollout's
		right  bool
	}{
		{"right, well below the gate", 280, true},
		{"right, inline past the gate", 600, true},
		{"wrong, cheap", 69, false},
		{"wrong, dear", 280, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spent := rew.Lambda*float64(tt.tokens) + rew.Mu
			with := world.RewardOf(rew, tt.right, world.Account{Delegator: delegate.Usage{CompletionTokens: tt.tokens}, SubagentCalls: 1})
			without := world.RewardOf(rew, true, world.Account{Delegator: delegate.Usage{CompletionTokens: tt.tokens + saved}})
			if got, want := callValue(rew, saved, tt.right, spent), with-without; math.Abs(got-want) > 1e-12 {
				t.Errorf("callValue = %v, want %v (%v delegated, %v inline)", got, want, with, without)
			}
			if got := callValue(rew, saved, tt.right, spent); tt.right && got > gain+1e-12 || !tt.right && got > -1 {
				t.Errorf("callValue = %v: a right call gains at most %v, a wrong one loses at least 1", got, gain)
			}
		})
	}
	// Ungated, the value is the graded one whatever was spent.
	g := world.NamedReward("band")
	if got, want := callValue(g, saved, false, 5), gain-1; math.Abs(got-want) > 1e-12 {
		t.Errorf("ungated wrong call = %v, want %v", got, want)
	}
}

func span(start, end int, adv float64) rl.Span {
	return rl.Span{Start: start, End: end, Advantage: adv}
}

// TestCreditDecisions checks that decisions are compared with the step's
// decisions on the same operation, and that an operation whose decisions
// are all worth the same keeps the task's advantage.
func TestCreditDecisions(t *testing.T) {
	const right, wrong = 0.373, -0.627
	rollout := func(n int) *rl.ScoredRollout {
		return &rl.ScoredRollout{Episodes: make([]rl.Episode, n), Advantage: 0.5, HasAdvantage: true}
	}
	rs := []*rl.ScoredRollout{rollout(2), rollout(1), rollout(1), rollout(1)}
	ds := [][]decision{
		{{0, 3, 33, world.Mul, right}, {0, 40, 70, world.Mul, wrong}, {1, 5, 40, world.Add, -1}},
		{{0, 0, 30, world.Mul, right}},
		{{0, 2, 37, world.Add, -1}},
		nil,
	}
	for _, est := range []reward.Estimator{reward.GRPO, reward.DrGRPO, reward.RLOO} {
		t.Run(string(est), func(t *testing.T) {
			for _, r := range rs {
				r.Spans = nil
			}
			if err := creditDecisions(est, rs, ds); err != nil {
				t.Fatal(err)
			}
			g, err := reward.NewGroup(est, []float64{right, wrong, right})
			if err != nil {
				t.Fatal(err)
			}
			want := [][][]rl.Span{
				{{span(3, 33, g.Advantages[0]), span(40, 70, g.Advantages[1])}, nil},
				{{span(0, 30, g.Advantages[2])}},
				nil, // its sum is worth what the other sum is: the task's advantage
				nil,
			}
			for n, r := range rs {
				if !slices.EqualFunc(r.Spans, want[n], func(a, b []rl.Span) bool { return slices.Equal(a, b) }) {
					t.Errorf("rollout %d: got spans %v, want %v", n, r.Spans, want[n])
				}
			}
			for n, w := range []float64{2, 1, 0, 0} {
				if got := rs[n].Scalars[DecisionsCreditedMetric]; got != w {
					t.Errorf("rollout %d: %s = %v, want %v", n, DecisionsCreditedMetric, got, w)
				}
			}
			if a := g.Advantages; !(a[0] > 0 && a[1] < 0) {
				t.Errorf("advantages %v: want the right product above 0 and the wrong one below", a)
			}
		})
	}
}

// TestCreditCounterfactual checks that each call's tokens get its own
// value against inline's 0. Sums that all lose the item tie under
// decision credit, and here each is pushed down by its full value.
func TestCreditCounterfactual(t *testing.T) {
	const right, wrong, sum = 0.373, -0.627, -1.0
	rollout := func(n int) *rl.ScoredRollout {
		return &rl.ScoredRollout{Episodes: make([]rl.Episode, n), Advantage: 0.5, HasAdvantage: true}
	}
	ds := [][]decision{
		{{0, 3, 33, world.Mul, right}, {0, 40, 70, world.Mul, wrong}, {1, 5, 40, world.Add, sum}},
		{{0, 0, 30, world.Mul, right}},
		{{0, 2, 37, world.Add, sum}},
		nil,
	}
	rs := []*rl.ScoredRollout{rollout(2), rollout(1), rollout(1), rollout(1)}
	if err := creditCounterfactual(rs, ds); err != nil {
		t.Fatal(err)
	}
	want := [][][]rl.Span{
		{{span(3, 33, right), span(40, 70, wrong)}, {span(5, 40, sum)}},
		{{span(0, 30, right)}},
		{{span(2, 37, sum)}},
		nil,
	}
	for n, r := range rs {
		if !slices.EqualFunc(r.Spans, want[n], func(a, b []rl.Span) bool { return slices.Equal(a, b) }) {
			t.Errorf("rollout %d: got spans %v, want %v", n, r.Spans, want[n])
		}
	}
	for n, w := range []float64{3, 1, 1, 0} {
		if got := rs[n].Scalars[DecisionsCreditedMetric]; got != w {
			t.Errorf("rollout %d: %s = %v, want %v", n, DecisionsCreditedMetric, got, w)
		}
	}

	// Decision credit leaves the tied sums the task's advantage.
	tied := []*rl.ScoredRollout{rollout(2), rollout(1), rollout(1), rollout(1)}
	if err := creditDecisions(reward.GRPO, tied, ds); err != nil {
		t.Fatal(err)
	}
	if got := tied[2].Spans; got != nil {
		t.Errorf("decision credit of a tied sum: got spans %v, want none", got)
	}
	if err := creditCounterfactual(rs[:1], ds); err == nil {
		t.Error("1 rollout, 4 decision lists: got no error")
	}
}

// TestCounterfactualValues checks that calls found in sequences get their
// exact values as advantages: a right product above 0, a wrong sum below.
func TestCounterfactualValues(t *testing.T) {
	rew := reward.Graded{Lambda: 0.003, Mu: 0.02}
	var a turn
	s1, e1 := a.call(`delegate{"question":"47*28"}`)
	a.text("\n").context("<tool result 1316>")
	s2, e2 := a.call(`delegate{"question":"1316+1876"}`)
	tr := solverTrace([]string{"47*28", "1316+1876"}, []string{`\boxed{1316}`, `\boxed{3193}`})
	ds := [][]decision{decisions([]rl.Episode{a.episode()}, tr, rew)}
	rs := []*rl.ScoredRollout{{Episodes: make([]rl.Episode, 1), Advantage: 0.5, HasAdvantage: true}}
	if err := creditCounterfactual(rs, ds); err != nil {
		t.Fatal(err)
	}
	pad := func(op world.Op, x, y int64) int {
		p, _, err := world.Scratchpad(op, x, y)
		if err != nil {
			t.Fatal(err)
		}
		return len(p)
	}
	want := []rl.Span{
		span(s1, e1, 0.003*float64(pad(world.Mul, 47, 28)-(e1-s1))-0.02),
		span(s2, e2, 0.003*float64(pad(world.Add, 1316, 1876)-(e2-s2))-0.02-1),
	}
	if len(rs[0].Spans) != 1 || len(rs[0].Spans[0]) != len(want) {
		t.Fatalf("got spans %v, want %v", rs[0].Spans, want)
	}
	for i, w := range want {
		g := rs[0].Spans[0][i]
		if g.Start != w.Start || g.End != w.End || math.Abs(g.Advantage-w.Advantage) > 1e-12 {
			t.Errorf("call %d: got %v, want %v", i, g, w)
		}
	}
	if g := rs[0].Spans[0]; !(g[0].Advantage > 0 && g[1].Advantage < 0) {
		t.Errorf("advantages %v: want the right product above 0 and the wrong sum below", g)
	}
}

// TestSkipTokens checks that a delegated step's skip token is where the
// turn's text leaves the step's block for a later step's, and that a call
// with no later block before it has none.
func TestSkipTokens(t *testing.T) {
	lit := func(v int64) world.Operand { return world.Operand{Ref: world.Literal, Value: v} }
	p := &world.Problem{Steps: []world.Step{
		{Op: world.Mul, X: lit(47), Y: lit(28)},
		{Op: world.Mul, X: lit(45), Y: lit(31)},
		{Op: world.Add, X: world.Operand{Ref: 1, Value: 1395}, Y: lit(12)},
		{Op: world.Sub, X: world.Operand{Ref: 0, Value: 1316}, Y: world.Operand{Ref: 2, Value: 1407}},
	}}
	block := func(i int) string {
		s := p.Steps[i]
		pad, _, err := world.Scratchpad(s.Op, s.X.Value, s.Y.Value)
		if err != nil {
			t.Fatal(err)
		}
		return pad
	}
	call := func(i int) string { return `delegate{"question":"` + p.Steps[i].Expr() + `"}` }
	rew := reward.Graded{Lambda: 0.003, Mu: 0.02}

	// Step 1 delegated, step 2 computed first: "45*31" leaves "47*28" at
	// its second byte, the turn's token 1.
	var a turn
	a.text(block(1) + "\n" + block(2) + "\n")
	a.call(call(0))
	// Both delegated: the first call's own token is the choice; the
	// second follows a call.
	var b turn
	b.call(call(0))
	b.call(call(1))
	// Step 1 computed, step 2 delegated, in a second turn: the first
	// turn's text is context.
	var c turn
	c.text("ok").context("<tool result>")
	c.text(block(0) + "\n")
	c.call(call(1))
	tests := []struct {
		name string
		t    *turn
		want []int
	}{
		{"later block first", &a, []int{1}},
		{"calls only", &b, []int{-1, -1}},
		{"earlier block first", &c, []int{-1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eps := []rl.Episode{tt.t.episode()}
			var qs, replies []string
			for i := range p.Steps {
				qs, replies = append(qs, p.Steps[i].Expr()), append(replies, `\boxed{1}`)
			}
			ds := decisions(eps, solverTrace(qs, replies), rew)
			if len(ds) != len(tt.want) {
				t.Fatalf("got %d decisions, want %d", len(ds), len(tt.want))
			}
			if got := skipTokens(eps, ds, p); !slices.Equal(got, tt.want) {
				t.Errorf("got skip tokens %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCreditSkips checks that a skip token gets its call's advantage, summed
// where two calls share it, and that a call without its own advantage
// gives it none.
func TestCreditSkips(t *testing.T) {
	rollout := func() *rl.ScoredRollout {
		return &rl.ScoredRollout{Episodes: make([]rl.Episode, 1), Advantage: 0.5, HasAdvantage: true}
	}
	ds := [][]decision{
		{{0, 40, 70, world.Mul, -0.6}, {0, 70, 100, world.Mul, 0.4}},
		{{0, 40, 70, world.Mul, 0.4}},
		{{0, 30, 60, world.Add, -1}},
	}
	skips := [][]int{{3, 3}, {-1}, {5}}
	rs := []*rl.ScoredRollout{rollout(), rollout(), rollout()}
	if err := creditCounterfactual(rs, ds); err != nil {
		t.Fatal(err)
	}
	if err := creditSkips(rs, ds, skips); err != nil {
		t.Fatal(err)
	}
	want := [][]rl.Span{
		{span(3, 4, -0.6+0.4), span(40, 70, -0.6), span(70, 100, 0.4)},
		{span(40, 70, 0.4)},
		{span(5, 6, -1), span(30, 60, -1)},
	}
	for n, r := range rs {
		if len(r.Spans) != 1 || len(r.Spans[0]) != len(want[n]) {
			t.Fatalf("rollout %d: got spans %v, want %v", n, r.Spans, want[n])
		}
		for k, w := range want[n] {
			g := r.Spans[0][k]
			if g.Start != w.Start || g.End != w.End || math.Abs(g.Advantage-w.Advantage) > 1e-12 {
				t.Errorf("rollout %d span %d: got %v, want %v", n, k, g, w)
			}
		}
	}
	for n, w := range []float64{2, 0, 1} {
		if got := rs[n].Scalars[SkipsCreditedMetric]; got != w {
			t.Errorf("rollout %d: %s = %v, want %v", n, SkipsCreditedMetric, got, w)
		}
	}
	// Under decision credit a tied sum keeps the task's advantage, and so
	// does its skip token.
	tied := []*rl.ScoredRollout{rollout(), rollout()}
	sums := [][]decision{{{0, 30, 60, world.Add, -1}}, {{0, 30, 60, world.Add, -1}}}
	if err := creditDecisions(reward.GRPO, tied, sums); err != nil {
		t.Fatal(err)
	}
	if err := creditSkips(tied, sums, [][]int{{5}, {5}}); err != nil {
		t.Fatal(err)
	}
	for n, r := range tied {
		if r.Spans != nil {
			t.Errorf("tied rollout %d: got spans %v, want none", n, r.Spans)
		}
	}
	if err := creditSkips(rs, ds, skips[:1]); err == nil {
		t.Error("3 rollouts, 1 skip list: got no error")
	}
}

// TestCreditCentred checks that a product call is credited against the
// mean of the step's other product calls, capped at 0, and that sums that
// all lose keep their values.
func TestCreditCentred(t *testing.T) {
	const right, wrong, sum = 0.4, -0.6, -1.0
	rollout := func() *rl.ScoredRollout {
		return &rl.ScoredRollout{Episodes: make([]rl.Episode, 1), Advantage: 0.5, HasAdvantage: true}
	}
	tests := []struct {
		name string
		ds   [][]decision
		want [][]float64 // each rollout's call advantages
	}{
		{"blind products", [][]decision{
			{{0, 0, 30, world.Mul, right}, {0, 30, 60, world.Mul, wrong}, {0, 60, 90, world.Add, sum}},
			{{0, 0, 30, world.Mul, wrong}, {0, 30, 60, world.Add, sum}},
		}, [][]float64{
			// The others' means: (wrong+wrong)/2, (right+wrong)/2, (right+wrong)/2.
			{right - wrong, wrong - (right+wrong)/2, sum},
			{wrong - (right+wrong)/2, sum},
		}},
		{"mean above 0", [][]decision{
			{{0, 0, 30, world.Mul, right}, {0, 30, 60, world.Mul, right}},
			{{0, 0, 30, world.Mul, wrong}},
		}, [][]float64{
			// The first: others' mean (right+wrong)/2 < 0; the second the same;
			// the wrong one: others' mean right > 0, capped at 0.
			{right - (right+wrong)/2, right - (right+wrong)/2},
			{wrong},
		}},
		{"all gain", [][]decision{{{0, 0, 30, world.Mul, right}}, {{0, 0, 30, world.Mul, right}}}, [][]float64{{right}, {right}}},
		{"one call", [][]decision{{{0, 0, 30, world.Mul, wrong}}}, [][]float64{{wrong}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := make([]*rl.ScoredRollout, len(tt.ds))
			for n := range rs {
				rs[n] = rollout()
			}
			if err := creditCentred(rs, tt.ds); err != nil {
				t.Fatal(err)
			}
			for n, r := range rs {
				if len(r.Spans) != 1 || len(r.Spans[0]) != len(tt.want[n]) {
					t.Fatalf("rollout %d: got spans %v, want advantages %v", n, r.Spans, tt.want[n])
				}
				for k, w := range tt.want[n] {
					if g := r.Spans[0][k].Advantage; math.Abs(g-w) > 1e-12 {
						t.Errorf("rollout %d call %d: got advantage %v, want %v", n, k, g, w)
					}
				}
			}
		})
	}
}

// TestInlineCredit checks that the first token of each step's block gets
// advantage 0 in place of the rollout's, beside the calls' spans, and that
// lines that are not a step's question get nothing.
func TestInlineCredit(t *testing.T) {
	lit := func(v int64) world.Operand { return world.Operand{Ref: world.Literal, Value: v} }
	p := &world.Problem{Steps: []world.Step{
		{Op: world.Mul, X: lit(47), Y: lit(28)},
		{Op: world.Mul, X: lit(45), Y: lit(31)},
		{Op: world.Add, X: world.Operand{Ref: 0, Value: 1316}, Y: world.Operand{Ref: 1, Value: 1395}},
	}}
	pad := func(i int) string {
		s := p.Steps[i]
		text, _, err := world.Scratchpad(s.Op, s.X.Value, s.Y.Value)
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	// Turn 1: step 1's block, then a call of step 2. Turn 2: a line that
	// is no step's question, then step 3's block.
	var a turn
	a.text(pad(0) + "\n")
	s1, e1 := a.call(`delegate{"question":"45*31"}`)
	a.context("<tool result 1395>")
	second := len(a.ids)
	a.text("x=1\n")
	third := len(a.ids)
	a.text(pad(2) + "\n\\boxed{2711}")
	eps := []rl.Episode{a.episode()}
	got := inlineTokens(eps, p)
	if want := [][]int{{0, third}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("got inline tokens %v, want %v (the second turn starts at %d)", got, want, second)
	}
	rs := []*rl.ScoredRollout{{Episodes: eps, Advantage: 0.5, HasAdvantage: true}}
	ds := [][]decision{{{0, s1, e1, world.Mul, 0.373}}}
	if err := creditCounterfactual(rs, ds); err != nil {
		t.Fatal(err)
	}
	if err := creditInline(rs, [][][]int{got}); err != nil {
		t.Fatal(err)
	}
	want := []rl.Span{span(0, 1, 0), span(s1, e1, 0.373), span(third, third+1, 0)}
	if !slices.Equal(rs[0].Spans[0], want) {
		t.Errorf("got spans %v, want %v", rs[0].Spans[0], want)
	}
	if g := rs[0].Scalars[InlineCreditedMetric]; g != 2 {
		t.Errorf("%s = %v, want 2", InlineCreditedMetric, g)
	}
	if err := creditInline(rs, nil); err == nil {
		t.Error("1 rollout, no token lists: got no error")
	}
}

// TestConfigCreditFlags checks that skip, centred and inline credit go
// only with the credits whose call values they change.
func TestConfigCreditFlags(t *testing.T) {
	tests := []struct {
		name                 string
		credit               string
		skip, centre, inline bool
		err                  string // "" when valid
	}{
		{"skip, decision", reward.CreditDecision, true, false, false, ""},
		{"all, counterfactual", reward.CreditCounterfactual, true, true, true, ""},
		{"skip, task", reward.CreditTask, true, false, false, "skip_credit: goes with credit"},
		{"centre, decision", reward.CreditDecision, false, true, false, "centre_calls: goes with credit"},
		{"inline, step", reward.CreditStep, false, false, true, "inline_credit: goes with credit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Credit, cfg.SkipCredit, cfg.CentreCalls, cfg.InlineCredit = tt.credit, tt.skip, tt.centre, tt.inline
			err := cfg.Validate()
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("err = %v, want one containing %q", err, tt.err)
			}
		})
	}
}
