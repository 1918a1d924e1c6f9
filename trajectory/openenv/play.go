package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/delegatelab/delegate"
)

// Stepper runs episodes on one environment: a WebSocket Session, or an
// HTTP MCPSession. Its calls must not overlap.
type Stepper interface {
	Reset(ctx context.Context, req ResetRequest) (Result, error)
	Step(ctx context.Context, action any) (Result, error)
	State(ctx context.Context) (json.RawMessage, error)
	Close() error
}

// Policy is a model acting in an environment through tool calls. The
// observation's tools become its request's tools, its tool calls become
// steps, and their results come back as tool messages.
type Policy struct {
	Agent delegate.Agent
	// Messages starts an episode's conversation from its task: the first
	// observation's task field, or the observation's JSON without one.
	Messages func(task string) []delegate.Message
	// Temperature of the policy's requests. Default 0.
	Temperature float64
	// MaxTokens bounds each reply. Default 0: the backend's.
	MaxTokens int
	// MaxTurns bounds the policy's calls in an episode. Default 16.
	MaxTurns int
	// AnswerInText leaves AnswerTool out of the request's tools.
	// The policy then answers in a reply without tool calls, as route's strong model does.
	AnswerInText bool
	// NamesOnly declares the tools by name alone, as the world's shipped
	// models were trained to see them (transcript.Tool).
	NamesOnly bool
}

// Played is one episode's outcome.
type Played struct {
	Seed   int64
	Task   string
	Answer string   // the policy's last text
	Reward *float64 // the last step's reward
	Done   bool
	Steps  int
	// Correct and Spend are the state's at the end, when the environment
	// keeps them, as the delegation environment does.
	Correct *bool
	Spend   *Spend
	// Trace holds the policy's calls; the environment's own calls are in
	// Spend.
	Trace *delegate.Trace
}

// AnswerTool is the tool that a policy's reply without tool calls goes to.
// The reply's text goes as {"answer": TEXT}, when the environment offers the tool.
const AnswerTool = ToolAnswer

// Play runs the episode of seed on s. A reply without tool calls ends the
// episode: through AnswerTool when the environment offers one, else
// unfinished. A tool call the environment refuses is told to the policy
// as an error, and the episode goes on. Errors are the transport's and
// the policy model's.
func (p Policy) Play(ctx context.Context, s Stepper, seed int64, events chan<- delegate.Event) (Played, error) {
	pl := Played{Seed: seed}
	first, err := startEpisode(ctx, s, &pl)
	if err != nil {
		return pl, err
	}
	tools, hasAnswer := p.requestTools(first.Tools)
	rec := delegate.NewRecorder("env", pl.Task, events)
	failure, err := p.turns(ctx, s, &pl, rec, tools, hasAnswer)
	if err != nil {
		return pl, err
	}
	if !pl.Done && failure == (delegate.Failure{}) {
		failure = delegate.Failed(delegate.FailureAnswerFormat, "the policy stopped without ending the episode")
	}
	pl.Trace = rec.Finish(pl.Answer, failure)
	err = readEndState(ctx, s, &pl) // before pl is returned: it sets Correct and Spend
	return pl, err
}

// firstObservation is what Play reads of an episode's first observation.
type firstObservation struct {
	Task  *string `json:"task"`
	Tools []Tool  `json:"tools"`
}

// startEpisode resets pl's seed and reads the task into pl. It lists the tools
// when the first observation carries none.
func startEpisode(ctx context.Context, s Stepper, pl *Played) (firstObservation, error) {
	var first firstObservation
	res, err := s.Reset(ctx, ResetRequest{Seed: &pl.Seed})
	if err != nil {
		return first, fmt.Errorf("reset seed %d: %w", pl.Seed, err)
	}
	if err := json.Unmarshal(res.Observation, &first); err != nil {
		return first, fmt.Errorf("reset seed %d: read observation: %w", pl.Seed, err)
	}
	pl.Task = string(res.Observation)
	if first.Task != nil {
		pl.Task = *first.Task
	}
	if first.Tools == nil {
		lres, err := s.Step(ctx, ToolAction{Type: ActionListTools})
		if err != nil {
			return first, fmt.Errorf("list tools of seed %d: %w", pl.Seed, err)
		}
		if err := json.Unmarshal(lres.Observation, &first); err != nil {
			return first, fmt.Errorf("list tools of seed %d: %w", pl.Seed, err)
		}
	}
	return first, nil
}

// requestTools are the environment's tools as the policy's requests
// declare them, and whether the environment offers AnswerTool.
func (p Policy) requestTools(envTools []Tool) (tools []delegate.Tool, hasAnswer bool) {
	for _, t := range envTools {
		hasAnswer = hasAnswer || t.Name == AnswerTool
		switch {
		case t.Name == AnswerTool && p.AnswerInText:
		case p.NamesOnly:
			tools = append(tools, delegate.Tool{Name: t.Name})
		default:
			tools = append(tools, delegate.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
		}
	}
	return tools, hasAnswer
}

// turns asks the policy turn by turn and steps its tool calls. It stops
// when the episode is done, a reply has none, or at MaxTurns. It returns the failure
// to record when the policy still called tools at the last turn.
func (p Policy) turns(ctx context.Context, s Stepper, pl *Played, rec *delegate.Recorder, tools []delegate.Tool, hasAnswer bool) (delegate.Failure, error) {
	msgs := p.Messages(pl.Task)
	maxTurns := p.MaxTurns
	if maxTurns <= 0 {
		maxTurns = 16
	}
	var failure delegate.Failure
	for turn := 1; turn <= maxTurns && !pl.Done; turn++ {
		t := p.Temperature
		req := &delegate.Request{Messages: append([]delegate.Message(nil), msgs...), Tools: tools, ToolChoice: "auto", Temperature: &t, MaxTokens: p.MaxTokens}
		resp, err := rec.Call(ctx, nil, "turn "+strconv.Itoa(turn), p.Agent, req)
		if err != nil {
			pl.Trace = rec.Finish(pl.Answer, delegate.Failed(delegate.FailureCall, "policy: %v", err))
			return failure, fmt.Errorf("seed %d turn %d: policy: %w", pl.Seed, turn, err)
		}
		out := resp.Choices[0].Message
		pl.Answer = resp.Text()
		if len(out.ToolCalls) == 0 {
			if hasAnswer {
				args, _ := MarshalUnescaped(map[string]string{"answer": pl.Answer}) // a string always encodes
				if _, err := p.step(ctx, s, pl, delegate.ToolCall{Name: AnswerTool, Arguments: string(args)}, turn); err != nil {
					return failure, err
				}
			}
			break
		}
		out.Role = delegate.RoleAssistant
		msgs = append(msgs, out)
		for i, tc := range out.ToolCalls {
			if tc.ID == "" {
				tc.ID = fmt.Sprintf("call_%d_%d", turn, i+1)
				out.ToolCalls[i].ID = tc.ID
			}
			text, err := p.step(ctx, s, pl, tc, turn)
			if err != nil {
				return failure, err
			}
			if pl.Done {
				break // later calls of the turn find no episode
			}
			msgs = append(msgs, delegate.ToolResult(tc.ID, text))
		}
		if turn == maxTurns && !pl.Done {
			failure = delegate.Failed(delegate.FailureMaxTurns, "the policy still called tools in turn %d", turn)
		}
	}
	return failure, nil
}

// readEndState reads the state's correct and spend into pl, when the
// transport serves a state.
func readEndState(ctx context.Context, s Stepper, pl *Played) error {
	raw, err := s.State(ctx)
	if errors.Is(err, ErrNoState) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state of seed %d: %w", pl.Seed, err)
	}
	var st struct {
		Correct *bool  `json:"correct"`
		Spend   *Spend `json:"spend"`
	}
	if json.Unmarshal(raw, &st) == nil {
		pl.Correct, pl.Spend = st.Correct, st.Spend
	}
	return nil
}

// step sends one tool call and returns the text the policy reads back.
// That is the result, or "error: " and why the call failed or was refused.
// The action's metadata names the policy's turn; calls of one reply share it.
func (p Policy) step(ctx context.Context, s Stepper, pl *Played, tc delegate.ToolCall, turn int) (string, error) {
	args := json.RawMessage(tc.Arguments)
	if !isObject(args) {
		return fmt.Sprintf("error: the arguments of %s are not a JSON object", tc.Name), nil
	}
	res, err := s.Step(ctx, ToolAction{Type: ActionCallTool, ToolName: tc.Name, Arguments: args, Metadata: map[string]any{"turn": turn}})
	var e *Error
	var rerr *RPCError
	switch {
	case errors.As(err, &e) && (e.Code == CodeValidationError || e.Status == 422):
		return "error: " + e.Msg, nil
	case errors.As(err, &rerr) && rerr.Code == RPCInvalidParams:
		return "error: " + rerr.Message, nil
	case err != nil:
		return "", fmt.Errorf("seed %d: step %s: %w", pl.Seed, tc.Name, err)
	}
	pl.Steps++
	pl.Done = res.Done
	if res.Reward != nil {
		r := *res.Reward
		pl.Reward = &r
	}
	var o struct {
		Result json.RawMessage `json:"result"`
		Error  *ToolError      `json:"error"`
	}
	if err := json.Unmarshal(res.Observation, &o); err != nil {
		return "", fmt.Errorf("seed %d: step %s: read observation: %w", pl.Seed, tc.Name, err)
	}
	if o.Error != nil {
		return "error: " + o.Error.Message, nil
	}
	var text string
	if json.Unmarshal(o.Result, &text) == nil {
		return text, nil
	}
	return string(bytes.TrimSpace(o.Result)), nil
}

// ErrNoState is what a Stepper's State returns when its transport keeps
// no state to read.
var ErrNoState = errors.New("the transport serves no state")

// MCPSession is an HTTP MCP session: a Stepper over POST /mcp. Its first
// Reset creates the session; Close closes it. Its calls must not
// overlap: they share its buffers.
type MCPSession struct {
	c   *Client
	id  string
	out []byte       // the last request, its buffer reused
	in  bytes.Buffer // the last answer, reused
	// p sends each POST; its proto is nil until the first, or with a
	// cookie jar.
	p poster
}

// OpenMCP returns an MCP session that opens on its first Reset.
func (c *Client) OpenMCP() *MCPSession { return &MCPSession{c: c} }

// Reset starts an episode: the session's first, or its next.
// Its request is written by hand and its answer read by a walk, as Step's.
func (m *MCPSession) Reset(ctx context.Context, req ResetRequest) (Result, error) {
	method := MethodSessionCreate
	if m.id != "" {
		method = MethodSessionReset
	}
	b := append(m.out[:0], `{"jsonrpc":"2.0","method":"`...)
	b = append(b, method...)
	b = append(b, `","params":{"seed":`...)
	if req.Seed != nil {
		b = strconv.AppendInt(b, *req.Seed, 10)
	} else {
		b = append(b, "null"...)
	}
	if req.EpisodeID != nil {
		b = append(b, `,"episode_id":`...)
		b = appendUnescaped(b, *req.EpisodeID)
	}
	if m.id != "" {
		b = append(b, `,"session_id":`...)
		b = appendUnescaped(b, m.id)
	}
	b = append(b, `},"id":1}`...)
	m.out = b
	body, err := m.post(ctx, b)
	if err != nil {
		return Result{}, err
	}
	var res Result
	id, ok := "", true
	err = rpcResult(method, body, func() { res, id, ok = Result{}, "", true }, func(k, v []byte) bool {
		key := unescapeKey(k)
		if string(key) == "session_id" {
			id, ok = stringValue(v)
			return ok
		}
		ok = res.readMember(key, v)
		return ok
	})
	if err != nil {
		return Result{}, err
	}
	if !ok || id == "" {
		return Result{}, fmt.Errorf("openenv mcp %s: the result is not a session's first observation", method)
	}
	m.id = id
	return res, nil
}

// post sends one JSON-RPC request, body, to POST /mcp and reads the
// answer into m.in. Its request copies one made once, or reuses the last.
func (m *MCPSession) post(ctx context.Context, body []byte) ([]byte, error) {
	if m.p.proto == nil {
		proto, err := m.c.postProto("/mcp")
		if err != nil {
			return nil, err
		}
		if proto == nil {
			return m.c.roundTrip(ctx, http.MethodPost, "/mcp", body, &m.in)
		}
		m.p.proto = proto
	}
	b, err := m.c.exchange(m.p.request(ctx, body), http.MethodPost, "/mcp", &m.in)
	m.p.done(err)
	return b, err
}

// Step calls a tool: action is a ToolAction of type call_tool. The
// observation is the call's result less MCP's content and isError, and
// less reward and done, which the Result holds.
func (m *MCPSession) Step(ctx context.Context, action any) (Result, error) {
	a, ok := action.(ToolAction)
	if !ok || a.Type == ActionListTools {
		return Result{}, fmt.Errorf("openenv mcp step: want a call_tool ToolAction, got %T", action)
	}
	// The request is written by hand: a map of params encoded, then the
	// request around it, scanned the params twice more.
	args := a.Arguments
	if args == nil {
		args = json.RawMessage("null")
	}
	if !validJSON(args) {
		return Result{}, fmt.Errorf("openenv mcp %s: the arguments of %s are not JSON", MethodToolsCall, a.ToolName)
	}
	b := append(m.out[:0], `{"jsonrpc":"2.0","method":"tools/call","params":{"session_id":`...)
	b = appendUnescaped(b, m.id)
	b = append(b, `,"name":`...)
	b = appendUnescaped(b, a.ToolName)
	b = append(b, `,"arguments":`...)
	b = append(b, args...)
	if a.Metadata != nil {
		meta, err := MarshalUnescaped(a.Metadata)
		if err != nil {
			return Result{}, fmt.Errorf("openenv mcp %s: encode metadata: %w", MethodToolsCall, err)
		}
		b = append(b, `,"metadata":`...)
		b = append(b, meta...)
	}
	b = append(b, `},"id":1}`...)
	m.out = b
	body, err := m.post(ctx, b)
	if err != nil {
		return Result{}, err
	}
	return decodeCallResponse(body)
}

// decodeCallResponse reads a tools/call response.
// It checks the JSON and walks its members in one pass, where a decode would build the result's map.
func decodeCallResponse(b []byte) (Result, error) {
	const method = MethodToolsCall
	var res Result
	var obs []byte
	var err error
	start := func() {
		if obs == nil {
			obs = make([]byte, 0, len(b)) // room for the whole result
		}
		res, obs, err = Result{}, append(obs[:0], '{'), nil
	}
	if rerr := rpcResult(method, b, start, func(k, v []byte) bool {
		switch string(unescapeKey(k)) {
		case "content", "isError":
		case "reward":
			if string(v) != "null" {
				var r float64
				if r, err = strconv.ParseFloat(string(v), 64); err != nil {
					return false
				}
				res.Reward = &r
			}
		case "done":
			res.Done = string(v) == "true"
		default:
			if len(obs) > 1 {
				obs = append(obs, ',')
			}
			obs = append(obs, '"')
			obs = append(obs, k...)
			obs = append(obs, `":`...)
			obs = append(obs, v...)
		}
		return true
	}); rerr != nil {
		return Result{}, rerr
	}
	if err != nil {
		return Result{}, fmt.Errorf("openenv mcp %s: decode reward: %w", method, err)
	}
	res.Observation = append(obs, '}')
	return res, nil
}

// rpcResult checks a JSON-RPC response and walks its result, an object,
// in one pass. It calls start before the members of each result, as the
// last counts, and member with each until member returns false. member
// gets the key as written between its quotes. A JSON-RPC error comes
// back as an *RPCError.
func rpcResult(method string, b []byte, start func(), member func(key, value []byte) bool) error {
	var rerr []byte
	object := false
	end, valid := walkObject(b, skipSpace(b, 0), 1, func(k []byte, i int) (int, bool) {
		switch string(unescapeKey(k)) {
		case "result":
			object = i < len(b) && b[i] == '{'
			if !object {
				return validValue(b, i, 1)
			}
			start()
			walking := true
			return walkObject(b, i, 2, func(k []byte, i int) (int, bool) {
				end, valid := validValue(b, i, 2)
				if valid && walking {
					walking = member(k, b[i:end])
				}
				return end, valid
			})
		case "error":
			end, valid := validValue(b, i, 1)
			rerr = b[i:end]
			return end, valid
		}
		return validValue(b, i, 1)
	})
	if !valid || skipSpace(b, end) != len(b) {
		return fmt.Errorf("openenv mcp %s: decode: the answer is not a JSON object", method)
	}
	if rerr != nil && string(rerr) != "null" {
		var e RPCError
		if err := json.Unmarshal(rerr, &e); err != nil {
			return fmt.Errorf("openenv mcp %s: decode error: %w", method, err)
		}
		return fmt.Errorf("openenv mcp %s: %w", method, &e)
	}
	if !object {
		return fmt.Errorf("openenv mcp %s: the result is not a JSON object", method)
	}
	return nil
}

// State returns the session's state.
func (m *MCPSession) State(ctx context.Context) (json.RawMessage, error) {
	if m.id == "" {
		return nil, ErrNoState
	}
	var st json.RawMessage
	return st, m.c.MCP(ctx, MethodSessionState, map[string]string{"session_id": m.id}, &st)
}

// Close closes the session, if it opened.
func (m *MCPSession) Close() error {
	if m.id == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	return m.c.MCP(ctx, MethodSessionClose, map[string]string{"session_id": m.id}, nil)
}
