package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The JSON-RPC 2.0 error codes the MCP endpoint answers with.
const (
	RPCParseError     = -32700 // the body is not JSON
	RPCInvalidRequest = -32600 // not a request object, or one the state refuses
	RPCMethodNotFound = -32601 // a method the server does not serve
	RPCInvalidParams  = -32602 // params off the method's shape, an unknown tool or session
	RPCInternalError  = -32603 // the environment failed
	RPCServerError    = -32000 // no session slot, a failed factory, the episode limit
)

// The MCP methods served, MCP's and OpenEnv's session extensions.
const (
	MethodInitialize    = "initialize"
	MethodToolsList     = "tools/list"
	MethodToolsCall     = "tools/call"
	MethodSessionCreate = "openenv/session/create"
	MethodSessionReset  = "openenv/session/reset"
	MethodSessionClose  = "openenv/session/close"
	MethodSessionState  = "openenv/session/state"
)

// MCPProtocolVersion is the MCP version initialize answers when the
// client names none.
const MCPProtocolVersion = "2025-06-18"

// MsgMCP is the WebSocket message type that carries a JSON-RPC request
// and its response.
const MsgMCP = "mcp"

// RPCRequest is a JSON-RPC 2.0 request. A request without an id member
// is a notification.
type RPCRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	ID      json.RawMessage `json:"id,omitempty"`
}

// RPCResponse is a JSON-RPC 2.0 response: a result or an error.
type RPCResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
	ID      json.RawMessage `json:"id"`
}

// RPCError is the error of a JSON-RPC response.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// MCPTool is a tool as MCP's tools/list writes it.
type MCPTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// MCPContent is one part of a tools/call result; the server writes text.
type MCPContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// MCPCallResult is the result of tools/call, as OpenEnv writes a call's observation.
// MCP's content and isError come first.
// The step's observation fields, reward and done follow at the same level.
type MCPCallResult struct {
	Content     []MCPContent
	IsError     bool
	Observation json.RawMessage
	Reward      *float64
	Done        bool
}

// MarshalJSON writes the observation's fields beside content, isError,
// reward and done.
func (r MCPCallResult) MarshalJSON() ([]byte, error) {
	all := map[string]json.RawMessage{}
	if len(r.Observation) > 0 {
		if err := json.Unmarshal(r.Observation, &all); err != nil {
			return nil, fmt.Errorf("encode call result: %w", err)
		}
	}
	set := func(k string, v any) {
		b, _ := json.Marshal(v) // content, bools and floats always encode
		all[k] = b
	}
	set("content", r.Content)
	set("isError", r.IsError)
	set("reward", r.Reward)
	set("done", r.Done)
	return json.Marshal(all)
}

// UnmarshalJSON reads content, isError, reward and done, and keeps the
// other fields as the observation.
func (r *MCPCallResult) UnmarshalJSON(b []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	var known struct {
		Content []MCPContent `json:"content"`
		IsError bool         `json:"isError"`
		Reward  *float64     `json:"reward"`
		Done    bool         `json:"done"`
	}
	if err := json.Unmarshal(b, &known); err != nil {
		return err
	}
	for _, k := range []string{"content", "isError", "reward", "done"} {
		delete(all, k)
	}
	obs, err := json.Marshal(all)
	if err != nil {
		return err
	}
	*r = MCPCallResult{Content: known.Content, IsError: known.IsError, Observation: obs, Reward: known.Reward, Done: known.Done}
	return nil
}

// mcpSession is one HTTP MCP session: an environment kept between
// requests. mu serialises its calls, as Environment asks.
type mcpSession struct {
	id       string
	mu       sync.Mutex
	env      Environment
	episodes int          // resets so far
	closed   bool         // closed by the client, the reaper or the server
	last     time.Time    // the last request's end, for the reaper
	deadline stepDeadline // its calls' contexts, under the server's
}

// callContext returns the context of a call on the session, made under
// mu for the request whose context is req. It ends at the call's
// deadline, when req ends, or when the server closes. The caller calls
// stop when the call returns.
func (ms *mcpSession) callContext(s *Server, req context.Context) (ctx context.Context, stop func() bool) {
	ctx, cancel := ms.deadline.get(s.ctx, s.cfg.StepTimeout)
	return ctx, context.AfterFunc(req, cancel)
}

// rpcCall is one JSON-RPC call in progress: where it came from decides
// which environment it runs on.
type rpcCall struct {
	req RPCRequest
	ws  *session // the WebSocket session whose environment it uses, or nil
	// scratch is where a tools/call writes its action, observation and
	// result. The result lives there until the answer is written.
	scratch []byte
}

// mcp serves POST /mcp: one JSON-RPC request a body. A notification gets
// 202 and no body.
func (s *Server) mcp(w http.ResponseWriter, r *http.Request) {
	in := getBuffer()
	defer putBuffer(in) // after the answer, which may hold the request's id
	b, err := s.readRPCBody(w, r, in)
	if err != nil {
		return
	}
	req, rerr := parseRPC(b)
	if rerr != nil {
		writeJSON(w, http.StatusOK, RPCResponse{JSONRPC: "2.0", Error: rerr, ID: idOrNull(req.ID)})
		return
	}
	scratch := getBuffer()
	defer putBuffer(scratch) // after the answer, which holds the result
	scratch.Grow(scratchBytes)
	resp := s.rpc(r.Context(), rpcCall{req: req, scratch: scratch.AvailableBuffer()})
	if req.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	out := getBuffer()
	defer putBuffer(out)
	b, err = appendRPCResponse(out.AvailableBuffer(), resp)
	if err != nil {
		writeJSON(w, http.StatusOK, RPCResponse{JSONRPC: "2.0", ID: resp.ID, Error: &RPCError{Code: RPCInternalError, Message: "encode response: " + err.Error()}})
		return
	}
	_, _ = out.Write(append(b, '\n')) // a Buffer's Write never fails; out keeps the grown array for the pool
	w.Header()["Content-Type"] = jsonType
	w.WriteHeader(http.StatusOK)
	// The status line is out; a failed write means the client went away.
	_, _ = w.Write(out.Bytes())
}

// jsonType is the Content-Type of every answer. It is shared: net/http
// copies a handler's header before writing it and never writes into a
// value. Header.Set made a slice a request.
var jsonType = []string{"application/json"}

// buffers holds the bodies of HTTP MCP requests and answers for reuse.
// Each request would otherwise grow two buffers from nothing.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooled bounds the buffers kept: a rare large body is left to the
// collector, not held.
const maxPooled = 64 << 10

// scratchBytes is the room a tools/call gets for its action, observation
// and result: a delegation step's take about 3 KiB.
const scratchBytes = 8 << 10

func getBuffer() *bytes.Buffer { return buffers.Get().(*bytes.Buffer) }

func putBuffer(b *bytes.Buffer) {
	if b.Cap() > maxPooled {
		return
	}
	b.Reset()
	buffers.Put(b)
}

// handleRPC answers one message of an MCP WebSocket. Every request gets
// an answer, a notification too, as OpenEnv's server does.
func (ss *session) handleRPC(raw []byte) RPCResponse {
	req, rerr := parseRPC(raw)
	if rerr != nil {
		return RPCResponse{JSONRPC: "2.0", Error: rerr, ID: idOrNull(req.ID)}
	}
	return ss.s.rpc(ss.ctx, rpcCall{req: req, ws: ss})
}

// sessionMethod serves OpenEnv's session methods on an MCP WebSocket,
// whose connection is the session. Create and reset start the
// connection's next episode; close refuses to close the connection's own
// session, as OpenEnv does, and closes an HTTP session it names.
func (ss *session) sessionMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	p, err := readSessionParams(params)
	if err != nil {
		return nil, err
	}
	if method == MethodSessionClose {
		if p.SessionID == "" {
			return nil, &RPCError{Code: RPCInvalidParams, Message: "Invalid params: 'session_id' is required"}
		}
		if p.SessionID == ss.id {
			return nil, &RPCError{Code: RPCInvalidRequest, Message: "Cannot close active WebSocket-managed session via MCP method: close the WebSocket"}
		}
		ms, err := ss.s.mcpSession([]byte(p.SessionID))
		if err != nil {
			return nil, err
		}
		ss.s.dropSession(ms)
		return map[string]any{"session_id": ms.id, "closed": true}, nil
	}
	if p.SessionID != "" && p.SessionID != ss.id {
		return nil, &RPCError{Code: RPCInvalidParams, Message: "Unknown session_id: " + p.SessionID + " (this connection's is " + ss.id + ")"}
	}
	if method == MethodSessionState {
		return ss.env.State(), nil
	}
	if errs := (ResetRequest{Seed: p.Seed, EpisodeID: p.EpisodeID}).Validate(); len(errs) > 0 {
		return nil, &RPCError{Code: RPCInvalidParams, Message: "Invalid params: " + (&ValidationError{errs}).Error()}
	}
	sctx, _ := ss.deadline.get(ss.ctx, ss.s.cfg.StepTimeout)
	obs, err := ss.env.Reset(sctx, p.Seed, deref(p.EpisodeID))
	if err != nil {
		return nil, rpcStepError(err)
	}
	res, err := obs.Result()
	if err != nil {
		return nil, err
	}
	ss.reset, ss.steps = true, 0
	ss.episodes++
	return sessionResult{SessionID: ss.id, Episode: ss.episodes, Result: res}.encode(nil)
}

// readRPCBody reads a body of at most MaxMessageBytes into buf, answering
// 413 above it.
func (s *Server) readRPCBody(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) ([]byte, error) {
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.cfg.MaxMessageBytes))
	if err != nil {
		// Declared here: errors.As puts it on the heap, which every
		// request would pay.
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			WriteDetail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", s.cfg.MaxMessageBytes))
		} else {
			WriteDetail(w, http.StatusBadRequest, "read body: "+err.Error())
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

// parseRPC reads one JSON-RPC request. It returns what it could read
// with the error, so that an answer can carry the id.
func parseRPC(b []byte) (RPCRequest, *RPCError) {
	var req RPCRequest
	if !validJSON(b) {
		return req, &RPCError{Code: RPCParseError, Message: "Parse error"}
	}
	if !startsObject(b) {
		return req, &RPCError{Code: RPCInvalidRequest, Message: "Invalid request: want one JSON-RPC request object; batches are not served"}
	}
	// The last of a repeated member counts, as in a decode.
	var version, method, params json.RawMessage
	members(b, func(k, v []byte) bool {
		switch string(unescapeKey(k)) {
		case "id":
			req.ID = v
		case "jsonrpc":
			version = v
		case "method":
			method = v
		case "params":
			params = v
		}
		return true
	})
	if req.ID != nil {
		if t := req.ID[0]; t != '"' && t != 'n' && (t < '0' || t > '9') && t != '-' {
			return RPCRequest{ID: json.RawMessage("null")}, &RPCError{Code: RPCInvalidRequest, Message: "Invalid request: id must be a string, a number or null"}
		}
	}
	if version != nil && string(version) != `"2.0"` {
		return req, &RPCError{Code: RPCInvalidRequest, Message: `Invalid request: jsonrpc must be "2.0"`}
	}
	m, ok := methodName(method)
	if !ok || m == "" {
		return req, &RPCError{Code: RPCInvalidRequest, Message: "Invalid request: method must be a non-empty string"}
	}
	req.JSONRPC, req.Method = "2.0", m
	if params != nil && string(params) != "null" {
		req.Params = params
	}
	return req, nil
}

// methodName is the method a JSON-RPC request names. A method served is
// the constant, not a copy.
func methodName(v []byte) (string, bool) {
	b, ok := stringBytes(v)
	if !ok {
		return "", false
	}
	for _, m := range []string{MethodToolsCall, MethodSessionReset, MethodSessionCreate, MethodSessionClose, MethodSessionState, MethodToolsList, MethodInitialize} {
		if string(b) == m {
			return m, true
		}
	}
	return string(b), true
}

func idOrNull(id json.RawMessage) json.RawMessage {
	if id == nil {
		return json.RawMessage("null")
	}
	return id
}

// rpc answers one request.
func (s *Server) rpc(ctx context.Context, c rpcCall) RPCResponse {
	resp := RPCResponse{JSONRPC: "2.0", ID: idOrNull(c.req.ID)}
	// parseRPC checked the request: params that start an object are a
	// valid one. Each method reads them once.
	if c.req.Params != nil && !startsObject(c.req.Params) {
		resp.Error = &RPCError{Code: RPCInvalidParams, Message: "Params must be an object"}
		return resp
	}
	var result any
	var raw json.RawMessage // a tools/call result, encoded already: not put in an interface, a copy on the heap
	var err error
	if (c.req.Method == MethodToolsList || c.req.Method == MethodToolsCall) && len(s.cfg.Tools) == 0 {
		resp.Error = &RPCError{Code: RPCInternalError, Message: "Environment does not support MCP: it declares no tools"}
		return resp
	}
	switch c.req.Method {
	case MethodInitialize:
		result, err = s.initialize(c.req.Params)
	case MethodToolsList:
		result = s.toolsList()
	case MethodToolsCall:
		raw, err = s.toolsCall(ctx, c.ws, c.req.Params, c.scratch)
	case MethodSessionCreate, MethodSessionReset, MethodSessionClose, MethodSessionState:
		if c.ws != nil && c.ws.id != "" {
			result, err = c.ws.sessionMethod(ctx, c.req.Method, c.req.Params)
			break
		}
		if c.ws != nil {
			err = &RPCError{Code: RPCInvalidRequest, Message: c.req.Method + ": on the WebSocket the connection is the session; send reset and close messages"}
			break
		}
		result, err = s.sessionMethod(ctx, c.req.Method, c.req.Params, c.scratch)
	default:
		err = &RPCError{Code: RPCMethodNotFound, Message: "Method not found: " + c.req.Method}
	}
	switch {
	case err != nil:
		resp.Error = asRPCError(err)
	case raw != nil:
		resp.Result = raw
	default:
		if b, ok := result.(json.RawMessage); ok { // encoded already, compact
			resp.Result = b
			break
		}
		b, merr := json.Marshal(result)
		if merr != nil {
			resp.Error = &RPCError{Code: RPCInternalError, Message: "encode result: " + merr.Error()}
			break
		}
		resp.Result = b
	}
	return resp
}

// initialize answers MCP's handshake: the client's protocol version when
// it names one, the tools capability and the server's name.
func (s *Server) initialize(raw json.RawMessage) (any, error) {
	var params map[string]json.RawMessage
	if raw != nil && json.Unmarshal(raw, &params) != nil {
		return nil, &RPCError{Code: RPCInvalidParams, Message: "Params must be an object"}
	}
	version := MCPProtocolVersion
	if v, ok := params["protocolVersion"]; ok {
		if json.Unmarshal(v, &version) != nil || version == "" {
			return nil, &RPCError{Code: RPCInvalidParams, Message: "protocolVersion must be a non-empty string"}
		}
	}
	sv := "0"
	if s.cfg.Metadata.Version != nil {
		sv = *s.cfg.Metadata.Version
	}
	return map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"tools": map[string]bool{"listChanged": false}},
		"serverInfo":      map[string]string{"name": s.cfg.Metadata.Name, "version": sv},
		"instructions":    s.cfg.Metadata.Description,
	}, nil
}

func (s *Server) toolsList() any {
	tools := make([]MCPTool, len(s.cfg.Tools))
	for i, t := range s.cfg.Tools {
		tools[i] = MCPTool(t) // the same fields; the JSON names differ
	}
	return map[string][]MCPTool{"tools": tools}
}

// toolsCall runs a call_tool step on the session's environment.
// That is the WebSocket session's, or an HTTP session's when params name one.
// Otherwise it runs on a fresh environment closed after it.
// params is a valid JSON object, or nil.
// The action, the observation and the result are written in scratch, or
// past its end when they outgrow it.
func (s *Server) toolsCall(ctx context.Context, ws *session, params json.RawMessage, scratch []byte) (json.RawMessage, error) {
	var rawName, args, meta, id json.RawMessage
	named := false
	members(params, func(k, v []byte) bool {
		switch string(unescapeKey(k)) {
		case "name":
			rawName = v
		case "arguments":
			args = v
		case "metadata":
			meta = v
		case "session_id":
			id, named = v, true
		}
		return true
	})
	name, ok := stringBytes(rawName)
	if !ok || len(name) == 0 {
		return nil, &RPCError{Code: RPCInvalidParams, Message: "Invalid params: 'name' must be a non-empty string"}
	}
	if args != nil && string(args) != "null" && !startsObject(args) {
		return nil, &RPCError{Code: RPCInvalidParams, Message: "Invalid params: 'arguments' must be an object"}
	}
	if !s.hasTool(name) {
		return nil, &RPCError{Code: RPCInvalidParams, Message: "Tool not found: " + string(name)}
	}
	if args == nil || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if meta != nil && string(meta) != "null" && !startsObject(meta) {
		return nil, &RPCError{Code: RPCInvalidParams, Message: "Invalid params: 'metadata' must be an object"}
	}
	action := appendCallAction(scratch[:0], rawName, args, meta)
	rest := action[len(action):] // the observation and result go after the action
	var obs Observation
	var err error
	switch {
	case ws != nil:
		if ws.reset && ws.steps >= s.cfg.MaxSteps {
			return nil, &RPCError{Code: RPCInvalidRequest, Message: fmt.Sprintf("%v (%d steps)", ErrStepLimit, s.cfg.MaxSteps)}
		}
		sctx, _ := ws.deadline.get(ws.ctx, s.cfg.StepTimeout)
		obs, err = ws.env.Step(sctx, action)
		if ws.reset {
			ws.steps++
		}
	case named:
		sid, _ := stringBytes(id) // not a string: empty, refused as empty
		ms, rerr := s.mcpSession(sid)
		if rerr != nil {
			return nil, rerr
		}
		obs, err = s.sessionStep(ctx, ms, action)
	default:
		env, ferr := s.cfg.New()
		if ferr != nil {
			return nil, s.factoryError(ferr)
		}
		sctx, cancel := context.WithTimeout(ctx, s.cfg.StepTimeout)
		obs, err = env.Step(sctx, action)
		cancel()
		closeEnv(env, s.cfg.Log)
	}
	if err != nil {
		return nil, rpcStepError(err)
	}
	if ct, ok := obs.Value.(callTexter); ok && (obs.Reward == nil || finite(*obs.Reward)) {
		res, err := obs.result(rest)
		if err != nil {
			return nil, err
		}
		text, isError := ct.callText()
		b, err := appendCallResult(res.Observation[len(res.Observation):], text, isError, res.Observation, res.Reward, res.Done)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	cr, err := callResult(obs)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(cr)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return b, nil
}

// appendCallAction appends the call_tool action of a tools/call. name,
// arguments and metadata are the params' valid JSON values; metadata nil
// or null is left out.
func appendCallAction(dst []byte, name, args, meta json.RawMessage) json.RawMessage {
	dst = append(dst, `{"type":"call_tool","tool_name":`...)
	dst = append(dst, name...)
	dst = append(dst, `,"arguments":`...)
	dst = append(dst, args...)
	if meta != nil && string(meta) != "null" {
		dst = append(dst, `,"metadata":`...)
		dst = append(dst, meta...)
	}
	return append(dst, '}')
}

func (s *Server) hasTool(name []byte) bool {
	for _, t := range s.cfg.Tools {
		if string(name) == t.Name {
			return true
		}
	}
	return false
}

// asRPCError is err as a JSON-RPC error: itself, or an internal error.
// Only a call that failed pays for errors.As's target on the heap.
func asRPCError(err error) *RPCError {
	var rerr *RPCError
	if errors.As(err, &rerr) {
		return rerr
	}
	return &RPCError{Code: RPCInternalError, Message: err.Error()}
}

// rpcStepError turns a refused or failed step into a JSON-RPC error.
func rpcStepError(err error) error {
	var verr *ValidationError
	switch {
	case errors.As(err, &verr):
		return &RPCError{Code: RPCInvalidParams, Message: verr.Error()}
	case errors.Is(err, ErrNoEpisode):
		return &RPCError{Code: RPCInvalidRequest, Message: err.Error() + " (over HTTP, call " + MethodSessionCreate + " and pass its session_id)"}
	case errors.Is(err, ErrEpisodeDone):
		return &RPCError{Code: RPCInvalidRequest, Message: err.Error() + " (over HTTP, " + MethodSessionReset + ")"}
	case errors.Is(err, ErrStepLimit):
		return &RPCError{Code: RPCInvalidRequest, Message: err.Error()}
	}
	return err
}

// callResult writes a step's observation as a tools/call result. The
// text is the observation's result, or its error's message when the call
// failed, as OpenEnv's call observations carry them.
func callResult(obs Observation) (MCPCallResult, error) {
	res, err := obs.Result()
	if err != nil {
		return MCPCallResult{}, err
	}
	var o struct {
		Result json.RawMessage `json:"result"`
		Error  *ToolError      `json:"error"`
	}
	if err := json.Unmarshal(res.Observation, &o); err != nil {
		return MCPCallResult{}, fmt.Errorf("read observation: %w", err)
	}
	text := string(o.Result)
	var str string
	if json.Unmarshal(o.Result, &str) == nil {
		text = str
	}
	if o.Error != nil {
		text = o.Error.Message
	}
	return MCPCallResult{Content: []MCPContent{{Type: "text", Text: text}}, IsError: o.Error != nil,
		Observation: res.Observation, Reward: res.Reward, Done: res.Done}, nil
}

func (s *Server) factoryError(err error) error {
	s.cfg.Log.Error("openenv: make environment", "factory", s.cfg.Name, "err", err)
	data, _ := json.Marshal(map[string]string{"factory_name": s.cfg.Name}) // strings always encode
	return &RPCError{Code: RPCServerError, Message: fmt.Sprintf("environment factory %s failed: %v", s.cfg.Name, err), Data: data}
}

// sessionParams are the params of the session methods.
type sessionParams struct {
	SessionID string  `json:"session_id"`
	Seed      *int64  `json:"seed"`
	EpisodeID *string `json:"episode_id"`
}

// readSessionParams decodes params, a valid JSON object or nil, once.
func readSessionParams(params json.RawMessage) (sessionParams, error) {
	var p sessionParams
	if params == nil || p.readPlain(params) {
		return p, nil
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return p, &RPCError{Code: RPCInvalidParams, Message: "Invalid params: " + err.Error()}
	}
	return p, nil
}

// readPlain reads b, a valid JSON object, without reflection when it
// holds session_id, seed and episode_id alone, each plain or null, as
// ResetRequest.readPlain reads them. It reports false for anything else,
// which the decoder reads.
func (p *sessionParams) readPlain(b []byte) bool {
	out, ok := *p, true
	members(b, func(k, v []byte) bool {
		switch string(k) {
		case "session_id":
			var id *string
			if id, ok = plainString(v); id != nil {
				out.SessionID = *id // null leaves it, as a decode does
			}
		case "seed":
			out.Seed, ok = plainInt(v)
		case "episode_id":
			out.EpisodeID, ok = plainString(v)
		default:
			ok = false
		}
		return ok
	})
	if ok {
		*p = out
	}
	return ok
}

// sessionMethod serves OpenEnv's session methods over HTTP. Create takes
// a slot and starts the first episode; reset starts another, up to
// MaxMCPEpisodes; state answers the state; close frees the slot. Reset
// and state are ours. Create and reset write their answers in scratch.
func (s *Server) sessionMethod(ctx context.Context, method string, params json.RawMessage, scratch []byte) (any, error) {
	p, err := readSessionParams(params)
	if err != nil {
		return nil, err
	}
	if errs := (ResetRequest{Seed: p.Seed, EpisodeID: p.EpisodeID}).Validate(); len(errs) > 0 {
		return nil, &RPCError{Code: RPCInvalidParams, Message: "Invalid params: " + (&ValidationError{errs}).Error()}
	}
	switch method {
	case MethodSessionCreate:
		return s.createSession(ctx, p, scratch)
	case MethodSessionClose:
		ms, err := s.mcpSession([]byte(p.SessionID))
		if err != nil {
			return nil, err
		}
		s.dropSession(ms)
		return map[string]any{"session_id": ms.id, "closed": true}, nil
	case MethodSessionState:
		ms, err := s.mcpSession([]byte(p.SessionID))
		if err != nil {
			return nil, err
		}
		ms.mu.Lock()
		defer ms.mu.Unlock()
		if ms.closed {
			return nil, &RPCError{Code: RPCInvalidParams, Message: "Unknown session_id: " + ms.id}
		}
		ms.last = time.Now()
		return ms.env.State(), nil
	}
	ms, err := s.mcpSession([]byte(p.SessionID))
	if err != nil {
		return nil, err
	}
	return s.sessionReset(ctx, ms, p, scratch)
}

// createSession takes a session slot, makes an environment and resets it.
// Its answer is written in scratch.
func (s *Server) createSession(ctx context.Context, p sessionParams, scratch []byte) (any, error) {
	if s.cfg.MaxMCPEpisodes == 0 {
		return nil, &RPCError{Code: RPCServerError, Message: "HTTP MCP sessions are off: the server runs 0 episodes a session"}
	}
	active, closed, ok := s.join()
	switch {
	case closed:
		return nil, &RPCError{Code: RPCServerError, Message: "the server is shutting down"}
	case !ok:
		mx := s.cfg.MaxSessions
		data, _ := json.Marshal(map[string]int{"active_sessions": active, "max_sessions": mx}) // ints always encode
		return nil, &RPCError{Code: RPCServerError, Message: fmt.Sprintf("server at capacity: %d of %d sessions active", active, mx), Data: data}
	}
	env, err := s.cfg.New()
	if err != nil {
		s.leave()
		return nil, s.factoryError(err)
	}
	ms := &mcpSession{id: newSessionID(), env: env, last: time.Now()}
	s.mu.Lock()
	if s.mcpSessions == nil {
		s.mcpSessions = map[string]*mcpSession{}
	}
	s.mcpSessions[ms.id] = ms
	s.mu.Unlock()
	s.startReaper()
	res, err := s.sessionReset(ctx, ms, p, scratch)
	if err != nil {
		s.dropSession(ms)
		return nil, err
	}
	return res, nil
}

// sessionResult is the answer of session create and reset: the session
// and its episode's first observation.
type sessionResult struct {
	SessionID string `json:"session_id"`
	Episode   int    `json:"episode"`
	Result
}

// encode writes r as json.Marshal does, without a second scan of the
// observation, which Observation.Result encoded. It writes over dst's
// array while it has room; the observation must not lie there.
func (r sessionResult) encode(dst []byte) (json.RawMessage, error) {
	if r.Reward != nil && !finite(*r.Reward) {
		_, err := json.Marshal(r) // for json.Marshal's error
		return nil, fmt.Errorf("encode result: %w", err)
	}
	b := append(dst[:0], `{"session_id":`...)
	b = appendString(b, r.SessionID) // as json.Marshal writes a string
	b = append(b, `,"episode":`...)
	b = strconv.AppendInt(b, int64(r.Episode), 10)
	b = append(b, ',')
	n := len(b)
	b, err := appendResult(b, r.Result)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return append(b[:n], b[n+1:]...), nil // the result's own "{" gives way
}

// sessionReset starts ms's next episode. It encodes the observation in
// scratch and the answer after it.
func (s *Server) sessionReset(ctx context.Context, ms *mcpSession, p sessionParams, scratch []byte) (any, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.closed {
		return nil, &RPCError{Code: RPCInvalidParams, Message: "Unknown session_id: " + ms.id}
	}
	defer func() { ms.last = time.Now() }()
	if ms.episodes >= s.cfg.MaxMCPEpisodes {
		return nil, &RPCError{Code: RPCServerError, Message: fmt.Sprintf("the session ran its %d episodes: close it and create another", s.cfg.MaxMCPEpisodes)}
	}
	sctx, stop := ms.callContext(s, ctx)
	defer stop()
	obs, err := ms.env.Reset(sctx, p.Seed, deref(p.EpisodeID))
	if err != nil {
		return nil, rpcStepError(err)
	}
	res, err := obs.result(scratch)
	if err != nil {
		return nil, err
	}
	ms.episodes++
	rest := res.Observation[len(res.Observation):]
	return sessionResult{SessionID: ms.id, Episode: ms.episodes, Result: res}.encode(rest)
}

func (s *Server) sessionStep(ctx context.Context, ms *mcpSession, action json.RawMessage) (Observation, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.closed {
		return Observation{}, &RPCError{Code: RPCInvalidParams, Message: "Unknown session_id: " + ms.id}
	}
	defer func() { ms.last = time.Now() }()
	sctx, stop := ms.callContext(s, ctx)
	defer stop()
	return ms.env.Step(sctx, action)
}

// newSessionID returns an id no client can guess.
func newSessionID() string { return fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64()) }

// mcpSession finds the session id names.
// The id comes as bytes: a step's, read from its request, is not copied.
func (s *Server) mcpSession(id []byte) (*mcpSession, error) {
	if len(id) == 0 {
		return nil, &RPCError{Code: RPCInvalidParams, Message: "Invalid params: 'session_id' must be a non-empty string"}
	}
	s.mu.Lock()
	ms := s.mcpSessions[string(id)]
	s.mu.Unlock()
	if ms == nil {
		return nil, &RPCError{Code: RPCInvalidParams, Message: "Unknown session_id: " + string(id)}
	}
	return ms, nil
}

// dropSession closes ms once and frees its slot. A call in progress on
// it ends first.
func (s *Server) dropSession(ms *mcpSession) {
	s.mu.Lock()
	_, ok := s.mcpSessions[ms.id]
	delete(s.mcpSessions, ms.id)
	s.mu.Unlock()
	if !ok {
		return
	}
	ms.mu.Lock()
	ms.closed = true
	ms.deadline.stop()
	ms.mu.Unlock()
	closeEnv(ms.env, s.cfg.Log)
	s.leave()
}

// startReaper starts, once, the goroutine that closes HTTP MCP sessions
// idle for IdleTimeout. It ends with the server.
func (s *Server) startReaper() {
	s.reaperOnce.Do(func() {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			tick := time.NewTicker(max(s.cfg.IdleTimeout/4, 10*time.Millisecond))
			defer tick.Stop()
			for {
				select {
				case <-s.ctx.Done():
					s.dropAll()
					return
				case <-tick.C:
					s.reap()
				}
			}
		}()
	})
}

// reap closes the sessions idle for IdleTimeout.
func (s *Server) reap() {
	s.mu.Lock()
	var idle []*mcpSession
	for _, ms := range s.mcpSessions {
		if ms.mu.TryLock() { // a session in a call is not idle
			if time.Since(ms.last) >= s.cfg.IdleTimeout {
				idle = append(idle, ms)
			}
			ms.mu.Unlock()
		}
	}
	s.mu.Unlock()
	for _, ms := range idle {
		s.dropSession(ms)
	}
}

func (s *Server) dropAll() {
	s.mu.Lock()
	all := make([]*mcpSession, 0, len(s.mcpSessions))
	for _, ms := range s.mcpSessions {
		all = append(all, ms)
	}
	s.mu.Unlock()
	for _, ms := range all {
		s.dropSession(ms)
	}
}
