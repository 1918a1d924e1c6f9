package openenv

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

var canonicalCases = []struct {
	name, in, want string
}{
	{"none", "", "{}"},
	{"empty", `{ }`, `{}`},
	{"compact", `{"question":"47*28"}`, `{"question":"47*28"}`},
	{"html as written", `{"question":"3<4 & 4>2"}`, `{"question":"3<4 & 4>2"}`},
	{"html escaped", `{"question":"3\u003c4 \u0026 4\u003E2"}`, `{"question":"3<4 & 4>2"}`},
	{"other escapes", `{"question":"\u0034\/7"}`, `{"question":"4/7"}`},
	{"spaces", "{ \"question\" :\n\t\"a b\" }", `{"question":"a b"}`},
	{"keys sorted", `{"z":1,"a":{"y":true,"b":null}}`, `{"a":{"b":null,"y":true},"z":1}`},
	{"numbers as written", `{"answer":1.50,"n":-0,"e":1E3}`, `{"answer":1.50,"e":1E3,"n":-0}`},
	{"arrays kept in order", `{"a":[3, "<", {"b":1,"a":2}]}`, `{"a":[3,"<",{"a":2,"b":1}]}`},
	{"control characters escaped", `{"q":"a\u000ab\tc\"d\\"}`, `{"q":"a\nb\tc\"d\\"}`},
	{"unicode as written", `{"q":"\u00e9 é ∑"}`, `{"q":"é é ∑"}`},
	{"duplicate keys: the last", `{"q":"a","q":"b"}`, `{"q":"b"}`},
	{"empty key first", `{"":1,"a":2}`, `{"":1,"a":2}`},
	{"line separator escaped", "{\"q\":\"a\u2028b\"}", `{"q":"a\u2028b"}`},
}

func TestCanonicalArgs(t *testing.T) {
	for _, tt := range canonicalCases {
		t.Run(tt.name, func(t *testing.T) {
			var raw json.RawMessage
			if tt.in != "" {
				raw = json.RawMessage(tt.in)
			}
			got, err := canonicalArgs(raw)
			if err != nil || got != tt.want {
				t.Errorf("canonicalArgs(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
}

// FuzzCanonicalArgs: the canonical form is canonical, and isCanonical's
// shortcut gives what the decode gives.
func FuzzCanonicalArgs(f *testing.F) {
	for _, tt := range canonicalCases {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		raw := json.RawMessage(in)
		if !json.Valid(raw) || !startsObject(raw) {
			return // arguments come decoded: a valid object
		}
		got, err := canonicalArgs(raw)
		if err != nil {
			t.Fatalf("canonicalArgs(%q): %v", in, err)
		}
		if isCanonical(raw) && got != in {
			t.Errorf("isCanonical(%q), but the canonical form is %q", in, got)
		}
		if !isCanonical([]byte(got)) && !strings.ContainsAny(got[1:], "{[\\\u2028\u2029") {
			t.Errorf("the canonical form %q of %q: isCanonical false, want true for a flat object without escapes", got, in)
		}
		again, err := canonicalArgs(json.RawMessage(got))
		if err != nil || again != got {
			t.Errorf("canonicalArgs(%q) = %q, %v; want it unchanged", got, again, err)
		}
	})
}

// seen is what a client reads back from a step: the observation, reward and done.
// The wall time of the sub-agent's calls is zeroed: it differs between runs.
type seen struct {
	Obs    DelegationObservation
	Reward *float64
	Done   bool
}

// rawDriver runs an episode with actions written by hand, bytes as given, over one transport.
type rawDriver struct {
	reset func(seed int64)
	step  func(tool, args string) seen
	state func() DelegationState
	close func()
}

// seenOf reads a step's answer: an observation, or a tools/call result, which holds the observation's members.
func seenOf(t *testing.T, obs json.RawMessage, reward *float64, done bool) seen {
	t.Helper()
	s := seen{Reward: reward, Done: done}
	if err := json.Unmarshal(obs, &s.Obs); err != nil {
		t.Fatalf("decode observation %s: %v", obs, err)
	}
	s.Obs.Spend.CriticalPathS = 0
	return s
}

// rpcSeen reads a tools/call response.
func rpcSeen(t *testing.T, b []byte) seen {
	t.Helper()
	var resp struct {
		Result *struct {
			Reward *float64 `json:"reward"`
			Done   bool     `json:"done"`
		} `json:"result"`
		Error *RPCError `json:"error"`
	}
	if err := json.Unmarshal(b, &resp); err != nil || resp.Result == nil {
		t.Fatalf("tools/call: %s, %v", b, err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	return seenOf(t, all["result"], resp.Result.Reward, resp.Result.Done)
}

func rpcState(t *testing.T, b []byte) DelegationState {
	t.Helper()
	var resp struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(b, &resp); err != nil || resp.Result == nil {
		t.Fatalf("state: %s, %v", b, err)
	}
	return stateOf(t, resp.Result)
}

func toolsCallParams(tool, args string) string {
	return `{"name":"` + tool + `","arguments":` + args + `}`
}

// drivers are the transports that run episodes: the WebSocket's steps and mcp messages,
// HTTP MCP sessions and MCP's WebSocket.
func drivers(t *testing.T, c *Client) map[string]func() rawDriver {
	ctx := context.Background()
	return map[string]func() rawDriver{
		"ws step": func() rawDriver {
			s, err := c.Dial(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return rawDriver{
				reset: func(seed int64) {
					if _, err := s.Reset(ctx, ResetRequest{Seed: &seed}); err != nil {
						t.Fatal(err)
					}
				},
				step: func(tool, args string) seen {
					m, err := s.ExchangeRaw(ctx, []byte(`{"type":"step","data":{"type":"call_tool","tool_name":"`+tool+`","arguments":`+args+`}}`))
					if err != nil || m.Type != MsgObservation {
						t.Fatalf("step %s: %+v, %v", args, m, err)
					}
					var res Result
					if err := json.Unmarshal(m.Data, &res); err != nil {
						t.Fatal(err)
					}
					return seenOf(t, res.Observation, res.Reward, res.Done)
				},
				state: func() DelegationState {
					raw, err := s.State(ctx)
					if err != nil {
						t.Fatal(err)
					}
					return stateOf(t, raw)
				},
				close: func() { s.Close() },
			}
		},
		"ws mcp": func() rawDriver {
			s, err := c.Dial(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return rawDriver{
				reset: func(seed int64) {
					if _, err := s.Reset(ctx, ResetRequest{Seed: &seed}); err != nil {
						t.Fatal(err)
					}
				},
				step: func(tool, args string) seen {
					m, err := s.ExchangeRaw(ctx, []byte(`{"type":"mcp","data":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+toolsCallParams(tool, args)+`}}`))
					if err != nil || m.Type != MsgMCP {
						t.Fatalf("tools/call %s: %+v, %v", args, m, err)
					}
					return rpcSeen(t, m.Data)
				},
				state: func() DelegationState {
					raw, err := s.State(ctx)
					if err != nil {
						t.Fatal(err)
					}
					return stateOf(t, raw)
				},
				close: func() { s.Close() },
			}
		},
		"http mcp": func() rawDriver {
			m := c.OpenMCP()
			return rawDriver{
				reset: func(seed int64) {
					if _, err := m.Reset(ctx, ResetRequest{Seed: &seed}); err != nil {
						t.Fatal(err)
					}
				},
				step: func(tool, args string) seen {
					// MCPSession writes the arguments' bytes as given.
					res, err := m.Step(ctx, ToolAction{Type: ActionCallTool, ToolName: tool, Arguments: json.RawMessage(args)})
					if err != nil {
						t.Fatalf("tools/call %s: %v", args, err)
					}
					return seenOf(t, res.Observation, res.Reward, res.Done)
				},
				state: func() DelegationState {
					raw, err := m.State(ctx)
					if err != nil {
						t.Fatal(err)
					}
					return stateOf(t, raw)
				},
				close: func() { m.Close() },
			}
		},
		"mcp websocket": func() rawDriver {
			conn := dialMCP(t, c)
			send := func(raw string) []byte {
				t.Helper()
				if err := conn.Write(ctx, websocket.MessageText, []byte(raw)); err != nil {
					t.Fatal(err)
				}
				_, b, err := conn.Read(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			return rawDriver{
				reset: func(seed int64) {
					b := send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"openenv/session/create","params":{"seed":%d}}`, seed))
					if f := decodeFrame(t, b); f.resp.Error != nil {
						t.Fatalf("session/create: %s", b)
					}
				},
				step: func(tool, args string) seen {
					return rpcSeen(t, send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+toolsCallParams(tool, args)+`}`))
				},
				state: func() DelegationState {
					return rpcState(t, send(`{"jsonrpc":"2.0","id":1,"method":"openenv/session/state","params":{}}`))
				},
				close: func() { conn.Close(websocket.StatusNormalClosure, "") },
			}
		},
	}
}

// TestBillIgnoresEncoding sends one episode's calls encoded in several ways over every transport.
// HTML escaped or not, spaced, with other escapes and keys reordered, each gives the same observations and state.
// Those are the in-process environment's for the canonical form, and the bill is that form's.
func TestBillIgnoresEncoding(t *testing.T) {
	srv, d := newDelegationServer(t, DelegationConfig{}, nil)
	c := serve(t, srv, "")
	ctx := context.Background()
	const seed = 2
	p, err := d.Problem(seed)
	if err != nil {
		t.Fatal(err)
	}
	const canonical = `{"note":"a&b","question":"Is 3<4 & 4>2?"}`
	delegates := []string{
		canonical,
		`{"note":"a\u0026b","question":"Is 3\u003c4 \u0026 4\u003e2?"}`, // json.Marshal's
		"{ \"question\" : \"Is 3<4 & 4>2?\" ,\n\t\"note\" : \"a&b\" }",  // spaced, keys reordered
		`{"question":"\u0049s 3\u003C4 & 4>2?","note":"a\u0026b"}`,
	}
	ans := fmt.Sprint(p.Answer)
	answers := []string{
		`{"answer":"` + ans + `"}`,
		`{"answer":"` + ans[:len(ans)-1] + `\u003` + ans[len(ans)-1:] + `"}`, // its last digit escaped
		`{ "answer" : "` + ans + `" }`,
		`{"answer":` + ans + `}`,
	}

	// The reference: the in-process environment given the canonical form.
	env, err := d.New()
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if _, err := env.Reset(ctx, ptr[int64](seed), ""); err != nil {
		t.Fatal(err)
	}
	var want []seen
	for _, a := range []struct{ tool, args string }{{ToolDelegate, canonical}, {ToolAnswer, answers[0]}} {
		obs, err := env.Step(ctx, json.RawMessage(`{"tool_name":"`+a.tool+`","arguments":`+a.args+`}`))
		if err != nil {
			t.Fatal(err)
		}
		res, err := obs.Result()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, seenOf(t, res.Observation, res.Reward, res.Done))
	}
	wantState, ok := env.State().(DelegationState)
	if !ok {
		t.Fatalf("state %T", env.State())
	}
	wantState.EpisodeID, wantState.Spend.CriticalPathS = nil, 0
	if !want[1].Done || wantState.Correct == nil || !*wantState.Correct || wantState.Spend.Subagent.Calls != 1 {
		t.Fatalf("the reference episode: %+v, state %+v; want it done, correct, one sub-agent call", want[1], wantState)
	}

	// The delegate call is billed as the canonical form.
	msgs := append(transcript.RouteMessages(p.Text), delegate.Message{Role: delegate.RoleAssistant,
		ToolCalls: []delegate.ToolCall{{Name: ToolDelegate, Arguments: canonical}}})
	u, _ := transcript.Transcript{Kind: transcript.KindRoute, Messages: msgs, Tools: billTools}.Usage(false)
	if got := want[0].Obs.Spend.Delegator.CompletionTokens; got != u.CompletionTokens {
		t.Errorf("delegator tokens after the call: got %d, want the canonical form's %d", got, u.CompletionTokens)
	}

	for name, open := range drivers(t, c) {
		for i, args := range delegates {
			t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
				dr := open()
				defer dr.close()
				dr.reset(seed)
				got := []seen{dr.step(ToolDelegate, args), dr.step(ToolAnswer, answers[i])}
				for j := range got {
					if !reflect.DeepEqual(got[j], want[j]) {
						t.Errorf("step %d: got %+v, want %+v", j+1, got[j], want[j])
					}
				}
				st := dr.state()
				st.EpisodeID, st.Spend.CriticalPathS = nil, 0
				if !reflect.DeepEqual(st, wantState) {
					t.Errorf("state: got %+v, want %+v", st, wantState)
				}
			})
		}
	}
	waitActive(t, srv, 0)
}

// templatePolicy delegates a question holding <, > and &, then each step of p, one call a turn,
// then replies with p's answer, boxed.
// It reports its replies' tokens under the chat template, as a local model counts what it generated.
func templatePolicy(p *world.Problem) *modeltest.Model {
	return modeltest.New("policy", func(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
		done := 0
		for _, m := range req.Messages {
			if m.Role == delegate.RoleTool {
				done++
			}
		}
		var resp *delegate.Response
		switch {
		case done == 0:
			resp = modeltest.ToolCalls(modeltest.Call("c0", ToolDelegate, `{"question":"Is 3<4 & 4>2?"}`))
		case done <= len(p.Steps):
			args, _ := MarshalUnescaped(map[string]string{"question": p.Steps[done-1].Expr()}) // strings always encode
			resp = modeltest.ToolCalls(modeltest.Call(fmt.Sprintf("c%d", done), ToolDelegate, string(args)))
		default:
			resp = modeltest.Text(world.Boxed(p.Answer))
		}
		_, spans := tokenizer.RenderSpans([]delegate.Message{resp.Choices[0].Message}, nil, false)
		return modeltest.WithUsage(resp, len(tokenizer.Render(req.Messages, req.Tools, true)), spans[0].End-spans[0].Body), nil
	})
}

// toolTexts are the tool messages of a policy's last request.
func toolTexts(m *modeltest.Model) []string {
	reqs := m.Requests()
	var out []string
	for _, msg := range reqs[len(reqs)-1].Messages {
		if msg.Role == delegate.RoleTool {
			out = append(out, msg.Content)
		}
	}
	return out
}

// TestHTMLQuestionEqualsInProcessRoute plays a policy that delegates a question holding <, > and &.
// Over the WebSocket and HTTP MCP, its reward, delegator tokens and turns, sub-agent tokens and dollars,
// and the results it reads equal those of in-process route with the same models.
func TestHTMLQuestionEqualsInProcessRoute(t *testing.T) {
	prices := world.DefaultPrices()
	scfg := transcript.StrategyConfig()
	srv, d := newDelegationServer(t, DelegationConfig{Generation: &scfg.Weak}, nil)
	// An HTTP MCP step runs the solver within its request: under the race
	// detector at a load of 40 it outlasted serve's 300 ms write timeout,
	// and the client read EOF, as in TestEqualsInProcessRoute.
	c := serveWith(t, srv, "", edge.DefaultTimeouts())
	ctx := context.Background()
	rew := world.DefaultReward()
	const seed = 5
	p, err := d.Problem(seed)
	if err != nil {
		t.Fatal(err)
	}
	inproc := templatePolicy(p)
	route, err := strategy.New(strategy.NameRoute, strategy.Roles{
		Strong: delegate.Agent{Role: strategy.RoleStrong, Model: inproc, Price: prices.Delegator},
		Weak:   delegate.Agent{Role: strategy.RoleWeak, Model: fakeSolver(), Price: prices.Solver},
	}, scfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := route.Run(ctx, p.Text, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := world.Verify(p.Task(), tr.Answer)
	if err != nil {
		t.Fatal(err)
	}
	correct := v.Correct && tr.Failure == ""
	strong, weak := tr.Roles[strategy.RoleStrong], tr.Roles[strategy.RoleWeak]
	want := world.RewardOf(rew, correct, world.Account{Delegator: strong.Usage, SubagentCalls: weak.Calls})
	if !correct || strong.Calls != len(p.Steps)+2 || weak.Calls != len(p.Steps)+1 {
		t.Fatalf("in-process route: correct %v, strong %+v, weak %+v; want correct, %d turns", correct, strong, weak, len(p.Steps)+2)
	}
	wantTexts := toolTexts(inproc)
	if !strings.Contains(wantTexts[0], "cannot") {
		t.Fatalf("route's first result %q: want the solver's refusal", wantTexts[0])
	}

	ws, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Stepper{ws, c.OpenMCP()} {
		t.Run(fmt.Sprintf("%T", s), func(t *testing.T) {
			model := templatePolicy(p)
			policy := Policy{Agent: delegate.Agent{Role: "policy", Model: model, Price: prices.Delegator}, Messages: transcript.RouteMessages,
				MaxTokens: scfg.Strong.MaxTokens, MaxTurns: scfg.MaxTurns, AnswerInText: true, NamesOnly: true}
			pl, err := policy.Play(ctx, s, seed, nil)
			if cerr := s.Close(); cerr != nil {
				t.Errorf("close: %v", cerr)
			}
			if err != nil {
				t.Fatal(err)
			}
			if pl.Reward == nil || pl.Spend == nil || pl.Correct == nil {
				t.Fatalf("played %+v", pl)
			}
			sp := pl.Spend
			if math.Abs(*pl.Reward-want) > 1e-9 || *pl.Correct != correct {
				t.Errorf("reward %v correct %v, want route's %v, %v", *pl.Reward, *pl.Correct, want, correct)
			}
			if sp.Delegator.CompletionTokens != strong.Usage.CompletionTokens || sp.Delegator.Calls != strong.Calls {
				t.Errorf("delegator %+v, want route's strong %d tokens in %d turns", sp.Delegator, strong.Usage.CompletionTokens, strong.Calls)
			}
			if sp.Subagent.Calls != weak.Calls || sp.Subagent.PromptTokens != weak.Usage.PromptTokens ||
				sp.Subagent.CompletionTokens != weak.Usage.CompletionTokens || math.Abs(sp.Subagent.Dollars-weak.Cost) > 1e-12 {
				t.Errorf("sub-agent %+v, want route's weak %+v ($%v)", sp.Subagent, weak.Usage, weak.Cost)
			}
			if got := toolTexts(model); !reflect.DeepEqual(got, wantTexts) {
				t.Errorf("the policy read %q, want route's %q", got, wantTexts)
			}
		})
	}
	waitActive(t, srv, 0)
}
