// Package standin is a stand-in OpenAI-compatible Chat Completions server for benchmarks and load tests.
// It is never a stand-in for a feature.
// It answers on loopback after a configurable latency, deterministically from the messages and a seed.
// Its answers are the ones each stage of package strategy expects, with a realistic usage block,
// and it injects faults at configured rates.
// It holds requests to the rules of package openai/wire, as the client and delegate serve do, and refuses streaming.
// docs/standin.md gives its endpoints, its stages and how it counts usage.
package standin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/openai/wire"
)

// maxBody bounds a request body; maxPooled bounds the buffers kept for
// reuse.
const (
	maxBody   = 16 << 20
	maxPooled = 1 << 20
)

// Server is a stand-in Chat Completions server. Its ServeHTTP may be mounted
// anywhere (httptest.Server included) and is safe for concurrent use; Start
// serves it on a loopback address until Close.
type Server struct {
	cfg    Config
	filler filler
	seq    atomic.Uint64
	models []byte

	closing   chan struct{} // closed by Close: waiting handlers give up
	closeOnce sync.Once

	mu   sync.Mutex
	http *http.Server
	ln   net.Listener
	done chan error // Serve's result, once

	reqPool sync.Pool // *wire.ChatRequest
	bufPool sync.Pool // *[]byte: request bodies, then response bodies

	st      counters
	metrics *edge.Metrics
}

type counters struct {
	requests, bad, canceled, inFlight, maxInFlight atomic.Int64
	faults                                         [faultGarbage + 1]atomic.Int64
	answers                                        [NumKinds]atomic.Int64
}

// Stats is a snapshot of a server's counters.
type Stats struct {
	Requests    int64       `json:"requests"`      // chat completion requests received
	BadRequests int64       `json:"bad_requests"`  // answered 4xx: malformed JSON, no messages, streaming...
	Canceled    int64       `json:"canceled"`      // clients gone (or the server closing) before their answer
	InFlight    int64       `json:"in_flight"`     // chat completion requests being handled now
	MaxInFlight int64       `json:"max_in_flight"` // the most handled at once
	Faults      FaultCounts `json:"faults"`
	// Answers counts proper answers written, by kind (index by Kind); a Slow
	// fault's answer counts here too once written.
	Answers [NumKinds]int64 `json:"answers"`
}

// FaultCounts counts the faults injected, by kind.
type FaultCounts struct {
	RateLimit   int64 `json:"rate_limit"`
	ServerError int64 `json:"server_error"`
	Reset       int64 `json:"reset"`
	Truncated   int64 `json:"truncated"`
	Slow        int64 `json:"slow"`
	Garbage     int64 `json:"garbage"`
}

// Total is the number of faults of every kind.
func (f FaultCounts) Total() int64 {
	return f.RateLimit + f.ServerError + f.Reset + f.Truncated + f.Slow + f.Garbage
}

// AnswersTotal is the number of proper answers written.
func (s Stats) AnswersTotal() int64 {
	var n int64
	for _, a := range s.Answers {
		n += a
	}
	return n
}

// New checks cfg (see Config.Validate) and returns a server ready for
// ServeHTTP or Start.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new standin: %w", err)
	}
	s := &Server{
		cfg:     cfg,
		filler:  newFiller(2*cfg.ReplyBytes+4096, cfg.Seed),
		closing: make(chan struct{}),
	}
	var m []byte
	m = append(m, `{"object":"list","data":[{"id":`...)
	m = appendString(m, cfg.Model)
	m = append(m, `,"object":"model","created":0,"owned_by":"standin"}]}`...)
	s.models = m
	reg, err := edge.NewMetrics()
	if err == nil {
		err = reg.Register(collector{s})
	}
	if err != nil {
		return nil, fmt.Errorf("new standin: %w", err)
	}
	s.metrics = reg
	s.reqPool.New = func() any { return new(wire.ChatRequest) }
	s.bufPool.New = func() any { b := make([]byte, 0, 8<<10); return &b }
	return s, nil
}

// Config returns the server's configuration.
func (s *Server) Config() Config { return s.cfg }

// Stats returns a snapshot of the counters; each is read atomically, the
// whole is not one instant.
func (s *Server) Stats() Stats {
	st := Stats{
		Requests:    s.st.requests.Load(),
		BadRequests: s.st.bad.Load(),
		Canceled:    s.st.canceled.Load(),
		InFlight:    s.st.inFlight.Load(),
		MaxInFlight: s.st.maxInFlight.Load(),
		Faults: FaultCounts{
			RateLimit:   s.st.faults[faultRateLimit].Load(),
			ServerError: s.st.faults[faultServerError].Load(),
			Reset:       s.st.faults[faultReset].Load(),
			Truncated:   s.st.faults[faultTruncated].Load(),
			Slow:        s.st.faults[faultSlow].Load(),
			Garbage:     s.st.faults[faultGarbage].Load(),
		},
	}
	for k := range st.Answers {
		st.Answers[k] = s.st.answers[k].Load()
	}
	return st
}

// Start listens on addr, a loopback address, and serves in the background until Close.
// An empty addr means 127.0.0.1:0, a free port. Addr and URL say where.
func (s *Server) Start(addr string) error { return s.StartHandler(addr, s) }

// StartHandler is Start serving h instead of s itself: a handler that adds
// routes in front of s. Close stops it all the same.
func (s *Server) StartHandler(addr string, h http.Handler) error {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("start standin on %q: %w", addr, err)
	}
	if !edge.IsLoopback(addr) {
		return fmt.Errorf("start standin on %q: not a loopback address", addr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http != nil {
		return fmt.Errorf("start standin on %q: already serving on %s", addr, s.ln.Addr())
	}
	select {
	case <-s.closing:
		return fmt.Errorf("start standin on %q: server closed", addr)
	default:
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("start standin: %w", err)
	}
	s.ln = ln
	// Its slow faults hold an answer for minutes: a long write timeout.
	s.http = edge.Server(edge.Config{}.Handler(h),
		edge.Timeouts{ReadHeader: 10 * time.Second, Read: time.Minute, Write: 30 * time.Minute, Idle: 90 * time.Second}, nil, slog.LevelDebug)
	s.done = make(chan error, 1)
	go func() { s.done <- s.http.Serve(ln) }()
	return nil
}

// Addr returns the address Start listens on, or "" before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// URL returns the base URL of the API ("http://127.0.0.1:PORT/v1"), or ""
// before Start.
func (s *Server) URL() string {
	a := s.Addr()
	if a == "" {
		return ""
	}
	return "http://" + a + "/v1"
}

// Close makes every waiting handler give up and, after Start, stops serving.
// It closes the listener and every connection, and returns once the serving goroutine has ended.
// Requests still waiting count as Canceled. It may be called more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.mu.Lock()
	srv, done := s.http, s.done
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(ctx)
	if err != nil {
		err = srv.Close()
	}
	if serr := <-done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = serr
	}
	done <- http.ErrServerClosed // for a later Close
	if err != nil {
		return fmt.Errorf("close standin: %w", err)
	}
	return nil
}

// ServeHTTP routes the endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/chat/completions", "/chat/completions":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "use POST for chat completions")
			return
		}
		s.chat(w, r)
	case "/v1/models", "/models":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", http.MethodGet)
			writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "use GET for models")
			return
		}
		writeJSON(w, http.StatusOK, s.models)
	case "/health":
		writeJSON(w, http.StatusOK, healthBody)
	case "/metrics":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", http.MethodGet)
			writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "use GET for metrics")
			return
		}
		s.metrics.ServeHTTP(w, r)
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", "unknown path "+strconv.Quote(r.URL.Path))
	}
}

var (
	healthBody = []byte(`{"status":"ok"}`)
	jsonType   = []string{"application/json"}
)

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body) // a client gone mid-write is the client's business
}

// writeError writes an OpenAI-style error body.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, errorBody(typ, "", msg))
}

func errorBody(typ, code, msg string) []byte {
	b := make([]byte, 0, 96+len(msg))
	b = append(b, `{"error":{"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"param":null,"code":`...)
	if code == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, code)
	}
	return append(b, "}}"...)
}

// raise sets m to n if n is larger.
func raise(m *atomic.Int64, n int64) {
	for {
		old := m.Load()
		if n <= old || m.CompareAndSwap(old, n) {
			return
		}
	}
}

// chat answers one chat completion request.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	s.st.requests.Add(1)
	raise(&s.st.maxInFlight, s.st.inFlight.Add(1))
	defer s.st.inFlight.Add(-1)
	d := draws{key: splitmix64(s.cfg.Seed ^ splitmix64(s.seq.Add(1)))}

	bp := s.bufPool.Get().(*[]byte)
	buf, err := readBody(http.MaxBytesReader(w, r.Body, maxBody), (*bp)[:0])
	defer func() {
		if cap(buf) <= maxPooled {
			*bp = buf[:0]
			s.bufPool.Put(bp)
		}
	}()
	if err != nil {
		s.st.bad.Add(1)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("body exceeds %d bytes", maxBody))
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "read body: "+err.Error())
		return
	}
	req, err := s.decode(buf)
	if err != nil {
		s.st.bad.Add(1)
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid request: "+err.Error())
		return
	}

	flt := s.cfg.Faults.pick(d.float())
	if flt == faultRateLimit {
		s.reqPool.Put(req)
		s.st.faults[flt].Add(1)
		s.rateLimited(w)
		return
	}

	// Build the answer now, so that only its bytes wait out the latency.
	f := read(req, s.cfg.Seed)
	buf = s.response(buf[:0], req, &f, d.float()) // the request's strings are copies: buf is free
	body := buf
	s.reqPool.Put(req)

	delay := s.cfg.latency(&d)
	if flt == faultSlow {
		delay = s.cfg.SlowDelay
	}
	if flt != faultNone {
		s.st.faults[flt].Add(1)
	}
	if !s.wait(r.Context(), delay) {
		s.st.canceled.Add(1)
		return
	}
	s.answer(w, flt, body, f.kind)
}

// decode reads a request from a pooled one; the caller puts it back.
func (s *Server) decode(buf []byte) (*wire.ChatRequest, error) {
	req := s.reqPool.Get().(*wire.ChatRequest)
	reset(req)
	err := json.Unmarshal(buf, req)
	if err == nil {
		err = validate(req)
	}
	if err != nil {
		s.reqPool.Put(req)
		return nil, err
	}
	return req, nil
}

// rateLimited writes the 429 of the rate-limit fault, with OpenAI's
// Retry-After headers.
func (s *Server) rateLimited(w http.ResponseWriter) {
	ra := s.cfg.RetryAfter
	h := w.Header()
	h.Set("Retry-After", strconv.FormatInt(int64((ra+time.Second-1)/time.Second), 10))
	h.Set("Retry-After-Ms", strconv.FormatInt(ra.Milliseconds(), 10))
	writeJSON(w, http.StatusTooManyRequests, rateLimitBody)
}

// answer writes body, the answer of the given kind, as the fault flt
// says.
func (s *Server) answer(w http.ResponseWriter, flt fault, body []byte, kind Kind) {
	switch flt {
	case faultServerError:
		writeJSON(w, http.StatusInternalServerError, serverErrorBody)
	case faultReset:
		s.reset(w, body)
	case faultTruncated:
		cut := len(body) / 2
		writeJSON(w, http.StatusOK, body[:cut])
	case faultGarbage:
		h := w.Header()
		h["Content-Type"] = jsonType
		h["Content-Length"] = []string{strconv.Itoa(len(garbageBody))}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(garbageBody) // a client gone mid-write is the client's business
	default:
		writeJSON(w, http.StatusOK, body)
		s.st.answers[kind].Add(1)
	}
}

var (
	rateLimitBody   = errorBody("requests", "rate_limit_exceeded", "Rate limit reached for requests (stand-in fault). Please try again later.")
	serverErrorBody = errorBody("server_error", "", "The server had an error while processing your request (stand-in fault).")
	garbageBody     = []byte("<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n" +
		"<body><center><h1>502 Bad Gateway</h1></center><hr><center>stand-in</center></body></html>\n")
)

// wait sleeps for d, or until the client goes away or the server closes.
// It reports whether the full delay passed.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.closing:
		return false
	}
}

// reset writes the headers and half the body, then closes the connection
// with a TCP reset. Where the connection cannot be hijacked (HTTP/2), it
// aborts the response instead.
func (s *Server) reset(w http.ResponseWriter, body []byte) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer conn.Close()
	head := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	_, _ = rw.WriteString(head)         // the connection is being thrown away
	_, _ = rw.Write(body[:len(body)/2]) // likewise
	_ = rw.Flush()                      // likewise
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with RST, not FIN: a reset, not a short body
	}
}

// response appends the JSON body of the answer to b. u is a uniform draw
// for the response id.
func (s *Server) response(b []byte, req *wire.ChatRequest, f *facts, u float64) []byte {
	nChoices := req.Choices()
	maxTokens := req.MaxCompletion()
	b = append(b, `{"id":"chatcmpl-`...)
	b = appendHex(b, uint64(u*(1<<53))^f.hash)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"model":`...)
	b = appendString(b, s.cfg.Model)
	b = append(b, `,"system_fingerprint":"fp_standin","choices":[`...)
	completion := 0
	var args []byte
	for c := range nChoices {
		rep := s.compose(f, c)
		rep.limit(maxTokens)
		if c > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = appendInt(b, c)
		b = append(b, `,"message":{"role":"assistant","content":`...)
		if rep.text == nil {
			b = append(b, "null"...)
		} else {
			b = appendString(b, rep.text)
			completion += tokens(len(rep.text))
		}
		if len(rep.questions) > 0 {
			b = append(b, `,"tool_calls":[`...)
			for i, q := range rep.questions {
				if i > 0 {
					b = append(b, ',')
				}
				args = append(args[:0], `{"question":`...)
				args = appendString(args, q)
				args = append(args, '}')
				completion += tokens(len(args) + len(DelegateTool) + perMessageBytes)
				b = append(b, `{"id":"call_`...)
				b = appendHex(b, splitmix64(f.hash+uint64(c)<<8+uint64(i)))
				b = append(b, `","type":"function","function":{"name":"`...)
				b = append(b, DelegateTool...)
				b = append(b, `","arguments":`...)
				b = appendString(b, args)
				b = append(b, "}}"...)
			}
			b = append(b, ']')
		}
		b = append(b, `},"logprobs":null,"finish_reason":"`...)
		b = append(b, rep.finish...)
		b = append(b, `"}`...)
	}
	prompt := tokens(f.promptBytes)
	b = append(b, `],"usage":{"prompt_tokens":`...)
	b = appendInt(b, prompt)
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, completion)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, prompt+completion)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = appendInt(b, f.cachedBytes/bytesPerToken)
	b = append(b, `}}}`...)
	return b
}
