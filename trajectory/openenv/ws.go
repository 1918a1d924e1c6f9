package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// writeTimeout bounds sending one message to a client.
const writeTimeout = 10 * time.Second

// join takes a session slot. It reports how many are taken when none is
// left, and closed when the server is closed.
func (s *Server) join() (active int, closed, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.active >= s.cfg.MaxSessions {
		return s.active, s.closed, false
	}
	s.active++
	s.wg.Add(1)
	return s.active, false, true
}

func (s *Server) leave() {
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
	s.wg.Done()
}

// ws serves one episode's session on a WebSocket at /ws.
// One environment lives as long as the connection, and messages are answered in order.
func (s *Server) ws(w http.ResponseWriter, r *http.Request) { s.serveWS(w, r, false) }

// mcpWS serves MCP on a WebSocket at /mcp, as OpenEnv's server does.
// Each text message is one JSON-RPC request, and each answer one response.
// One environment lives as long as the connection.
func (s *Server) mcpWS(w http.ResponseWriter, r *http.Request) { s.serveWS(w, r, true) }

// serveWS runs a WebSocket session: OpenEnv's typed messages, or bare
// JSON-RPC when mcp is set.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request, mcp bool) {
	c, ok := s.acceptWS(w, r)
	if !ok {
		return
	}
	if !s.joinWS(c, mcp) {
		return
	}
	defer s.leave()
	env, err := s.cfg.New()
	if err != nil {
		s.cfg.Log.Error("openenv: make environment", "factory", s.cfg.Name, "err", err)
		msg := fmt.Sprintf("environment factory %s failed: %v", s.cfg.Name, err)
		data, _ := json.Marshal(map[string]string{"factory_name": s.cfg.Name}) // strings always encode
		s.refuseWS(s.ctx, c, mcp, ErrorData{Message: msg, Code: CodeFactoryError, FactoryName: s.cfg.Name},
			&RPCError{Code: RPCServerError, Message: msg, Data: data}, websocket.StatusInternalError, "environment factory failed")
		return
	}
	defer closeEnv(env, s.cfg.Log)
	sess, end := s.startSession(c, env, mcp)
	defer end()
	sess.serve(c, mcp)
}

// acceptWS upgrades the request to a WebSocket; Accept answers a request
// it refuses.
func (s *Server) acceptWS(w http.ResponseWriter, r *http.Request) (*websocket.Conn, bool) {
	// The edge's read and write timeouts bound a request, and a hijacked
	// connection keeps them. A session outlives them: IdleTimeout and
	// writeTimeout bound it instead. A writer without deadlines has none
	// to clear.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil, false
	}
	c.SetReadLimit(s.cfg.MaxMessageBytes)
	return c, true
}

// joinWS takes a session slot for the connection. When the server is
// closing or full it refuses the connection and closes it.
func (s *Server) joinWS(c *websocket.Conn, mcp bool) bool {
	active, closed, ok := s.join()
	switch {
	case closed:
		// The server's context is done: the refusal gets its own.
		msg := "the server is shutting down"
		s.refuseWS(context.Background(), c, mcp, ErrorData{Message: msg, Code: CodeSessionError}, &RPCError{Code: RPCServerError, Message: msg}, websocket.StatusGoingAway, "shutting down")
	case !ok:
		mx := s.cfg.MaxSessions
		msg := fmt.Sprintf("server at capacity: %d of %d sessions active", active, mx)
		data, _ := json.Marshal(map[string]int{"active_sessions": active, "max_sessions": mx}) // ints always encode
		s.refuseWS(s.ctx, c, mcp, ErrorData{Message: msg, Code: CodeCapacityReached, ActiveSessions: &active, MaxSessions: &mx},
			&RPCError{Code: RPCServerError, Message: msg, Data: data}, websocket.StatusTryAgainLater, "capacity reached")
	}
	return ok
}

// refuseWS sends a refusal in the endpoint's shape, e on /ws and rpc on
// MCP's socket, and closes the connection.
func (s *Server) refuseWS(ctx context.Context, c *websocket.Conn, mcp bool, e ErrorData, rpc *RPCError, status websocket.StatusCode, reason string) {
	if mcp {
		s.send(ctx, c, "", RPCResponse{JSONRPC: "2.0", Error: rpc, ID: json.RawMessage("null")})
	} else {
		s.send(ctx, c, MsgError, e)
	}
	_ = c.Close(status, reason) // the client may be gone already
}

// startSession sets up the session of a connection on env. end releases
// what it set up.
func (s *Server) startSession(c *websocket.Conn, env Environment, mcp bool) (sess *session, end func()) {
	// Reads and writes take a context without a Done channel: a
	// cancellable one costs the WebSocket library a watch on every frame.
	// The server's closing and a stuck write close the connection instead,
	// which ends the read or write in progress.
	stop := context.AfterFunc(s.ctx, func() { _ = c.CloseNow() }) // closing twice is no failure
	// The session's steps derive their timeouts from its own context: from
	// the server's, every step of every session would take its lock.
	ctx, cancel := context.WithCancel(s.ctx)
	sess = &session{s: s, ctx: ctx, env: env, stuck: time.AfterFunc(writeTimeout, func() { _ = c.CloseNow() })}
	sess.stuck.Stop()
	if mcp {
		sess.id = newSessionID()
	}
	return sess, func() {
		sess.stuck.Stop()
		sess.deadline.stop()
		cancel()
		stop()
	}
}

// serve reads and answers the connection's messages in order. It stops
// when the client leaves or closes, the session idles, or the server
// closes.
func (ss *session) serve(c *websocket.Conn, mcp bool) {
	// An idle session is closed with a close frame, which ends the Read
	// waiting for it. A Read whose context ends would drop the connection
	// without one.
	idleTimeout := ss.s.cfg.IdleTimeout
	var once sync.Once
	idled := make(chan struct{}) // closed once the idle close is over, or can no longer start
	idle := time.AfterFunc(idleTimeout, func() {
		once.Do(func() {
			_ = c.Close(websocket.StatusPolicyViolation, fmt.Sprintf("idle for %v", idleTimeout)) // the client may be gone already
			close(idled)
		})
	})
	defer func() {
		idle.Stop()
		once.Do(func() { close(idled) }) // no later fire closes the connection
		<-idled                          // a fire in progress ends first
	}()
	var in bytes.Buffer // the message read, reused
	for {
		idle.Reset(idleTimeout)
		data, err := readMessage(context.Background(), c, &in)
		idle.Stop()
		if err != nil {
			return // the client left, sent too much, idled, or the server is closing
		}
		if mcp {
			if !ss.send(c, "", ss.handleRPC(data)) {
				return
			}
			continue
		}
		typ, reply, done := ss.handle(data)
		if done {
			_ = c.Close(websocket.StatusNormalClosure, "") // the client asked; its leaving is no failure
			return
		}
		if !ss.send(c, typ, reply) {
			return
		}
	}
}

// send writes one message, reporting whether it went.
func (s *Server) send(ctx context.Context, c *websocket.Conn, typ string, data any) bool {
	return s.write(ctx, c, nil, typ, data) != nil
}

// write writes one message, encoded in buf, and returns buf for reuse; nil
// when the message did not go. An empty typ writes data bare, as MCP's
// WebSocket frames a response.
func (s *Server) write(ctx context.Context, c *websocket.Conn, buf []byte, typ string, data any) []byte {
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return s.writeCtx(wctx, c, buf, typ, data)
}

// writeCtx is write bounded by ctx alone. The data is encoded in place,
// after the message's start.
func (s *Server) writeCtx(ctx context.Context, c *websocket.Conn, buf []byte, typ string, data any) []byte {
	b := buf[:0]
	if typ != "" {
		b = append(b, `{"type":"`...)
		b = append(b, typ...)
		b = append(b, `","data":`...)
	}
	b, err := appendData(b, data)
	switch {
	case err != nil:
		s.cfg.Log.Error("openenv: encode message", "type", typ, "err", err)
		e, _ := json.Marshal(ErrorData{Message: "encode " + typ + ": " + err.Error(), Code: CodeSessionError}) // strings always encode
		b = appendMessage(b[:0], MsgError, e)
	case typ != "":
		b = append(b, '}')
	}
	if c.Write(ctx, websocket.MessageText, b) != nil {
		return nil
	}
	return b
}

// send answers on the session's connection, reusing its buffer. A write
// that takes past writeTimeout closes the connection.
func (ss *session) send(c *websocket.Conn, typ string, data any) bool {
	ss.stuck.Reset(writeTimeout)
	ss.out = ss.s.writeCtx(context.Background(), c, ss.out, typ, data)
	ss.stuck.Stop()
	return ss.out != nil
}

// session is one connection's episode.
type session struct {
	s        *Server
	ctx      context.Context // ends with the session or the server
	env      Environment
	id       string       // the session_id of an MCP WebSocket; "" on /ws
	stuck    *time.Timer  // closes the connection when a write takes too long
	deadline stepDeadline // the resets' and steps' contexts, under ctx
	reset    bool         // an episode was started
	episodes int          // started on an MCP WebSocket
	steps    int          // since the last reset
	out      []byte       // the last message sent, its buffer reused
	obs      []byte       // the last observation encoded, its buffer reused
	res      Result       // the last answer to a reset or a step, until it is sent
}

// wsFields are the fields each message type may carry; OpenEnv's messages
// forbid others.
var wsFields = map[string]map[string]bool{
	MsgReset: {"type": true, "data": true},
	MsgStep:  {"type": true, "data": true},
	MsgState: {"type": true},
	MsgClose: {"type": true},
	MsgMCP:   {"type": true, "data": true},
}

// handle answers one message: the type and data to send back, or done
// when the client closes the session.
func (ss *session) handle(raw []byte) (typ string, data any, done bool) {
	if !validJSON(raw) {
		var v any
		err := json.Unmarshal(raw, &v) // for its message: raw is not JSON
		return MsgError, ErrorData{Message: "Invalid JSON: " + fmt.Sprint(err), Code: CodeInvalidJSON}, false
	}
	if !startsObject(raw) {
		return MsgError, invalid(FieldError{Type: "model_type", Loc: []any{}, Msg: "Input should be an object"}), false
	}
	// The members are read without a decode into a map. The last of a
	// repeated member counts, as in a decode.
	var rawType, msgData json.RawMessage
	extra, hasExtra := "", false // the first member other than type and data
	members(raw, func(k, v []byte) bool {
		switch string(unescapeKey(k)) {
		case "type":
			rawType = v
		case "data":
			msgData = v
		default:
			if !hasExtra {
				extra, hasExtra = string(unescapeKey(k)), true
			}
		}
		return true
	})
	// A type that is not a string reads as "", an unknown type. A type
	// without escapes is looked up without a copy.
	var t []byte
	if len(rawType) >= 2 && rawType[0] == '"' && bytes.IndexByte(rawType, '\\') < 0 {
		t = rawType[1 : len(rawType)-1]
	} else if s, ok := stringValue(rawType); ok {
		t = []byte(s)
	}
	allowed, ok := wsFields[string(t)]
	if !ok {
		return MsgError, ErrorData{Message: "Unknown message type: " + string(t), Code: CodeUnknownType}, false
	}
	if msgData != nil && !allowed["data"] {
		return MsgError, invalid(FieldError{Type: "extra_forbidden", Loc: []any{"data"}, Msg: "Extra inputs are not permitted"}), false
	}
	if hasExtra {
		return MsgError, invalid(FieldError{Type: "extra_forbidden", Loc: []any{extra}, Msg: "Extra inputs are not permitted"}), false
	}
	switch string(t) {
	case MsgClose:
		return "", nil, true
	case MsgState:
		return MsgState, ss.env.State(), false
	case MsgReset:
		return ss.doReset(msgData)
	case MsgMCP:
		return ss.doMCP(msgData)
	default:
		return ss.doStep(msgData)
	}
}

func invalid(errs ...FieldError) ErrorData {
	return ErrorData{Message: "Invalid message", Code: CodeValidationError, Errors: errs}
}

func (ss *session) doReset(data json.RawMessage) (string, any, bool) {
	if data == nil || string(data) == "null" {
		data = json.RawMessage(`{}`)
	}
	if !startsObject(data) { // handle's decoder checked it
		return MsgError, invalid(FieldError{Type: "dict_type", Loc: []any{"data"}, Msg: "Input should be a valid dictionary"}), false
	}
	var req ResetRequest
	// handle checked the message: no decoder need check data again.
	if err := req.UnmarshalJSON(data); err != nil {
		return MsgError, invalid(FieldError{Type: "value_error", Loc: []any{"data"}, Msg: err.Error()}), false
	}
	if errs := req.Validate(); len(errs) > 0 {
		for i := range errs {
			errs[i].Loc = append([]any{"data"}, errs[i].Loc...)
		}
		return MsgError, invalid(errs...), false
	}
	ctx, _ := ss.deadline.get(ss.ctx, ss.s.cfg.StepTimeout)
	obs, err := ss.env.Reset(ctx, req.Seed, deref(req.EpisodeID))
	if err == nil {
		ss.reset, ss.steps = true, 0
	}
	return ss.observation(obs, err)
}

func (ss *session) doStep(data json.RawMessage) (string, any, bool) {
	if data == nil {
		return MsgError, invalid(FieldError{Type: "missing", Loc: []any{"data"}, Msg: "Field required"}), false
	}
	if !startsObject(data) { // as in doReset
		return MsgError, invalid(FieldError{Type: "dict_type", Loc: []any{"data"}, Msg: "Input should be a valid dictionary"}), false
	}
	if ss.reset && ss.steps >= ss.s.cfg.MaxSteps {
		return MsgError, ErrorData{Message: fmt.Sprintf("%v (%d steps)", ErrStepLimit, ss.s.cfg.MaxSteps), Code: CodeExecutionError}, false
	}
	ctx, _ := ss.deadline.get(ss.ctx, ss.s.cfg.StepTimeout)
	obs, err := ss.env.Step(ctx, data)
	if ss.reset {
		ss.steps++
	}
	return ss.observation(obs, err)
}

// doMCP answers a JSON-RPC request on the session's environment. Every
// request gets an answer, a notification too, as OpenEnv's server does.
func (ss *session) doMCP(data json.RawMessage) (string, any, bool) {
	if !startsObject(data) { // as in doReset
		return MsgError, invalid(FieldError{Type: "dict_type", Loc: []any{"data"}, Msg: "Input should be a valid dictionary"}), false
	}
	req, rerr := parseRPC(data)
	if rerr != nil {
		return MsgMCP, RPCResponse{JSONRPC: "2.0", Error: rerr, ID: idOrNull(req.ID)}, false
	}
	return MsgMCP, ss.s.rpc(ss.ctx, rpcCall{req: req, ws: ss}), false
}

// failed answers a reset or a step that failed on the WebSocket. Only a
// failure pays for errors.As's target on the heap.
func (ss *session) failed(err error) (string, any, bool) {
	var verr *ValidationError
	if errors.As(err, &verr) {
		errs := make([]FieldError, len(verr.Errors))
		for i, e := range verr.Errors {
			e.Loc = append([]any{"data"}, e.Loc...)
			errs[i] = e
		}
		return MsgError, invalid(errs...), false
	}
	if !errors.Is(err, ErrNoEpisode) && !errors.Is(err, ErrEpisodeDone) {
		ss.s.cfg.Log.Warn("openenv: environment failed", "err", err)
	}
	return MsgError, ErrorData{Message: err.Error(), Code: CodeExecutionError}, false
}

// observation answers a reset or a step on the WebSocket.
func (ss *session) observation(obs Observation, err error) (string, any, bool) {
	if err != nil {
		return ss.failed(err)
	}
	// The observation is encoded in the session's buffer: it is sent
	// before the next message is read.
	res, err := obs.result(ss.obs)
	if err != nil {
		return MsgError, ErrorData{Message: err.Error(), Code: CodeExecutionError}, false
	}
	ss.obs, ss.res = res.Observation, res
	return MsgObservation, &ss.res, false // a pointer: a Result in an interface is a copy on the heap
}
