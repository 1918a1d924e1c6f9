package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/trajectory/openenv"
)

// The floor arms run each episode in process, as the in-process arm does.
// Each reset and step also makes one round trip on a bare transport:
// the same WebSocket library, or net/http, behind the same edge and server set-up.
// The messages have the real protocol's sizes, recorded from the same episodes.
// The floor's server answers at once with a message of the real answer's size.
// It parses nothing and looks nothing up: the client sets the size aside for it.
// So a floor arm's CPU over the in-process arm's is the least that any
// implementation of the transport adds on this stack.

// maxMessage bounds a floor message, as the server's MaxMessageBytes does.
const maxMessage = 1 << 20

// wsClose is the message a WebSocket session sends before it closes.
var wsClose = []byte(`{"type":"close"}`)

// jsonType is the Content-Type of every answer, shared: net/http copies
// a handler's header and never writes into a value.
var jsonType = []string{"application/json"}

// sessionID stands in for an HTTP MCP session's id: 32 hex digits.
const sessionID = "00000000000000000000000000000000"

// roundTrip is the size of a request and of its answer, in bytes.
type roundTrip struct{ req, resp int }

// episodeSizes are one episode's messages on each transport, as the real protocol writes them.
type episodeSizes struct {
	ws  []roundTrip // the reset, then each step
	mcp []roundTrip // the session's reset, then each tools/call
	// mcpCreate is the request that opens an HTTP MCP session with this episode.
	mcpCreate int
}

// The HTTP MCP session's last round trip: openenv/session/close and its answer.
var mcpClose = roundTrip{
	req:  len(`{"jsonrpc":"2.0","method":"openenv/session/close","params":{"session_id":"` + sessionID + `"},"id":1}`),
	resp: len(`{"jsonrpc":"2.0","result":{"closed":true,"session_id":"`+sessionID+`"},"id":1}`) + 1,
}

// recorder runs episodes in process and records their messages' sizes by seed.
// Each seed is one worker's, so the workers write apart.
type recorder struct {
	*local
	sizes []episodeSizes
	cur   *episodeSizes
}

func (r *recorder) Reset(ctx context.Context, req openenv.ResetRequest) (openenv.Result, error) {
	if req.Seed == nil || *req.Seed < 0 || *req.Seed >= int64(len(r.sizes)) {
		return openenv.Result{}, fmt.Errorf("record: seed out of the run's range")
	}
	obs, err := r.env.Reset(ctx, req.Seed, "")
	if err != nil {
		return openenv.Result{}, err
	}
	res, err := obs.Result()
	if err != nil {
		return openenv.Result{}, err
	}
	data, err := openenv.MarshalUnescaped(req)
	if err != nil {
		return openenv.Result{}, err
	}
	r.cur = &r.sizes[*req.Seed]
	seed := strconv.FormatInt(*req.Seed, 10)
	r.cur.mcpCreate = len(`{"jsonrpc":"2.0","method":"openenv/session/create","params":{"seed":` + seed + `},"id":1}`)
	mcpReq := len(`{"jsonrpc":"2.0","method":"openenv/session/reset","params":{"seed":` + seed + `,"session_id":"` + sessionID + `"},"id":1}`)
	r.cur.ws = []roundTrip{{wsMessage("reset", data), wsAnswer(res)}}
	r.cur.mcp = []roundTrip{{mcpReq, mcpResetAnswer(res)}}
	return openenv.Result{Reward: res.Reward, Done: res.Done}, nil
}

func (r *recorder) Step(ctx context.Context, action any) (openenv.Result, error) {
	a, ok := action.(openenv.ToolAction)
	if !ok || r.cur == nil {
		return openenv.Result{}, fmt.Errorf("record: a step before a reset, or %T, not a ToolAction", action)
	}
	raw, err := json.Marshal(action) // as the in-process arm encodes it
	if err != nil {
		return openenv.Result{}, err
	}
	obs, err := r.env.Step(ctx, raw)
	if err != nil {
		return openenv.Result{}, err
	}
	res, err := obs.Result()
	if err != nil {
		return openenv.Result{}, err
	}
	data, err := openenv.MarshalUnescaped(a)
	if err != nil {
		return openenv.Result{}, err
	}
	req, err := mcpCallRequest(a)
	if err != nil {
		return openenv.Result{}, err
	}
	resp, err := mcpCallAnswer(obs, res)
	if err != nil {
		return openenv.Result{}, err
	}
	r.cur.ws = append(r.cur.ws, roundTrip{wsMessage("step", data), wsAnswer(res)})
	r.cur.mcp = append(r.cur.mcp, roundTrip{req, resp})
	return openenv.Result{Reward: res.Reward, Done: res.Done}, nil
}

// wsMessage is the size of the WebSocket message of type typ carrying data.
func wsMessage(typ string, data []byte) int {
	return len(`{"type":"`+typ+`","data":`) + len(data) + len(`}`)
}

// wsAnswer is the size of the observation message that answers a reset or a step.
func wsAnswer(res openenv.Result) int {
	b, _ := json.Marshal(res) // Observation.Result's observation and a finite reward always encode
	return wsMessage("observation", b)
}

// mcpResetAnswer is the size of a session's create or reset answer, less
// the digits of its episode number, which the session adds.
func mcpResetAnswer(res openenv.Result) int {
	b, _ := json.Marshal(res) // as in wsAnswer
	// The result's own "{" gives way to the session's members.
	return len(`{"jsonrpc":"2.0","result":{"session_id":"`+sessionID+`","episode":,`) + len(b) - 1 + len(`,"id":1}`) + 1
}

// mcpCallRequest is the size of the tools/call request of a call_tool action.
func mcpCallRequest(a openenv.ToolAction) (int, error) {
	name, err := openenv.MarshalUnescaped(a.ToolName)
	if err != nil {
		return 0, err
	}
	n := len(`{"jsonrpc":"2.0","method":"tools/call","params":{"session_id":"`+sessionID+`","name":`) + len(name) +
		len(`,"arguments":`) + len(a.Arguments) + len(`},"id":1}`)
	if a.Metadata != nil {
		meta, err := openenv.MarshalUnescaped(a.Metadata)
		if err != nil {
			return 0, err
		}
		n += len(`,"metadata":`) + len(meta)
	}
	return n, nil
}

// mcpCallAnswer is the size of a tools/call answer: MCP's content and
// isError, the observation's members, reward and done.
func mcpCallAnswer(obs openenv.Observation, res openenv.Result) (int, error) {
	o, ok := obs.Value.(openenv.DelegationObservation)
	if !ok {
		return 0, fmt.Errorf("record: observation %T, want the delegation environment's", obs.Value)
	}
	text, isError := o.Result, o.Error != nil
	if o.Error != nil {
		text = o.Error.Message
	}
	t, _ := json.Marshal(text) // a string always encodes
	reward, _ := json.Marshal(res.Reward)
	inner := bytes.TrimSpace(res.Observation[1 : len(res.Observation)-1])
	n := len(`{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":`) + len(t) + len(`}],"isError":`) + len(strconv.FormatBool(isError))
	if len(inner) > 0 {
		n += 1 + len(inner)
	}
	n += len(`,"reward":`) + len(reward) + len(`,"done":`) + len(strconv.FormatBool(res.Done)) + len(`}`)
	return n + len(`,"id":1}`) + 1, nil
}

// floor is the bare server of both floor arms, on its own listener, and
// what its clients share with it.
// A client takes a slot for its session, names it in its path and sets
// there the size of the answer to its next request.
// Its sessions' requests come one at a time.
type floor struct {
	addr   string
	filler []byte // the bytes of every floor message: the first n of them
	slots  []atomic.Int64
	free   chan int // the slots not taken
	pool   sync.Pool
	hs     *http.Server
}

// startFloor serves the floor on loopback, behind the edge and with the
// timeouts of the environment's server. It has slots for sessions
// sessions at once, and messages of up to size bytes.
func startFloor(sessions, size int) (*floor, error) {
	if size > maxMessage {
		return nil, fmt.Errorf("floor: a recorded message of %d bytes is over %d", size, maxMessage)
	}
	f := &floor{filler: bytes.Repeat([]byte("x"), size), slots: make([]atomic.Int64, sessions), free: make(chan int, sessions),
		pool: sync.Pool{New: func() any { return new(bytes.Buffer) }}}
	for i := range sessions {
		f.free <- i
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f.addr = ln.Addr().String()
	f.hs = edge.Server(edge.Config{}.Handler(f), edge.DefaultTimeouts(), slog.New(slog.DiscardHandler), slog.LevelWarn)
	go func() { _ = f.hs.Serve(ln) }() // ends at close
	return f, nil
}

func (f *floor) close() error { return f.hs.Close() }

// path is the path of slot k's requests: as long as the real endpoint's,
// real, while k has few enough digits.
func path(real string, k int) string { return fmt.Sprintf("/%0*d", len(real)-1, k) }

// ServeHTTP answers a POST as HTTP MCP's endpoint would, and upgrades any
// other request to a WebSocket.
func (f *floor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k, err := strconv.Atoi(r.URL.Path[1:])
	if err != nil || k < 0 || k >= len(f.slots) {
		http.NotFound(w, r)
		return
	}
	if r.Method == http.MethodPost {
		f.answer(w, r, &f.slots[k])
		return
	}
	f.echo(w, r, &f.slots[k])
}

// answer reads a request's body, as the MCP endpoint does into a pooled
// buffer, and answers the size set aside.
func (f *floor) answer(w http.ResponseWriter, r *http.Request, slot *atomic.Int64) {
	in := f.pool.Get().(*bytes.Buffer)
	defer f.pool.Put(in)
	in.Reset()
	if _, err := in.ReadFrom(http.MaxBytesReader(w, r.Body, maxMessage)); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header()["Content-Type"] = jsonType // one shared slice, as the MCP endpoint's
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(f.filler[:slot.Load()]) // a failed write means the client went away
}

// echo serves a WebSocket: it answers each message with the size set
// aside, and closes on the close message.
func (f *floor) echo(w http.ResponseWriter, r *http.Request, slot *atomic.Int64) {
	// As the environment's server: the session outlives the edge's deadlines.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	c.SetReadLimit(maxMessage)
	ctx := context.Background()
	var in bytes.Buffer
	for {
		if err := read(ctx, c, &in); err != nil {
			return // the client left
		}
		if bytes.Equal(in.Bytes(), wsClose) {
			_ = c.Close(websocket.StatusNormalClosure, "") // the client asked; its leaving is no failure
			return
		}
		if c.Write(ctx, websocket.MessageText, f.filler[:slot.Load()]) != nil {
			return
		}
	}
}

// read reads one message into buf, as the environment's server and client do.
func read(ctx context.Context, c *websocket.Conn, buf *bytes.Buffer) error {
	_, r, err := c.Reader(ctx)
	if err != nil {
		return err
	}
	buf.Reset()
	_, err = buf.ReadFrom(r)
	return err
}

// floorSession runs episodes in process, as the in-process arm does, and
// makes each reset's and step's round trip on the floor at the real sizes.
type floorSession struct {
	*local
	sizes  []episodeSizes
	mcp    bool // HTTP MCP's sizes, else the WebSocket's
	trips  []roundTrip
	next   int // the next of trips
	opened int // the episodes of the session so far
	f      *floor
	k      int // the slot
	in     bytes.Buffer
	ws     *websocket.Conn // the WebSocket arm's connection
	hc     *http.Client    // the HTTP arm's client
	proto  *http.Request   // what each of the HTTP arm's posts copies, as MCPSession's do
	req    *http.Request   // the last copy, reused under the same context, as MCPSession's is
	ctx    context.Context // req's
	b      []byte          // req's body
	rd     bytes.Reader    // reads b
	body   io.ReadCloser   // rd without a Close, which net/http knows: one write a request
}

// openFloor opens a floor session over the WebSocket, or HTTP MCP when
// mcp is set.
func openFloor(ctx context.Context, d *openenv.Delegation, f *floor, sizes []episodeSizes, hc *http.Client, mcp bool) (*floorSession, error) {
	l, err := inProcess(d)
	if err != nil {
		return nil, err
	}
	s := &floorSession{local: l, sizes: sizes, mcp: mcp, f: f, hc: hc}
	select {
	case s.k = <-f.free:
	default:
		return nil, errors.New("floor: every slot is taken")
	}
	if mcp {
		// The URL is parsed and the header made once, as MCPSession does.
		if s.proto, err = http.NewRequest(http.MethodPost, "http://"+f.addr+path("/mcp", s.k), nil); err != nil {
			f.free <- s.k
			return nil, fmt.Errorf("floor post: %w", err)
		}
		s.proto.Header.Set("Content-Type", "application/json")
		return s, nil
	}
	c, _, err := websocket.Dial(ctx, "ws://"+f.addr+path("/ws", s.k), &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		f.free <- s.k
		return nil, fmt.Errorf("floor dial: %w", err)
	}
	c.SetReadLimit(maxMessage)
	s.ws = c
	return s, nil
}

func (s *floorSession) Reset(ctx context.Context, req openenv.ResetRequest) (openenv.Result, error) {
	res, err := s.local.Reset(ctx, req)
	if err != nil {
		return res, err
	}
	if req.Seed == nil || *req.Seed < 0 || *req.Seed >= int64(len(s.sizes)) {
		return res, fmt.Errorf("floor: seed out of the run's range")
	}
	es := s.sizes[*req.Seed]
	s.opened++
	s.trips, s.next = es.ws, 1
	if s.mcp {
		s.trips = es.mcp
	}
	rt := s.trips[0]
	if s.mcp {
		if s.opened == 1 {
			rt.req = es.mcpCreate
		}
		rt.resp += len(strconv.Itoa(s.opened))
	}
	return res, s.trip(ctx, rt)
}

func (s *floorSession) Step(ctx context.Context, action any) (openenv.Result, error) {
	res, err := s.local.Step(ctx, action)
	if err != nil {
		return res, err
	}
	if s.next >= len(s.trips) {
		return res, fmt.Errorf("floor: step %d of an episode recorded with %d", s.next, len(s.trips)-1)
	}
	s.next++
	return res, s.trip(ctx, s.trips[s.next-1])
}

// trip sends a request of rt.req bytes and reads the answer of rt.resp.
func (s *floorSession) trip(ctx context.Context, rt roundTrip) error {
	s.f.slots[s.k].Store(int64(rt.resp))
	if s.mcp {
		return s.post(ctx, rt)
	}
	if err := s.ws.Write(ctx, websocket.MessageText, s.f.filler[:rt.req]); err != nil {
		return fmt.Errorf("floor send: %w", err)
	}
	if err := read(ctx, s.ws, &s.in); err != nil {
		return fmt.Errorf("floor receive: %w", err)
	}
	if s.in.Len() != rt.resp {
		return fmt.Errorf("floor: an answer of %d bytes, want %d", s.in.Len(), rt.resp)
	}
	return nil
}

// post makes the HTTP round trip as the MCP client does: a copy of one
// request, reused while the context is the same, its body reset.
func (s *floorSession) post(ctx context.Context, rt roundTrip) error {
	if s.req == nil || ctx != s.ctx { // the run's contexts are comparable
		s.req, s.ctx = s.proto.WithContext(ctx), ctx
		s.req.GetBody = s.reopen
		s.body = io.NopCloser(&s.rd)
	}
	s.b = s.f.filler[:rt.req]
	s.rd.Reset(s.b)
	req := s.req
	req.Body, req.ContentLength = s.body, int64(rt.req)
	resp, err := s.hc.Do(req)
	if err != nil {
		return fmt.Errorf("floor post: %w", err)
	}
	defer resp.Body.Close()
	s.in.Reset()
	if _, err := s.in.ReadFrom(io.LimitReader(resp.Body, maxMessage)); err != nil {
		return fmt.Errorf("floor post: read: %w", err)
	}
	if resp.StatusCode != http.StatusOK || s.in.Len() != rt.resp {
		return fmt.Errorf("floor post: HTTP %d, an answer of %d bytes, want %d", resp.StatusCode, s.in.Len(), rt.resp)
	}
	return nil
}

// reopen is GetBody: the same bytes from the start.
func (s *floorSession) reopen() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(s.b)), nil
}

// Close ends the session as the real one ends: a close message and the
// WebSocket's close, or openenv/session/close.
func (s *floorSession) Close() error {
	defer func() { s.f.free <- s.k }()
	var err error
	switch {
	case s.mcp && s.opened > 0:
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = s.trip(ctx, mcpClose)
		cancel()
	case !s.mcp:
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = s.ws.Write(ctx, websocket.MessageText, wsClose)
		cancel()
		cerr := s.ws.Close(websocket.StatusNormalClosure, "")
		var ce websocket.CloseError
		if err == nil && cerr != nil && !(errors.As(cerr, &ce) && ce.Code == websocket.StatusNormalClosure) {
			err = cerr
		}
	}
	return errors.Join(err, s.local.Close())
}
