package transcript

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/world"
)

func testProblems(t *testing.T, n int) []*world.Problem {
	t.Helper()
	ps, err := world.Generate(world.DefaultConfig(), 11, world.Train, n)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// replayer answers a strategy's calls with the transcripts' assistant
// messages. First it checks that each request renders as the transcript's
// tokens up to that message. Safe for concurrent use.
type replayer struct {
	mu sync.Mutex
	// next counts the assistant messages already replayed per transcript.
	next map[*Transcript]int
}

func (r *replayer) fn(ts []Transcript) modeltest.Func {
	r.next = map[*Transcript]int{}
	return func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		got := tokenizer.Render(req.Messages, req.Tools, true)
		r.mu.Lock()
		defer r.mu.Unlock()
		for i := range ts {
			tr := &ts[i]
			want, spans := tr.Tokens()
			k := r.next[tr]
			seen := 0
			for _, sp := range spans {
				if sp.Role != delegate.RoleAssistant {
					continue
				}
				if seen == k {
					if slices.Equal(got, want[:sp.Body]) {
						r.next[tr]++
						msg := tr.Messages[slices.Index(spans, sp)]
						finish := "stop"
						if len(msg.ToolCalls) > 0 {
							finish = "tool_calls"
						}
						return &delegate.Response{Choices: []delegate.Choice{{Message: msg, FinishReason: finish}}}, nil
					}
					break
				}
				seen++
			}
		}
		return nil, fmt.Errorf("request matches no transcript prefix:\n%s", tokenizer.Decode(got))
	}
}

func newReplay(t *testing.T, name string, ts []Transcript) *modeltest.Model {
	t.Helper()
	r := &replayer{}
	return modeltest.New(name, r.fn(ts))
}

// checkRun checks a strategy's trace: no failure, the problem's answer,
// and every call answered by the replay. A mismatching request fails the
// call and so the run.
func checkRun(t *testing.T, s delegate.Strategy, p *world.Problem) {
	t.Helper()
	tr, err := s.Run(context.Background(), p.Text, nil)
	if err != nil {
		t.Fatalf("Run(%q): %v", p.Text, err)
	}
	if tr.Failure != "" {
		t.Fatalf("Run(%q) failed: %s", p.Text, tr.Failure)
	}
	if got, err := world.ParseAnswer(tr.Answer); err != nil || got != p.Answer {
		t.Fatalf("Run(%q) answer %q (%v), want %d", p.Text, tr.Answer, err, p.Answer)
	}
}

// TestStrategiesSendTranscriptPrompts runs every strategy with models that
// replay the transcripts. Each request, rendered with the chat template,
// must be the transcript's tokens before the message the model writes. So
// the strategies send the local models what they were trained on.
func TestStrategiesSendTranscriptPrompts(t *testing.T) {
	cfg := StrategyConfig()
	pols := map[string]world.Policy{"never": world.Never, "always": world.Always, "selective": world.Selective}
	for _, p := range testProblems(t, 20) {
		single := Single(p)
		s, err := strategy.New(strategy.NameSingle, strategy.Roles{
			Single: delegate.Agent{Model: newReplay(t, "delegator", single.Delegator)},
		}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkRun(t, s, p)

		for name, pol := range pols {
			t.Run("route "+name, func(t *testing.T) {
				e := Route(p, pol)
				s, err := strategy.New(strategy.NameRoute, strategy.Roles{
					Strong: delegate.Agent{Model: newReplay(t, "delegator", e.Delegator)},
					Weak:   delegate.Agent{Model: newReplay(t, "solver", e.Subagents)},
				}, cfg)
				if err != nil {
					t.Fatal(err)
				}
				checkRun(t, s, p)
			})
			t.Run("decompose "+name, func(t *testing.T) {
				e := Decompose(p, pol)
				s, err := strategy.New(strategy.NameDecompose, strategy.Roles{
					Delegator: delegate.Agent{Model: newReplay(t, "delegator", e.Delegator)},
					Subagent:  delegate.Agent{Model: newReplay(t, "solver", e.Subagents)},
				}, cfg)
				if err != nil {
					t.Fatal(err)
				}
				checkRun(t, s, p)
			})
		}
		t.Run("lead", func(t *testing.T) {
			e := Lead(p, cfg.Peers, rand.New(rand.NewPCG(1, 2)))
			var peers []delegate.Agent
			for i := range e.Subagents {
				peers = append(peers, delegate.Agent{Model: newReplay(t, "peer", e.Subagents[i:i+1])})
			}
			s, err := strategy.New(strategy.NameLead, strategy.Roles{
				Leader: delegate.Agent{Model: newReplay(t, "leader", e.Delegator)},
				Peers:  peers,
			}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkRun(t, s, p)
		})
	}
}

// TestFirstRequestIsTranscriptPrefix is the narrow form of the check
// above: route's first request equals the transcript's prefix.
func TestFirstRequestIsTranscriptPrefix(t *testing.T) {
	p := testProblems(t, 1)[0]
	e := Route(p, world.Selective)
	strong := modeltest.New("delegator", modeltest.Reply(`\boxed{0}`))
	s, err := strategy.New(strategy.NameRoute, strategy.Roles{
		Strong: delegate.Agent{Model: strong}, Weak: delegate.Agent{Model: modeltest.New("solver", modeltest.Reply("x"))},
	}, StrategyConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background(), p.Text, nil); err != nil {
		t.Fatal(err)
	}
	req := strong.Requests()[0]
	got := tokenizer.Render(req.Messages, req.Tools, true)
	want, spans := e.Delegator[0].Tokens()
	if !slices.Equal(got, want[:spans[2].Body]) {
		t.Errorf("first request renders as\n%s\nwant\n%s", tokenizer.Decode(got), tokenizer.Decode(want[:spans[2].Body]))
	}
}

func TestPromptsOverrideKnownTemplates(t *testing.T) {
	cfg := StrategyConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("StrategyConfig().Validate() = %v", err)
	}
	for _, name := range strategy.PromptNames() {
		if _, ok := Prompts[name]; !ok {
			t.Errorf("template %s is not overridden: a strategy would send the long default", name)
		}
	}
}

func TestRouteTranscriptProtocol(t *testing.T) {
	for _, p := range testProblems(t, 100) {
		for name, pol := range map[string]world.Policy{"never": world.Never, "always": world.Always, "selective": world.Selective} {
			e := Route(p, pol)
			msgs := e.Delegator[0].Messages
			calls := 0
			for i, m := range msgs {
				for _, c := range m.ToolCalls {
					calls++
					q, err := strategy.ParseDelegateArgs(c.Arguments)
					if err != nil || c.Name != strategy.DelegateToolName {
						t.Fatalf("%s: call %s(%s): %v", name, c.Name, c.Arguments, err)
					}
					if _, _, _, err := world.ParseExpr(q); err != nil {
						t.Fatalf("%s: question %q: %v", name, q, err)
					}
				}
				if m.Role == delegate.RoleAssistant {
					ids, _ := tokenizer.RenderSpans(msgs[i:i+1], nil, false)
					back, complete := tokenizer.ParseAssistant(ids[2:]) // after <s> and <|assistant|>
					if !complete || back.Content != m.Content || len(back.ToolCalls) != len(m.ToolCalls) {
						t.Fatalf("%s: message %d does not survive the chat template: %+v", name, i, back)
					}
				}
			}
			if calls != len(e.Subagents) {
				t.Errorf("%s: %d calls, %d solver transcripts", name, calls, len(e.Subagents))
			}
			last := msgs[len(msgs)-1]
			if !world.Correct(last.Content, p.Answer) || len(last.ToolCalls) != 0 {
				t.Errorf("%s: last message %q does not answer %d", name, last.Content, p.Answer)
			}
			if name == "never" && calls != 0 || name == "always" && calls != len(p.Steps) {
				t.Errorf("%s: %d calls for %d steps", name, calls, len(p.Steps))
			}
		}
	}
}

func TestDecomposePlanParses(t *testing.T) {
	for _, p := range testProblems(t, 100) {
		e := Decompose(p, world.Selective)
		plan := e.Delegator[0].Messages[2].Content
		got, err := strategy.ParsePlan(plan, MinSubtasks, MaxSubtasks)
		if err != nil {
			t.Fatalf("ParsePlan(%q): %v", plan, err)
		}
		if len(got.Subtasks) != len(e.Subagents) {
			t.Errorf("%d subtasks, %d sub-agent transcripts", len(got.Subtasks), len(e.Subagents))
		}
		agg := e.Delegator[1].Messages[2].Content
		if out, ok := delegate.FinalOutput(agg); !ok || out != strconv.FormatInt(p.Answer, 10) {
			t.Errorf("aggregate %q: final output %q, want %d", agg, out, p.Answer)
		}
	}
}

func TestLeadTranscripts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	majorityWrong, computed := 0, 0
	for _, p := range testProblems(t, 300) {
		e := Lead(p, 3, rng)
		out := e.Delegator[0].Messages[2].Content
		if got, ok := delegate.AnswerTag(out); !ok || got != strconv.FormatInt(p.Answer, 10) {
			t.Fatalf("leader %q answers %q, want %d", out, got, p.Answer)
		}
		votes := map[string]int{}
		for _, s := range e.Subagents {
			a, _ := delegate.AnswerTag(s.Messages[2].Content)
			votes[a]++
		}
		if votes[strconv.FormatInt(p.Answer, 10)] < 2 {
			majorityWrong++
		}
		if world.CheckLines(out) == 0 && len(out) > 0 && hasDigitLine(out) {
			computed++
		}
	}
	if majorityWrong < 30 || computed < 100 {
		t.Errorf("of 300 leader transcripts, %d have a wrong majority and %d compute a step; want some of each", majorityWrong, computed)
	}
}

// digitLine is an elementary line of world.Scratchpad: "a+b+c=rd",
// "a-b-c=rd" or "a*d+c=rd".
var digitLine = regexp.MustCompile(`(?m)^\d(\+\d\+|-\d-|\*\d\+)\d=\d\d$`)

// hasDigitLine reports whether text holds a scratchpad line: a step
// computed rather than copied.
func hasDigitLine(text string) bool { return digitLine.MatchString(text) }

func TestSolverTranscriptsCoverage(t *testing.T) {
	ps := testProblems(t, 200)
	ts := SolverTranscripts(ps)
	for _, tr := range ts {
		q := tr.Messages[1].Content
		op, x, y, err := world.ParseExpr(q)
		if err != nil {
			t.Fatalf("question %q: %v", q, err)
		}
		if !world.SolverCovers(op, x, y) {
			t.Errorf("question %q is outside the solver's coverage", q)
		}
		if !world.Correct(tr.Messages[2].Content, op.Apply(x, y)) {
			t.Errorf("answer %q to %q is wrong", tr.Messages[2].Content, q)
		}
	}
	if len(ts) < len(ps) {
		t.Errorf("%d solver transcripts from %d problems", len(ts), len(ps))
	}
}

func TestBuildCorpus(t *testing.T) {
	ps := testProblems(t, 400)
	a, err := BuildCorpus(ps, DefaultMix(), 3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := BuildCorpus(ps, DefaultMix(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("BuildCorpus is not deterministic")
	}
	for _, pol := range []string{"never", "always", "random"} {
		if n := a.Policies[pol]; n < 50 {
			t.Errorf("policy %s used for %d of 400 problems", pol, n)
		}
	}
	kinds := map[Kind]int{}
	for _, tr := range a.Delegator {
		kinds[tr.Kind]++
	}
	for _, k := range []Kind{KindRoute, KindSingle, KindPlan, KindAggregate, KindLeader} {
		if kinds[k] == 0 {
			t.Errorf("no %s transcript in the corpus: %v", k, kinds)
		}
	}
	if len(a.Solver) == 0 || len(a.Peers) == 0 {
		t.Errorf("%d solver and %d peer transcripts", len(a.Solver), len(a.Peers))
	}
	bad := DefaultMix()
	bad.DelegateProb = 2
	if _, err := BuildCorpus(ps, bad, 3); err == nil || !strings.Contains(err.Error(), "delegate_prob") {
		t.Errorf("BuildCorpus with delegate_prob 2: %v, want an error naming it", err)
	}
}

func TestSolverCorpusCovered(t *testing.T) {
	ts := SolverCorpus(testProblems(t, 50), world.Coverage{}, 1, 2000)
	seen := map[world.Op]int{}
	for _, tr := range ts {
		op, x, y, err := world.ParseExpr(tr.Messages[1].Content)
		if err != nil || !world.SolverCovers(op, x, y) {
			t.Fatalf("solver question %q: covered %v, %v", tr.Messages[1].Content, err == nil && world.SolverCovers(op, x, y), err)
		}
		seen[op]++
	}
	if seen[world.Add] == 0 || seen[world.Sub] != 0 || seen[world.Mul] == 0 {
		t.Errorf("operations in the solver corpus: %v", seen)
	}
	for _, s := range world.SolverSizes(false) {
		if s.Covered() {
			t.Errorf("SolverSizes(false) lists covered %v", s)
		}
		x, y := s.Question(rand.New(rand.NewPCG(1, 1)))
		if world.SolverCovers(s.Op, x, y) {
			t.Errorf("class %v drew covered question %s", s, world.Expr(s.Op, x, y))
		}
	}
}

// TestRepliesFitBudgets checks replies of the hardest level against the
// max_tokens StrategyConfig gives their stage. None may exceed it, so a
// model imitating them is never cut.
func TestRepliesFitBudgets(t *testing.T) {
	cfg := StrategyConfig()
	budget := map[Kind]int{
		KindRoute: cfg.Strong.MaxTokens, KindSingle: cfg.Single.MaxTokens, KindPlan: cfg.Plan.MaxTokens,
		KindAggregate: cfg.Aggregate.MaxTokens, KindSolver: cfg.Weak.MaxTokens, KindSubagent: cfg.Subagent.MaxTokens,
		KindLeader: cfg.Leader.MaxTokens, KindPeer: cfg.Peer.MaxTokens,
	}
	ps, err := world.Generate(world.Levels()[4], 3, world.Train, 300)
	if err != nil {
		t.Fatal(err)
	}
	c, err := BuildCorpus(ps, Mix{Never: 1, Single: 1, Decompose: 1, Lead: 1, Peers: 3}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range [][]Transcript{c.Delegator, c.Solver, c.Peers} {
		for _, tr := range set {
			_, spans := tr.Tokens()
			for _, sp := range spans {
				if n := sp.End - sp.Body; sp.Role == delegate.RoleAssistant && n > budget[tr.Kind] {
					t.Errorf("%s reply of %d tokens exceeds max_tokens %d", tr.Kind, n, budget[tr.Kind])
				}
			}
		}
	}
}

func TestCondense(t *testing.T) {
	// A right scratchpad condenses to exactly the peers' terse answer, on
	// every level's shapes.
	for level, cfg := range world.Levels() {
		ps, err := world.Generate(cfg, 7, world.Train, 40)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			reply := Single(p).Delegator[0].Messages[2].Content
			want, _ := PeerAnswer(p, -1, 0)
			if got := Condense(reply); got != want {
				t.Fatalf("level %d %q:\nreply\n%s\ncondensed\n%s\nwant\n%s", level, p.Text, reply, got, want)
			}
		}
	}
	for _, tc := range []struct{ name, reply, want string }{
		{"wrong result kept", "12*34\n0012*0004\n2*4+0=08\n=0048\n0012*0003\n=0036\n0048+0360\n=0400\n0400+0005\n=0405\n\\boxed{0405}",
			"12*34=400\n0400+0005=405\n<answer>405</answer>"},
		{"no box", "0400+0005\n=0405", "0400+0005=405"},
		{"unfinished product", "12*34\n0012*0004\n=0048\n\\boxed{0048}", "<answer>48</answer>"},
		{"prose skipped", "let me see\n0010-0003\n=0007\nso\n\\boxed{7}", "0010-0003=7\n<answer>7</answer>"},
		{"nothing", "no idea", ""},
		{"box without integer", "0001+0001\n=0002\n\\boxed{two}", "0001+0001=2"},
	} {
		if got := Condense(tc.reply); got != tc.want {
			t.Errorf("%s: Condense = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDelegateCallArguments(t *testing.T) {
	tests := []struct {
		question string
		want     string
	}{
		{"47*28", `{"question":"47*28"}`},
		{"Is 3<4 & 4>2?", `{"question":"Is 3<4 & 4>2?"}`},
		{`say "hi"`, `{"question":"say \"hi\""}`},
	}
	for _, tt := range tests {
		call := DelegateCall(2, tt.question)
		if call.Arguments != tt.want {
			t.Errorf("DelegateCall(2, %q).Arguments = %s, want %s", tt.question, call.Arguments, tt.want)
		}
		if call.ID != "call_2" {
			t.Errorf("DelegateCall(2, %q).ID = %q, want call_2", tt.question, call.ID)
		}
	}
}
