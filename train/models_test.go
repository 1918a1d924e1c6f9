package train

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/scripted"
	"github.com/delegatelab/delegate/world/transcript"
)

// calculator answers a bare question "x op y" exactly and counts its calls.
// The first time it is asked slip, it answers one too large. Safe for
// concurrent use.
type calculator struct {
	slip    string
	slipped atomic.Bool
	calls   atomic.Int64
}

func (c *calculator) Name() string { return "calculator" }

func (c *calculator) Chat(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
	c.calls.Add(1)
	q := req.Messages[len(req.Messages)-1].Content
	op, x, y, err := world.ParseExpr(q)
	if err != nil {
		return nil, fmt.Errorf("calculator: %w", err)
	}
	var v int64
	switch op {
	case world.Add:
		v = x + y
	case world.Sub:
		v = x - y
	case world.Mul:
		v = x * y
	}
	reply := world.Boxed(v)
	if q == c.slip && c.slipped.CompareAndSwap(false, true) {
		reply = world.Boxed(v + 1)
	} else if text, _, err := world.SolverAnswer(op, x, y); err == nil {
		reply = text // the trained solver's whole answer, as the transcripts hold it
	}
	return &delegate.Response{Model: c.Name(), Choices: []delegate.Choice{{Message: delegate.Assistant(reply), FinishReason: "stop"}}}, nil
}

// firstLiteral is the first step of p whose operands are in the text.
func firstLiteral(p *world.Problem) int {
	for i, s := range p.Steps {
		if s.X.Ref == world.Literal && s.Y.Ref == world.Literal {
			return i
		}
	}
	return 0
}

// answerWithSlip is p's answer under slip. The first step whose operands
// are in the text comes back one too large, and later steps go on from it.
func answerWithSlip(p *world.Problem, slip bool) int64 {
	v := make([]int64, len(p.Steps))
	first := firstLiteral(p)
	val := func(o world.Operand) int64 {
		if o.Ref == world.Literal {
			return o.Value
		}
		return v[o.Ref]
	}
	for i, s := range p.Steps {
		x, y := val(s.X), val(s.Y)
		switch s.Op {
		case world.Add:
			v[i] = x + y
		case world.Sub:
			v[i] = x - y
		case world.Mul:
			v[i] = x * y
		}
		if slip && i == first {
			v[i]++
		}
	}
	return v[len(v)-1]
}

// TestScriptedPolicies runs the world's scripted policies under route. One
// solver computes; another slips once. Each policy must say its
// transcript.Route transcript, billed as the world bills it, and carry the
// solver's answers through.
func TestScriptedPolicies(t *testing.T) {
	problems, err := world.Generate(world.DefaultConfig(), 7, world.Test, 20)
	if err != nil {
		t.Fatal(err)
	}
	scfg := transcript.StrategyConfig()
	scfg.MaxTurns = 8
	run := func(t *testing.T, prog delegate.Model, p *world.Problem, calc *calculator) *delegate.Trace {
		st, err := strategy.New(strategy.NameRoute, strategy.Roles{
			Strong: delegate.Agent{Role: RoleDelegator, Model: &conversation{m: prog}},
			Weak:   delegate.Agent{Role: RoleSubagent, Model: calc},
		}, scfg)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := st.Run(context.Background(), p.Text, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	policies := map[string]world.Policy{"oracle": world.Selective} // with a solver that is always right
	for mask := range uint(8) {
		policies[world.PositionRuleName(mask, 3)] = world.PositionRule(mask)
	}
	for name, pol := range policies {
		t.Run(name, func(t *testing.T) {
			decide := scripted.FromPolicy(pol)
			if name == "oracle" {
				decide = scripted.Oracle(&calculator{})
			}
			prog := scripted.New(name, problems, decide)
			for _, p := range problems {
				calc := &calculator{}
				tr := run(t, prog, p, calc)
				ep := transcript.Route(p, pol)
				delegated := 0
				for _, d := range ep.Delegated {
					if d {
						delegated++
					}
				}
				if got := int(calc.calls.Load()); got != delegated {
					t.Errorf("%s: %d solver calls, want %d", p.ID, got, delegated)
				}
				if !world.Correct(tr.Answer, p.Answer) {
					t.Errorf("%s: answer %q, want %d", p.ID, tr.Answer, p.Answer)
				}
				// Billed as the world bills the policy's transcript,
				// earlier turns cached.
				if got, want := tr.Roles[RoleDelegator].Usage, ep.Bill(false).Delegator; got != want {
					t.Errorf("%s: delegator usage %+v, the transcript's %+v", p.ID, got, want)
				}
				if got := labelDelegated(tr)[LabelDelegated]; len(got) != delegated {
					t.Errorf("%s: labelled %q, want %d delegated steps", p.ID, got, delegated)
				}
			}
		})
	}
	t.Run("always, the solver slips", func(t *testing.T) {
		prog := scripted.New("always", problems, scripted.FromPolicy(world.Always))
		for _, p := range problems {
			calc := &calculator{slip: p.Steps[firstLiteral(p)].Expr()}
			tr := run(t, prog, p, calc)
			if want := answerWithSlip(p, true); !world.Correct(tr.Answer, want) {
				t.Errorf("%s: answer %q, want %d (the solver's answers carried through)", p.ID, tr.Answer, want)
			}
		}
	})
	if _, err := scripted.New("x", problems, scripted.FromPolicy(world.Always)).Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User("not a problem")}}); err == nil {
		t.Error("an unknown problem: no error")
	}
}

// echo answers with a fixed reply and reports the prompt ids.
type echo struct{ reply string }

func (e echo) Name() string { return "echo" }

func (e echo) Chat(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
	prompt := tokenizer.Render(req.Messages, req.Tools, true)
	var lps []delegate.TokenLogprob
	for _, id := range append(tokenizer.Encode(e.reply), tokenizer.End) {
		lps = append(lps, delegate.TokenLogprob{TokenID: id})
	}
	return &delegate.Response{Choices: []delegate.Choice{{Message: delegate.Assistant(e.reply), Logprobs: lps}},
		PromptTokenIDs: prompt, Usage: delegate.Usage{PromptTokens: len(prompt), CompletionTokens: len(lps)}}, nil
}

func TestConversationCachesEarlierTurns(t *testing.T) {
	c := &conversation{m: echo{reply: "hello"}}
	msgs := []delegate.Message{delegate.System("s"), delegate.User("first question")}
	r1, err := c.Chat(context.Background(), &delegate.Request{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Usage.CachedTokens != 0 {
		t.Errorf("first call: cached %d, want 0", r1.Usage.CachedTokens)
	}
	msgs = append(msgs, delegate.Assistant("hello"), delegate.User("second"))
	r2, err := c.Chat(context.Background(), &delegate.Request{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	// The second prompt starts with the first prompt and its reply.
	if got, want := r2.Usage.CachedTokens, r1.Usage.PromptTokens+r1.Usage.CompletionTokens; got != want {
		t.Errorf("second call: cached %d, want %d (previous prompt and reply)", got, want)
	}
	if r2.Usage.CachedTokens >= r2.Usage.PromptTokens {
		t.Errorf("cached %d of %d prompt tokens", r2.Usage.CachedTokens, r2.Usage.PromptTokens)
	}
}

func TestVote(t *testing.T) {
	tests := []struct {
		texts []string
		want  string
		n     int
	}{
		{[]string{"<answer>3</answer>", "<answer>4</answer>", "<answer>4</answer>"}, "4", 2},
		{[]string{"<answer>5</answer>", "<answer>4</answer>"}, "5", 1}, // tie: the first seen
		{[]string{"", "no number"}, "", 0},
		{[]string{"x", "<answer>7</answer>", "<answer>oops</answer>"}, "7", 1},
	}
	for _, tt := range tests {
		got, n := vote(tt.texts)
		if got != tt.want || n != tt.n {
			t.Errorf("vote(%q) = %q, %d; want %q, %d", tt.texts, got, n, tt.want, tt.n)
		}
	}
}

// FuzzAlwaysDelegate feeds the scripted always-delegate policy arbitrary
// solver answers and tool call ids. It must never panic, and must either
// ask for the next steps or box an integer.
func FuzzAlwaysDelegate(f *testing.F) {
	problems, err := world.Generate(world.DefaultConfig(), 3, world.Test, 4)
	if err != nil {
		f.Fatal(err)
	}
	a := scripted.New("always-delegate", problems, scripted.FromPolicy(world.Always))
	f.Add(0, "\\boxed{12}", "call_1", "call_1", 1)
	f.Add(1, "6772 0496\n\\boxed{9716}", "call_1", "x", 2)
	f.Add(2, "", "", "", 0)
	f.Add(3, "\\boxed{-5}", "call_1", "call_1", 5)
	f.Fuzz(func(t *testing.T, pi int, answer, callID, resultID string, turns int) {
		p := problems[(pi%len(problems)+len(problems))%len(problems)]
		msgs := []delegate.Message{delegate.System("s"), delegate.User(p.Text)}
		for range turns % 6 {
			msgs = append(msgs,
				delegate.Message{Role: delegate.RoleAssistant, ToolCalls: []delegate.ToolCall{{ID: callID, Name: strategy.DelegateToolName, Arguments: `{"question":"1+1"}`}}},
				delegate.ToolResult(resultID, answer))
		}
		resp, err := a.Chat(context.Background(), &delegate.Request{Messages: msgs, Tools: []delegate.Tool{strategy.DelegateTool}})
		if err != nil {
			t.Fatalf("a known problem: %v", err)
		}
		msg := resp.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			if _, err := world.ParseAnswer(msg.Content); err != nil {
				t.Errorf("final reply %q holds no integer: %v", msg.Content, err)
			}
		}
		for _, tc := range msg.ToolCalls {
			q, err := strategy.ParseDelegateArgs(tc.Arguments)
			if err != nil || q == "" {
				t.Errorf("tool call arguments %q: %v", tc.Arguments, err)
			}
		}
		if resp.Usage.CompletionTokens < 1 || resp.Usage.PromptTokens != len(resp.PromptTokenIDs) {
			t.Errorf("usage %+v with %d prompt ids", resp.Usage, len(resp.PromptTokenIDs))
		}
	})
}

// The delegator's route prompt is the world's route transcript up to its
// first reply. The tool is declared as in pretraining.
func TestRoutePromptIsTheTranscripts(t *testing.T) {
	problems, err := world.Generate(world.DefaultConfig(), 5, world.Test, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		var got []int
		rec := recorder{f: func(req *delegate.Request) {
			if got == nil {
				got = tokenizer.Render(req.Messages, req.Tools, true)
			}
		}}
		st, err := strategy.New(strategy.NameRoute, strategy.Roles{
			Strong: delegate.Agent{Model: rec},
			Weak:   delegate.Agent{Model: &calculator{}},
		}, transcript.StrategyConfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Run(context.Background(), p.Text, nil); err != nil {
			t.Fatal(err)
		}
		tr := transcript.Route(p, world.Never).Delegator[0]
		want := tokenizer.Render(tr.Messages[:2], tr.Tools, true)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the first route prompt is not the transcript's:\n got %q\nwant %q", p.ID, tokenizer.Decode(got), tokenizer.Decode(want))
		}
	}
}

// recorder answers every request with a boxed 0 and shows it to f.
type recorder struct{ f func(*delegate.Request) }

func (r recorder) Name() string { return "recorder" }

func (r recorder) Chat(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
	r.f(req)
	return &delegate.Response{Choices: []delegate.Choice{{Message: delegate.Assistant(world.Boxed(0)), FinishReason: "stop"}}}, nil
}

// TestScratchPeer checks the peer that solves with scratch work. It asks
// its model in single's format, under the request's sampling, with room
// for the scratch work. It hands back the reply condensed to lead's peer
// format, and keeps the whole reply's usage.
func TestScratchPeer(t *testing.T) {
	ps, err := world.Generate(world.DefaultConfig(), 5, world.Test, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := ps[0]
	scratch := transcript.Single(p).Delegator[0].Messages[2].Content
	var got *delegate.Request
	m := modeltest.New("peer", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		got = req
		return &delegate.Response{Choices: []delegate.Choice{{Message: delegate.Assistant(scratch), FinishReason: "stop"}},
			Usage: delegate.Usage{PromptTokens: 40, CompletionTokens: 200}}, nil
	})
	peer := scratchPeer{m: m, maxTokens: 300}
	temp, seed := 0.7, int64(9)
	lead := transcript.PeerTranscript(p).Messages[:2]
	resp, err := peer.Chat(context.Background(), &delegate.Request{Messages: lead, Temperature: &temp, Seed: &seed, MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := transcript.PeerAnswer(p, -1, 0)
	if resp.Text() != want {
		t.Errorf("answer %q, want the condensed %q", resp.Text(), want)
	}
	if resp.Usage.CompletionTokens != 200 {
		t.Errorf("usage %+v, want the whole reply's", resp.Usage)
	}
	if !reflect.DeepEqual(got.Messages, transcript.SingleMessages(p.Text)) || got.MaxTokens != 300 || *got.Temperature != 0.7 || *got.Seed != 9 {
		t.Errorf("request %+v: want single's messages, 300 tokens, the caller's temperature and seed", got)
	}
	if _, err := peer.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.System("s")}}); err == nil {
		t.Error("a request without a question: no error")
	}
}

// A trained seat's model is one wrapper deep. Its agent's Sampler, which
// Recorder.Call applies, samples it as the policy: temperature, token cap and
// a seed per call in order. The conversation calls the model itself. An
// untrained seat has no Sampler.
func TestSeatAgentsSampleTheTrainedSeat(t *testing.T) {
	var got []*delegate.Request
	m := modeltest.New("policy", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		got = append(got, req)
		return echo{reply: "hi"}.Chat(context.Background(), req)
	})
	r := &runner{}
	cfg := rl.Config{Temperature: 1, Seed: 3}
	trained, untrained := seat{m: m, trained: true, maxNew: 16}, seat{m: m}
	d, s := r.seatAgents(trained.m, untrained.m)
	d.Sampler, s.Sampler = trained.sampler(cfg, 2, 1), untrained.sampler(cfg, 2, 1)
	if c, ok := d.Model.(*conversation); !ok || c.m != delegate.Model(m) {
		t.Fatalf("delegator's model %T: want a conversation over the model itself", d.Model)
	}
	if s.Sampler != nil || s.Model != delegate.Model(m) {
		t.Errorf("untrained seat: sampler %v, model %T; want none and the model itself", s.Sampler, s.Model)
	}
	rec := delegate.NewRecorder("test", "x", nil)
	for range 2 {
		if _, err := rec.Call(context.Background(), nil, "turn", d, &delegate.Request{Messages: []delegate.Message{delegate.User("x")}, MaxTokens: 100}); err != nil {
			t.Fatal(err)
		}
	}
	seed := int64(rl.RolloutSeed(3, 2, 1) & (1<<62 - 1))
	for i, r := range got {
		if !r.Logprobs || r.Temperature == nil || *r.Temperature != 1 || r.MaxTokens != 16 || r.Seed == nil || *r.Seed != seed+int64(i) {
			t.Errorf("request %d: logprobs %v, temperature %v, max tokens %d, seed %v; want true, 1, 16, %d", i, r.Logprobs, r.Temperature, r.MaxTokens, r.Seed, seed+int64(i))
		}
	}
}
