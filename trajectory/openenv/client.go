package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/coder/websocket"
)

// Client speaks OpenEnv's protocol to a server at BaseURL. Its HTTP calls
// are stateless, as the protocol's are; Dial opens a Session for an
// episode. A Client is safe for concurrent use.
type Client struct {
	BaseURL string       // such as http://127.0.0.1:8000
	Token   string       // sent as a bearer token when set
	HTTP    *http.Client // nil: http.DefaultClient
	// MaxMessageBytes bounds a message read from a Session. Default 1 MiB.
	MaxMessageBytes int64
}

// Error is a refusal of the server: an HTTP status with FastAPI's detail,
// or a WebSocket error with its code.
type Error struct {
	Status int             // the HTTP status; 0 on a WebSocket
	Code   string          // the WebSocket error's code; "" over HTTP
	Detail json.RawMessage // the HTTP detail, or the WebSocket error's data
	Msg    string
}

func (e *Error) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("openenv error %s: %s", e.Code, e.Msg)
	}
	return fmt.Sprintf("openenv HTTP %d: %s", e.Status, e.Msg)
}

// Reset starts an episode on a fresh environment and returns its first
// observation. The server keeps nothing of it.
func (c *Client) Reset(ctx context.Context, req ResetRequest) (Result, error) {
	var res Result
	return res, c.do(ctx, http.MethodPost, "/reset", req, &res)
}

// Step applies an action on a fresh environment.
func (c *Client) Step(ctx context.Context, req StepRequest) (Result, error) {
	var res Result
	return res, c.do(ctx, http.MethodPost, "/step", req, &res)
}

// State returns a fresh environment's state.
func (c *Client) State(ctx context.Context) (json.RawMessage, error) {
	var st json.RawMessage
	return st, c.do(ctx, http.MethodGet, "/state", nil, &st)
}

// Health returns the server's health.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	return h, c.do(ctx, http.MethodGet, "/health", nil, &h)
}

// Metadata returns the environment's metadata.
func (c *Client) Metadata(ctx context.Context) (Metadata, error) {
	var m Metadata
	return m, c.do(ctx, http.MethodGet, "/metadata", nil, &m)
}

// Schema returns the JSON schemas of actions, observations and states.
func (c *Client) Schema(ctx context.Context) (Schema, error) {
	var s Schema
	return s, c.do(ctx, http.MethodGet, "/schema", nil, &s)
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// do sends one request and decodes a 200's body into out.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := MarshalUnescaped(in)
		if err != nil {
			return fmt.Errorf("openenv %s %s: encode: %w", method, path, err)
		}
		body = b
	}
	var buf bytes.Buffer
	b, err := c.roundTrip(ctx, method, path, body, &buf)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("openenv %s %s: decode: %w", method, path, err)
	}
	return nil
}

// roundTrip sends one request with body, JSON or nil, and reads a 200's
// body into buf. Another status comes back as an *Error.
func (c *Client) roundTrip(ctx context.Context, method, path string, body []byte, buf *bytes.Buffer) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := c.newRequest(ctx, method, path, rd, body != nil)
	if err != nil {
		return nil, err
	}
	return c.exchange(req, method, path, buf)
}

// newRequest makes a request of the server's path, with body and the
// token; isJSON says the body is JSON.
func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader, isJSON bool) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, body)
	if err != nil {
		return nil, fmt.Errorf("openenv %s %s: %w", method, path, err)
	}
	if isJSON {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// postProto returns the request that a poster copies to send JSON to path.
// It is nil when the HTTP client keeps cookies: its jar adds them to a
// request's header, which the copies share.
func (c *Client) postProto(path string) (*http.Request, error) {
	if c.httpClient().Jar != nil {
		return nil, nil
	}
	return c.newRequest(context.Background(), http.MethodPost, path, nil, true)
}

// poster sends the POSTs of one caller whose calls do not overlap. Each
// is a copy of one request, made once: no URL parse and no header map a
// request. While calls pass the same context they reuse the last copy;
// net/http's Transport works on a copy of its own. Each new copy cost an
// allocation, and the body three more.
//
// The body's reader is reused too, after an exchange that succeeded. A
// 200 answer means the server read the whole body, and net/http reads
// and closes a body before it sends the request's last bytes. After a
// failure net/http may still be reading it: the next request gets a
// fresh reader.
type poster struct {
	proto *http.Request // from postProto
	req   *http.Request // the last copy, nil before the first
	b     []byte        // req's body
	rd    *bytes.Reader // reads b; nil after a failure
	// body is rd without a Close. net/http writes a request's header and
	// body in one system call only when it knows the reader: a
	// bytes.Reader, as such or in io.NopCloser.
	body io.ReadCloser
}

// request returns the request that sends body, JSON, under ctx.
func (p *poster) request(ctx context.Context, body []byte) *http.Request {
	if p.req == nil || !sameContext(p.req.Context(), ctx) {
		p.req = p.proto.WithContext(ctx)
		p.req.GetBody = p.reopen
	}
	if p.rd == nil {
		p.rd = new(bytes.Reader)
		p.body = io.NopCloser(p.rd)
	}
	p.b = body
	p.rd.Reset(body)
	p.req.Body, p.req.ContentLength = p.body, int64(len(body))
	return p.req
}

// done takes the end of the last request's exchange: after an error its
// reader is left to net/http.
func (p *poster) done(err error) {
	if err != nil {
		p.rd, p.body = nil, nil
	}
}

// reopen is the request's GetBody: the same bytes from the start, for a
// retry on a fresh connection or a redirect.
func (p *poster) reopen() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(p.b)), nil }

// sameContext reports whether a and b are one context. Two values of a
// type that == cannot compare count as two, where == would panic.
func sameContext(a, b context.Context) bool {
	return reflect.TypeOf(a).Comparable() && a == b
}

// exchange sends req and reads a 200's body into buf. Another status
// comes back as an *Error.
func (c *Client) exchange(req *http.Request, method, path string, buf *bytes.Buffer) ([]byte, error) {
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("openenv %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, c.maxBytes())); err != nil {
		return nil, fmt.Errorf("openenv %s %s: read: %w", method, path, err)
	}
	b := buf.Bytes()
	if resp.StatusCode != http.StatusOK {
		e := &Error{Status: resp.StatusCode, Msg: strings.TrimSpace(string(b))}
		var he HTTPError
		if json.Unmarshal(b, &he) == nil && he.Detail != nil {
			e.Detail = he.Detail
			var s string
			if json.Unmarshal(he.Detail, &s) == nil {
				e.Msg = s
			} else {
				e.Msg = string(he.Detail)
			}
		}
		return nil, fmt.Errorf("openenv %s %s: %w", method, path, e)
	}
	return b, nil
}

func (c *Client) maxBytes() int64 {
	if c.MaxMessageBytes > 0 {
		return c.MaxMessageBytes
	}
	return 1 << 20
}

// Session is one WebSocket connection to a server: one environment, one
// episode at a time. Its calls must not overlap: each waits for its
// answer. Close ends it.
type Session struct {
	conn *websocket.Conn
	in   bytes.Buffer // the last message read, reused
	out  []byte       // the last message sent, reused
}

// Dial opens a session at the server's /ws.
func (c *Client) Dial(ctx context.Context) (*Session, error) {
	u := strings.TrimSuffix(c.BaseURL, "/") + "/ws"
	u = "ws" + strings.TrimPrefix(u, "http")
	opts := &websocket.DialOptions{HTTPClient: c.HTTP}
	if c.Token != "" {
		opts.HTTPHeader = http.Header{"Authorization": {"Bearer " + c.Token}}
	}
	conn, resp, err := websocket.Dial(ctx, u, opts)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("openenv dial %s: HTTP %d: %w", u, resp.StatusCode, err)
		}
		return nil, fmt.Errorf("openenv dial %s: %w", u, err)
	}
	conn.SetReadLimit(c.maxBytes())
	return &Session{conn: conn}, nil
}

// Reset starts an episode and returns its first observation.
func (s *Session) Reset(ctx context.Context, req ResetRequest) (Result, error) {
	// A request without extra fields, as nearly every one is, is written
	// in place by hand.
	if len(req.Extra) == 0 {
		s.out = append(appendReset(append(s.out[:0], `{"type":"`+MsgReset+`","data":`...), req), '}')
		return s.exchangeResult(ctx, MsgReset)
	}
	b, err := MarshalUnescaped(req)
	if err != nil {
		return Result{}, fmt.Errorf("openenv reset: encode: %w", err)
	}
	return s.result(ctx, MsgReset, b)
}

// Step applies action, any value that encodes to a JSON object of the
// environment's action schema.
func (s *Session) Step(ctx context.Context, action any) (Result, error) {
	// A ToolAction, as nearly every step is, is written in place by hand.
	if a, ok := action.(ToolAction); ok {
		b, ok, err := appendAction(append(s.out[:0], `{"type":"`+MsgStep+`","data":`...), a)
		if err != nil {
			return Result{}, fmt.Errorf("openenv step: encode: %w", err)
		}
		if ok {
			s.out = append(b, '}')
			return s.exchangeResult(ctx, MsgStep)
		}
	}
	b, err := MarshalUnescaped(action)
	if err != nil {
		return Result{}, fmt.Errorf("openenv step: encode: %w", err)
	}
	return s.result(ctx, MsgStep, b)
}

// State returns the episode's state.
func (s *Session) State(ctx context.Context) (json.RawMessage, error) {
	m, err := s.Exchange(ctx, Message{Type: MsgState})
	if err != nil {
		return nil, err
	}
	if m.Type != MsgState {
		return nil, fmt.Errorf("openenv state: answer of type %q", m.Type)
	}
	return m.Data, nil
}

// result sends a message of type typ with data, valid compact JSON, and
// reads the observation that answers it.
func (s *Session) result(ctx context.Context, typ string, data []byte) (Result, error) {
	s.out = appendMessage(s.out[:0], typ, data)
	return s.exchangeResult(ctx, typ)
}

// exchangeResult sends the message in s.out, of type typ, and reads the
// observation that answers it.
func (s *Session) exchangeResult(ctx context.Context, typ string) (Result, error) {
	b, err := s.send(ctx, s.out)
	if err != nil {
		return Result{}, err
	}
	// An observation is checked once and its members walked, without a
	// decode. Anything else, an error included, takes the general path
	// with its errors.
	if res, ok := readObservation(b); ok {
		return res, nil
	}
	got, err := decodeMessage(b)
	if err != nil {
		return Result{}, err
	}
	if got.Type != MsgObservation {
		return Result{}, fmt.Errorf("openenv %s: answer of type %q", typ, got.Type)
	}
	var res Result
	if err := json.Unmarshal(got.Data, &res); err != nil {
		return Result{}, fmt.Errorf("openenv %s: decode observation: %w", typ, err)
	}
	return res, nil
}

// readObservation reads an observation message into a Result whose
// observation is a copy. It checks and walks the message in one pass. It
// reports false for any other message, or one it cannot read.
func readObservation(b []byte) (Result, bool) {
	var res Result
	isObs, isObject, ok := false, false, true
	// The last of a repeated member counts, as in a decode.
	end, valid := walkObject(b, skipSpace(b, 0), 1, func(k []byte, i int) (int, bool) {
		switch string(unescapeKey(k)) {
		case "type":
			end, valid := validValue(b, i, 1)
			isObs = valid && string(b[i:end]) == `"`+MsgObservation+`"`
			return end, valid
		case "data":
			res, ok = Result{}, true
			isObject = i < len(b) && b[i] == '{'
			if !isObject {
				return validValue(b, i, 1)
			}
			return walkObject(b, i, 2, func(k []byte, i int) (int, bool) {
				end, valid := validValue(b, i, 2)
				if valid && ok {
					ok = res.readMember(unescapeKey(k), b[i:end])
				}
				return end, valid
			})
		}
		return validValue(b, i, 1)
	})
	if !valid || skipSpace(b, end) != len(b) || !isObs || !isObject || !ok {
		return Result{}, false
	}
	return res, true
}

// readMember reads one member of a reset's or a step's answer into r.
// The members read are the observation, a copy, reward, done and
// metadata. It skips others and reports false for a value of the wrong
// kind.
func (r *Result) readMember(key, v []byte) bool {
	switch string(key) {
	case "observation":
		r.Observation = append(json.RawMessage(nil), v...)
	case "reward":
		r.Reward = nil
		if string(v) != "null" {
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return false
			}
			r.Reward = &f
		}
	case "done":
		r.Done = string(v) == "true"
		return r.Done || string(v) == "false"
	case "metadata":
		r.Metadata = nil
		if string(v) != "null" {
			var md map[string]any // decoded apart, so that r stays on its caller's stack
			if json.Unmarshal(v, &md) != nil {
				return false
			}
			r.Metadata = md
		}
	}
	return true
}

// Exchange sends a message and reads the answer. An error message comes
// back as an *Error.
func (s *Session) Exchange(ctx context.Context, m Message) (Message, error) {
	b, err := MarshalUnescaped(m)
	if err != nil {
		return Message{}, fmt.Errorf("openenv %s: encode: %w", m.Type, err)
	}
	return s.ExchangeRaw(ctx, b)
}

// ExchangeRaw sends raw bytes as a message, malformed or not, and reads
// the answer.
func (s *Session) ExchangeRaw(ctx context.Context, raw []byte) (Message, error) {
	b, err := s.send(ctx, raw)
	if err != nil {
		return Message{}, err
	}
	return decodeMessage(b)
}

// send writes raw and reads the answer into the session's buffer.
func (s *Session) send(ctx context.Context, raw []byte) ([]byte, error) {
	if err := s.conn.Write(ctx, websocket.MessageText, raw); err != nil {
		return nil, fmt.Errorf("openenv send: %w", err)
	}
	b, err := readMessage(ctx, s.conn, &s.in)
	if err != nil {
		return nil, fmt.Errorf("openenv receive: %w", err)
	}
	return b, nil
}

// decodeMessage reads a message; an error message comes back as an
// *Error. The message's data is a copy of b's.
func decodeMessage(b []byte) (Message, error) {
	var got Message
	if err := json.Unmarshal(b, &got); err != nil {
		return Message{}, fmt.Errorf("openenv receive: decode: %w", err)
	}
	if got.Type == MsgError {
		var ed ErrorData
		if err := json.Unmarshal(got.Data, &ed); err != nil {
			return Message{}, fmt.Errorf("openenv receive: decode error: %w", err)
		}
		return got, &Error{Code: ed.Code, Detail: got.Data, Msg: ed.Message}
	}
	return got, nil
}

// Close sends close and closes the connection.
func (s *Session) Close() error {
	b, _ := json.Marshal(Message{Type: MsgClose}) // a constant message always encodes
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	werr := s.conn.Write(ctx, websocket.MessageText, b)
	err := s.conn.Close(websocket.StatusNormalClosure, "")
	var ce websocket.CloseError
	if errors.As(err, &ce) && ce.Code == websocket.StatusNormalClosure {
		err = nil
	}
	if werr != nil {
		// The server may have closed first; the connection is gone either way.
		return nil
	}
	return err
}

// MCP sends one JSON-RPC request to POST /mcp and decodes its result
// into out. A JSON-RPC error comes back as an *RPCError.
func (c *Client) MCP(ctx context.Context, method string, params, out any) error {
	req, err := rpcRequest(method, params)
	if err != nil {
		return err
	}
	var resp RPCResponse
	if err := c.do(ctx, http.MethodPost, "/mcp", req, &resp); err != nil {
		return err
	}
	return resp.decode(method, out)
}

// MCP sends one JSON-RPC request as a WebSocket mcp message, on the
// session's environment, and decodes its result into out.
func (s *Session) MCP(ctx context.Context, method string, params, out any) error {
	req, err := rpcRequest(method, params)
	if err != nil {
		return err
	}
	b, err := MarshalUnescaped(req)
	if err != nil {
		return fmt.Errorf("openenv mcp %s: encode: %w", method, err)
	}
	got, err := s.Exchange(ctx, Message{Type: MsgMCP, Data: b})
	if err != nil {
		return err
	}
	if got.Type != MsgMCP {
		return fmt.Errorf("openenv mcp %s: answer of type %q", method, got.Type)
	}
	var resp RPCResponse
	if err := json.Unmarshal(got.Data, &resp); err != nil {
		return fmt.Errorf("openenv mcp %s: decode: %w", method, err)
	}
	return resp.decode(method, out)
}

func rpcRequest(method string, params any) (RPCRequest, error) {
	req := RPCRequest{JSONRPC: "2.0", Method: method, ID: json.RawMessage("1")}
	if params != nil {
		b, err := MarshalUnescaped(params)
		if err != nil {
			return req, fmt.Errorf("openenv mcp %s: encode params: %w", method, err)
		}
		req.Params = b
	}
	return req, nil
}

func (r RPCResponse) decode(method string, out any) error {
	if r.Error != nil {
		return fmt.Errorf("openenv mcp %s: %w", method, r.Error)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return fmt.Errorf("openenv mcp %s: decode result: %w", method, err)
	}
	return nil
}
