// Package server exposes any delegate.Model as an OpenAI-compatible HTTP server.
// It is what `delegate serve` runs, so that any OpenAI client can call the project's local models.
// It serves chat completions with tools, logprobs and streaming, the model list, health and metrics.
// Concurrent requests reach the model concurrently; a local model batches them in its engine.
// A Server bounds what one client can cost it: key, body size, list lengths, parameters,
// requests generating and waiting, and waiting time.
// Connection timeouts belong to the http.Server that carries the handler.
// docs/serve.md gives the endpoints, the limits and what is refused.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/openai/wire"
)

// Config bounds a Server. DefaultConfig holds the defaults; a zero field
// means zero, and Validate refuses the zeros that would serve nothing.
type Config struct {
	// APIKey, when set, must come with every /v1 request and /metrics as a bearer token.
	// /health stays open for load balancers.
	// It is compared in constant time and never logged.
	APIKey string
	// Hosts lists the host names a request may name besides IP addresses and localhost.
	// It applies when there is no APIKey, as package internal/edge describes.
	Hosts []string
	// MaxBody bounds a request body in bytes, at least 1.
	MaxBody int64
	// MaxN bounds n, the choices one request may ask for (each is a
	// generation); a larger n gets 400. From 1 to wire.MaxN, the format's
	// own bound.
	MaxN int
	// MaxConcurrent bounds the chat completions being generated at once,
	// at least 1.
	MaxConcurrent int
	// MaxQueue bounds the requests waiting for a turn; a request beyond it
	// gets 503 at once; 0: none wait.
	MaxQueue int
	// BodyBudget bounds the bytes of request bodies the server holds at once.
	// It counts bodies being read and those of requests waiting or generating.
	// A body is charged as its bytes arrive, so a client trickling its body holds only what it has sent.
	// A request whose body would pass the budget gets 503.
	// At least MaxBody. (MaxConcurrent+MaxQueue)·MaxBody holds a full body for every request.
	BodyBudget int64
	// QueueTimeout bounds a request's wait for a turn; past it the request
	// gets 503. It must be positive.
	QueueTimeout time.Duration
	// RequestTimeout bounds the generation of one chat completion once it has its turn.
	// Past it the request fails with 504, or a stream ends with an error event.
	// It must be positive.
	RequestTimeout time.Duration
	// System holds default system prompts by model name.
	// A request to that model with no system or developer message gets this one first,
	// as the model was trained with.
	System map[string]string
}

// DefaultConfig returns the defaults: bodies of 1 MiB, n up to 64, 32 generating and 64 waiting.
// 32 is a local model's default batch.
// The body budget is 96 MiB, with 30s in the queue and 5 minutes to generate.
func DefaultConfig() Config {
	c := Config{MaxBody: 1 << 20, MaxN: 64, MaxConcurrent: 32, MaxQueue: 64, QueueTimeout: 30 * time.Second, RequestTimeout: 5 * time.Minute}
	c.BodyBudget = c.FullBodyBudget()
	return c
}

// FullBodyBudget is the body budget that holds a body of MaxBody for every
// request generating or waiting.
func (c Config) FullBodyBudget() int64 {
	return int64(c.MaxConcurrent+c.MaxQueue) * c.MaxBody
}

// Validate reports every bound out of range, naming it.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBody < 1 {
		errs = append(errs, fmt.Errorf("max body %d: want at least 1", c.MaxBody))
	}
	if c.MaxN < 1 || c.MaxN > wire.MaxN {
		errs = append(errs, fmt.Errorf("max n %d is outside 1..%d", c.MaxN, wire.MaxN))
	}
	if c.MaxConcurrent < 1 {
		errs = append(errs, fmt.Errorf("max concurrent %d: want at least 1", c.MaxConcurrent))
	}
	if c.MaxQueue < 0 {
		errs = append(errs, fmt.Errorf("max queue %d must not be negative", c.MaxQueue))
	}
	if c.BodyBudget < c.MaxBody {
		errs = append(errs, fmt.Errorf("body budget %d is below max body %d", c.BodyBudget, c.MaxBody))
	}
	if c.QueueTimeout <= 0 {
		errs = append(errs, fmt.Errorf("queue timeout %v: want a positive duration", c.QueueTimeout))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("request timeout %v: want a positive duration", c.RequestTimeout))
	}
	return errors.Join(errs...)
}

// Timeouts are the connection timeouts `delegate serve` gives its
// http.Server (edge.Timeouts). A streaming response pushes the write
// deadline forward by Write before every event, so a long generation is
// never cut while a client that stops reading is dropped within Write.
type Timeouts = edge.Timeouts

// DefaultTimeouts returns the timeouts `delegate serve` uses by default.
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 6 * time.Minute, Idle: 60 * time.Second}
}

// Server routes requests to models by name. It is an http.Handler, safe for
// concurrent use.
type Server struct {
	cfg     Config
	edge    edge.Config
	models  map[string]delegate.Model
	names   []string
	log     *slog.Logger
	access  *slog.Logger // the access log; nil: none
	created int64
	served  atomic.Int64
	// bodies charges the bytes of the bodies held against BodyBudget.
	// waiting counts the requests waiting for a turn.
	// turns holds one token per request generating.
	bodies  *semaphore.Weighted
	waiting atomic.Int64
	turns   chan struct{}
	// writeTimeout is pushed forward before each streamed event; 0 leaves
	// the connection's deadline alone.
	writeTimeout time.Duration
	metrics      *metrics
	healthHeld   atomic.Int64 // GET /health answers held (policy_version, wait)
	hook         Hook
	observe      func(Completion)
}

// Completion is a chat completion as the server answered it, for an
// observer such as a tracer.
type Completion struct {
	Start   time.Time
	Latency time.Duration
	// Model is the served model the request named; "" when none.
	Model string
	// Request is what the model got; nil when the request was refused
	// before. Response is nil when no generation succeeded.
	Request  *delegate.Request
	Response *delegate.Response
	Stream   bool
	// Status is the HTTP status answered; 499 when the client went away.
	Status int
}

// SetObserver has f see every chat completion once it is answered, on
// the request's goroutine: f must not block. Call it before serving.
func (s *Server) SetObserver(f func(Completion)) { s.observe = f }

// Hook sees each chat completion before generation.
// It gets the HTTP request, the model's name and the request the model gets, default system prompt added.
// It may change req; a recorder asks for logprobs.
// A non-nil refuse turns the call away before it waits for a turn: a *delegate.APIError's
// status, type, code and message are answered, any other error is a 500. done is then not called.
// The done it returns, when not nil, is called once with the outcome. A successful generation
// gives the response, before its body or last events are written; done may change what is sent.
// Anything else gives a *delegate.APIError with the status and message answered
// (499 when the client went away): a failed or timed-out generation, or no turn to generate.
// A Hook runs on the request's goroutine and must be safe for concurrent use.
type Hook func(r *http.Request, model string, req *delegate.Request) (done func(resp *delegate.Response, err error), refuse error)

// SetHook sets the hook every chat completion passes through (package
// gateway's recorder). Call it before serving.
func (s *Server) SetHook(h Hook) { s.hook = h }

// New serves models under their names with DefaultConfig. log may be nil.
func New(log *slog.Logger, models ...delegate.Model) (*Server, error) {
	return NewWithConfig(DefaultConfig(), log, models...)
}

// NewWithConfig serves models under their names, bounded by cfg. log may
// be nil.
func NewWithConfig(cfg Config, log *slog.Logger, models ...delegate.Model) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg: cfg, models: map[string]delegate.Model{}, log: log, access: log, created: time.Now().Unix(),
		turns: make(chan struct{}, cfg.MaxConcurrent), bodies: semaphore.NewWeighted(cfg.BodyBudget),
	}
	m, err := newMetrics(func() float64 { return float64(len(s.turns)) })
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.metrics = m
	s.edge = edge.Config{Token: cfg.APIKey, Open: []string{"/health"}, Hosts: cfg.Hosts, Realm: "delegate"}
	for _, m := range models {
		if _, dup := s.models[m.Name()]; dup {
			return nil, fmt.Errorf("server: two models named %q", m.Name())
		}
		s.models[m.Name()] = m
		s.names = append(s.names, m.Name())
	}
	if len(s.models) == 0 {
		return nil, errors.New("server: no models to serve")
	}
	for name := range cfg.System {
		if _, ok := s.models[name]; !ok {
			return nil, fmt.Errorf("server: a default system prompt is set for model %q, which is not served", name)
		}
	}
	sort.Strings(s.names)
	return s, nil
}

// SetWriteTimeout tells the server the write timeout of the http.Server carrying it.
// A streaming response pushes the deadline forward before each event.
// Call it before serving.
func (s *Server) SetWriteTimeout(d time.Duration) { s.writeTimeout = d }

// SetAccessLog sends the access log's lines to l instead of the server's log; nil drops them.
// A handler in front that logs each request itself, as the gateway does, drops them.
// Call it before serving.
func (s *Server) SetAccessLog(l *slog.Logger) { s.access = l }

// RegisterMetrics adds collectors to the registry served at GET /metrics,
// for a handler in front with metrics of its own (package gateway).
// Call it before serving.
func (s *Server) RegisterMetrics(cs ...prometheus.Collector) error {
	return s.metrics.reg.Register(cs...)
}

// Served counts the chat completions answered successfully.
func (s *Server) Served() int64 { return s.served.Load() }

// ServeHTTP implements http.Handler. Every error, unknown paths and wrong
// methods included, is OpenAI's error object.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := &trackingWriter{ResponseWriter: rw}
	defer s.logged(w, r, time.Now())
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler { // net/http's own way to abort quietly
			panic(v)
		}
		s.log.Error("request handler panicked", "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		if w.wrote {
			panic(http.ErrAbortHandler) // the answer is under way: cut the connection
		}
		writeError(w, apiErr{Status: http.StatusInternalServerError, Type: "server_error", Message: "internal server error"})
	}()
	var handle http.HandlerFunc
	method := http.MethodGet
	switch strings.TrimSuffix(r.URL.Path, "/") {
	case "/v1/chat/completions":
		handle, method = s.chat, http.MethodPost
	case "/v1/models":
		handle = s.list
	case "/health":
		handle = s.health
	case "/metrics":
		handle = s.serveMetrics
	case "/admin/reload":
		handle, method = s.reload, http.MethodPost
	default:
		id, ok := strings.CutPrefix(r.URL.Path, "/v1/models/")
		if !ok || id == "" {
			writeError(w, apiErr{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
				Message: fmt.Sprintf("unknown path %s %s (served: POST /v1/chat/completions, GET /v1/models, GET /v1/models/{model}, GET /health, GET /metrics, POST /admin/reload)", r.Method, r.URL.Path)})
			return
		}
		handle = func(w http.ResponseWriter, _ *http.Request) { s.retrieve(w, id) }
	}
	if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", method)
		writeError(w, apiErr{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed",
			Message: fmt.Sprintf("%s does not accept %s; use %s", r.URL.Path, r.Method, method)})
		return
	}
	if rf, ok := s.edge.Check(r); !ok {
		if rf.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="delegate"`)
			if r.URL.Path == "/v1/chat/completions" {
				s.metrics.request("", http.StatusUnauthorized)
			}
		}
		writeError(w, apiErr{Status: rf.Status, Type: "invalid_request_error", Code: rf.Code, Message: rf.Message})
		return
	}
	handle(w, r)
}

// errBodyBudget is the error of a body that would pass the budget.
var errBodyBudget = errors.New("the server holds as many request bodies as it may")

// chargedReader charges the bytes read through it to budget; release
// gives them back.
type chargedReader struct {
	r      io.Reader
	budget *semaphore.Weighted
	held   int64
}

func (c *chargedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		if !c.budget.TryAcquire(int64(n)) {
			return 0, errBodyBudget
		}
		c.held += int64(n)
	}
	return n, err
}

func (c *chargedReader) release() {
	if c.held > 0 {
		c.budget.Release(c.held)
		c.held = 0
	}
}

// trackingWriter notes whether anything was written, and the status and bytes written.
// A panic can then still be answered with an error when nothing was.
// The status and bytes go to the access log and the metrics.
type trackingWriter struct {
	http.ResponseWriter
	wrote  bool
	status int
	bytes  int64
}

func (t *trackingWriter) WriteHeader(code int) {
	if !t.wrote {
		t.status = code
	}
	t.wrote = true
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	if !t.wrote {
		t.status = http.StatusOK
	}
	t.wrote = true
	n, err := t.ResponseWriter.Write(b)
	t.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's deadlines
// and flushing.
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// Reloader is a model whose weights follow a trainer's checkpoint, such as a local.Reloading.
// Reload loads a new version when there is one.
type Reloader interface {
	Reload() (changed bool, err error)
	Version() int
}

// reload answers POST /admin/reload: every model that follows a
// checkpoint loads its newest version now, without dropping requests in
// flight. It needs the server's API key: without one it is refused.
func (s *Server) reload(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.APIKey == "" {
		writeError(w, apiErr{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "admin_disabled",
			Message: "admin requests need the server's API key: start it with --api-key"})
		return
	}
	type result struct {
		Model   string `json:"model"`
		Version int    `json:"version"`
		Changed bool   `json:"changed"`
		Error   string `json:"error,omitempty"`
	}
	out := []result{}
	for _, name := range s.names {
		r, ok := s.models[name].(Reloader)
		if !ok {
			continue
		}
		changed, err := r.Reload()
		res := result{Model: name, Version: r.Version(), Changed: changed}
		if err != nil {
			res.Error = err.Error()
		}
		out = append(out, res)
	}
	writeJSON(w, http.StatusOK, map[string]any{"reloaded": out})
}

// maxHeldHealth bounds the GET /health answers held at once (each is a
// goroutine and a connection, waiting at most QueueTimeout).
const maxHeldHealth = 64

// VersionWaiter is a Reloader that can wait for a version, as local.Reloading does.
// WaitVersion returns the version served once it is v or later, or the version then and ctx's error.
type VersionWaiter interface {
	WaitVersion(ctx context.Context, v int) (int, error)
}

// health answers GET /health with the models served.
// For each model that follows a trainer's checkpoint, policy_versions gives the version new requests get.
// An environment sampling on-policy waits for it.
//
// With policy_version=N and wait=S, the answer is held until every following model serves version N or later,
// or S seconds have passed. S is at most QueueTimeout.
// Each model looks at its checkpoint at once,
// so a trainer that has just written step N need not wait for the model's next look.
// At most maxHeldHealth answers are held at once.
// Past that the answer comes at once, as it does without wait.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query(); q.Has("policy_version") && q.Has("wait") {
		v, verr := strconv.Atoi(q.Get("policy_version"))
		secs, werr := strconv.ParseFloat(q.Get("wait"), 64)
		wait := time.Duration(secs * float64(time.Second))
		if verr != nil || werr != nil || !(secs >= 0) || wait > s.cfg.QueueTimeout {
			writeError(w, apiErr{Status: http.StatusBadRequest, Type: "invalid_request_error",
				Message: fmt.Sprintf("policy_version %q and wait %q: want a step and seconds from 0 to %g", q.Get("policy_version"), q.Get("wait"), s.cfg.QueueTimeout.Seconds())})
			return
		}
		if s.healthHeld.Add(1) <= maxHeldHealth {
			ctx, cancel := context.WithTimeout(r.Context(), wait)
			for _, name := range s.names {
				if vw, ok := s.models[name].(VersionWaiter); ok {
					_, _ = vw.WaitVersion(ctx, v) // its time up: the answer says the version served
				}
			}
			cancel()
		}
		s.healthHeld.Add(-1)
	}
	versions := map[string]int{}
	for _, name := range s.names {
		if r, ok := s.models[name].(Reloader); ok {
			versions[name] = r.Version()
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "models": s.names, "policy_versions": versions})
}

// modelObject is OpenAI's model object. Created is when the server
// started serving it.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) model(name string) modelObject {
	return modelObject{ID: name, Object: "model", Created: s.created, OwnedBy: "delegate"}
}

// list answers GET /v1/models.
func (s *Server) list(w http.ResponseWriter, _ *http.Request) {
	out := struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{Object: "list"}
	for _, n := range s.names {
		out.Data = append(out.Data, s.model(n))
	}
	writeJSON(w, http.StatusOK, out)
}

// retrieve answers GET /v1/models/{id}: the model object, or OpenAI's
// 404 model_not_found.
func (s *Server) retrieve(w http.ResponseWriter, id string) {
	if _, ok := s.models[id]; !ok {
		writeError(w, apiErr{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
			Message: fmt.Sprintf("the model %q does not exist (serving %v)", id, s.names)})
		return
	}
	writeJSON(w, http.StatusOK, s.model(id))
}

// logged counts a finished request by route and status, and logs it at info.
// It logs method, path, status, duration and bytes written.
// It never logs a header or the body, which may hold the key or a user's text.
func (s *Server) logged(w *trackingWriter, r *http.Request, start time.Time) {
	status := w.status
	switch {
	case status != 0:
	case r.Context().Err() != nil:
		status = 499 // the client went away before an answer
	default:
		status = http.StatusOK // nothing written is an empty 200
	}
	d := time.Since(start)
	s.metrics.http(route(r.URL.Path), status)
	if s.access == nil {
		return
	}
	s.access.LogAttrs(r.Context(), slog.LevelInfo, "request",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
		slog.Duration("duration", d), slog.Int64("bytes", w.bytes))
}

// route is the metrics label of a path: a served route, or "other".
// Clients then cannot grow the series without bound.
func route(path string) string {
	switch p := strings.TrimSuffix(path, "/"); p {
	case "/v1/chat/completions", "/v1/models", "/health", "/metrics", "/admin/reload":
		return p
	}
	if id, ok := strings.CutPrefix(path, "/v1/models/"); ok && id != "" {
		return "/v1/models/{model}"
	}
	return "other"
}

// overloaded answers a request turned away by the server's bounds.
func overloaded(msg string) apiErr {
	return apiErr{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "server_overloaded", Message: msg}
}

// chat answers POST /v1/chat/completions. It reads and checks the
// request, waits for a turn and generates, streamed or not.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	model := ""
	status := http.StatusOK
	var seen Completion // what the observer gets
	defer func() {
		s.metrics.done(model, status, time.Since(start))
		if s.observe != nil {
			seen.Start, seen.Latency, seen.Model, seen.Status = start, time.Since(start), model, status
			s.observe(seen)
		}
	}()
	var failure *apiErr // the error answered, for the hook
	fail := func(e apiErr) {
		status, failure = e.Status, &e
		writeError(w, e)
	}

	// The body is charged to the budget as it arrives, and stays charged
	// until the request ends: what it decodes into is held as long.
	body := &chargedReader{r: http.MaxBytesReader(w, r.Body, s.cfg.MaxBody), budget: s.bodies}
	defer body.release()
	req, m, e := s.readChat(w, r, body)
	if e != nil {
		fail(*e)
		return
	}
	model = req.Model
	dreq, e := s.toRequest(req)
	if e != nil {
		fail(*e)
		return
	}
	done, hookDone, refuse := s.hooked(r, req.Model, dreq, &seen)
	if refuse != nil {
		fail(refusal(refuse))
		return
	}
	seen.Request, seen.Stream = dreq, req.Stream
	if hookDone != nil {
		// The hook sees every outcome once; a success went through done.
		answered := false
		ok := done
		done = func(resp *delegate.Response) { answered = true; ok(resp) }
		defer func() {
			if !answered {
				hookDone(nil, failure.outcome(status))
			}
		}()
	}

	if e, gone := s.takeTurn(r.Context()); gone {
		status = 499 // the client went away; nothing is written
		return
	} else if e != nil {
		fail(*e)
		return
	}
	defer func() { <-s.turns }()
	ctx, cancel := contextWithTimeout(r, s.cfg.RequestTimeout)
	defer cancel()
	if req.Stream {
		status, failure = s.stream(ctx, w, m, req, dreq, newID(), done)
		return
	}
	status, failure = s.complete(ctx, w, m, req, dreq, done)
}

// readChat reads a chat completion request from body and finds the model it names.
// The read deadline is cleared once the body is in.
func (s *Server) readChat(w http.ResponseWriter, r *http.Request, body io.Reader) (*wire.ChatRequest, delegate.Model, *apiErr) {
	req, e := decodeRequest(body, r.ContentLength, s.cfg.MaxBody)
	if e != nil {
		return nil, nil, e
	}
	// The body is read: clear the read deadline, so that the server's
	// background read (which notices a client hanging up) does not end the
	// request when the connection's read timeout passes mid-generation.
	// Not every ResponseWriter supports it (httptest's recorder); then
	// there is no deadline to clear.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})

	if req.Model == "" {
		return nil, nil, badRequest("model", "model: required (serving %v)", s.names)
	}
	m, ok := s.models[req.Model]
	if !ok {
		return nil, nil, &apiErr{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
			Message: fmt.Sprintf("model %q is not served here (serving %v)", req.Model, s.names)}
	}
	return req, m, nil
}

// toRequest checks req and returns what the model gets, the model's
// default system prompt first when req has none.
func (s *Server) toRequest(req *wire.ChatRequest) (*delegate.Request, *apiErr) {
	dreq, e := toDelegate(req, s.cfg.MaxN)
	if e != nil {
		return nil, e
	}
	if sys, ok := s.cfg.System[req.Model]; ok && !hasSystem(dreq.Messages) {
		dreq.Messages = append([]delegate.Message{delegate.System(sys)}, dreq.Messages...)
	}
	return dreq, nil
}

// hooked passes dreq through the hook. The done it returns sees a
// successful response: the hook's done, then the observer's note in seen.
// hookDone is the hook's own, nil when there is none; refuse is its
// refusal.
func (s *Server) hooked(r *http.Request, model string, dreq *delegate.Request, seen *Completion) (done func(*delegate.Response), hookDone func(*delegate.Response, error), refuse error) {
	if s.hook != nil {
		if hookDone, refuse = s.hook(r, model, dreq); refuse != nil {
			return nil, nil, refuse
		}
	}
	if hookDone == nil && s.observe == nil {
		return nil, nil, nil
	}
	return func(resp *delegate.Response) {
		if hookDone != nil {
			hookDone(resp, nil)
		}
		if s.observe != nil {
			seen.Response = resp
		}
	}, hookDone, nil
}

// refusal is the error answered for a hook's refusal.
func refusal(err error) apiErr {
	e := apiErr{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
	var ae *delegate.APIError
	if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 600 {
		e.Status, e.Code, e.Param, e.Message = ae.Status, ae.Code, ae.Param, ae.Message
		e.Type = "invalid_request_error"
		if ae.Type != "" {
			e.Type = ae.Type
		}
	}
	return e
}

// outcome is the error a hook's done gets for a request answered with
// status and, when one was written, e.
func (e *apiErr) outcome(status int) error {
	if e == nil {
		msg := "the client went away before the answer"
		if status != 499 {
			msg = fmt.Sprintf("answered %d", status)
		}
		return &delegate.APIError{Status: status, Message: msg}
	}
	return &delegate.APIError{Status: e.Status, Type: e.Type, Code: e.Code, Param: e.Param, Message: e.Message}
}

// takeTurn takes a turn to generate, or waits for one: at most MaxQueue
// requests wait, each at most QueueTimeout. gone reports that the client
// went away first. The caller gives a turn taken back.
func (s *Server) takeTurn(ctx context.Context) (e *apiErr, gone bool) {
	select {
	case s.turns <- struct{}{}:
		return nil, false
	default:
	}
	if s.waiting.Add(1) > int64(s.cfg.MaxQueue) {
		s.waiting.Add(-1)
		e := overloaded(fmt.Sprintf("the server is at its bound of %d requests generating and %d waiting; retry later", s.cfg.MaxConcurrent, s.cfg.MaxQueue))
		return &e, false
	}
	s.metrics.queue.Add(1)
	ok, gone := s.wait(ctx)
	s.waiting.Add(-1)
	s.metrics.queue.Add(-1)
	switch {
	case gone:
		return nil, true
	case ok:
		return nil, false
	}
	late := overloaded(fmt.Sprintf("no turn came within %v (%d requests generating at most); retry later", s.cfg.QueueTimeout, s.cfg.MaxConcurrent))
	return &late, false
}

// complete generates a whole answer and writes it. It returns the
// status answered, 499 when the client went away first, and the error
// written.
func (s *Server) complete(ctx context.Context, w http.ResponseWriter, m delegate.Model, req *wire.ChatRequest, dreq *delegate.Request, done func(*delegate.Response)) (int, *apiErr) {
	id := newID()
	resp, err := m.Chat(ctx, dreq)
	if err != nil {
		e, gone := s.failed(ctx, req.Model, err)
		if gone {
			return 499, nil // nothing is written
		}
		writeError(w, e)
		return e.Status, &e
	}
	s.answered(req.Model, resp, dreq.Tools, done)
	out := fromDelegate(resp, id, time.Now().Unix(), req)
	writeResponse(w, &out)
	return http.StatusOK, nil
}

// respBufs holds the buffers answers are encoded into.
var respBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledResp bounds the buffers kept in respBufs: a rare huge answer
// does not stay held.
const maxPooledResp = 64 << 10

// writeResponse answers 200 with r, the bytes writeJSON would write.
// wire.AppendResponse encodes it without reflection, into a reused
// buffer. A response it cannot encode, a NaN logprob say, goes to
// writeJSON, which answers encoding/json's error as before.
func writeResponse(w http.ResponseWriter, r *wire.ChatResponse) {
	bp := respBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledResp {
			respBufs.Put(bp)
		}
	}()
	b, err := wire.AppendResponse((*bp)[:0], r)
	if err != nil {
		writeJSON(w, http.StatusOK, r)
		return
	}
	*bp = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	// The status line is out; a failed write means the client went away.
	_, _ = w.Write(*bp)
}

// answered does what every successful generation needs before it is sent, streamed or not.
// It checks the tool calls against the declared tools, calls the hook's done, and counts it.
func (s *Server) answered(model string, resp *delegate.Response, tools []delegate.Tool, done func(*delegate.Response)) {
	keepDeclaredCalls(resp, tools)
	if done != nil {
		done(resp)
	}
	s.served.Add(1)
	s.metrics.tokens(model, resp.Usage)
}

// wait waits at most QueueTimeout for a turn; gone reports that the
// client went away first.
func (s *Server) wait(ctx context.Context) (ok, gone bool) {
	timer := time.NewTimer(s.cfg.QueueTimeout)
	defer timer.Stop()
	select {
	case s.turns <- struct{}{}:
		return true, false
	case <-timer.C:
		return false, false
	case <-ctx.Done():
		return false, true
	}
}

// failed turns a failed generation, streamed or not, into the error to answer, and logs it.
// A 4xx, such as a prompt over the context, is the request's fault and logs at debug level.
// Anything else logs as a warning.
// gone reports that the client went away first: there is no one to answer.
func (s *Server) failed(ctx context.Context, model string, err error) (e apiErr, gone bool) {
	if ctx.Err() != nil && !errors.Is(context.Cause(ctx), errDeadline) {
		return apiErr{}, true
	}
	e = modelError(ctx, err)
	level := slog.LevelWarn
	if e.Status >= 400 && e.Status < 500 {
		level = slog.LevelDebug
	}
	s.log.Log(context.Background(), level, "chat completion failed", "model", model, "status", e.Status, "err", err)
	return e, false
}

// hasSystem reports whether msgs hold a system message (developer
// messages arrive as system ones).
func hasSystem(msgs []delegate.Message) bool {
	for _, m := range msgs {
		if m.Role == delegate.RoleSystem {
			return true
		}
	}
	return false
}

// errDeadline is the cause of a request context ended by RequestTimeout.
var errDeadline = errors.New("the server's request timeout passed")

// contextWithTimeout bounds a request's generation by d.
func contextWithTimeout(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(r.Context(), d, errDeadline)
}

// modelError turns a model's error into the HTTP error to send.
func modelError(ctx context.Context, err error) apiErr {
	if errors.Is(context.Cause(ctx), errDeadline) {
		return apiErr{Status: http.StatusGatewayTimeout, Type: "server_error", Code: "timeout", Message: "the generation did not finish within the server's request timeout"}
	}
	e := apiErr{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
	var ae *delegate.APIError
	if errors.As(err, &ae) {
		if ae.Status != 0 {
			e.Status = ae.Status
		}
		if ae.Type != "" && ae.Type != delegate.ErrKindCanceled && ae.Type != delegate.ErrKindTimeout {
			e.Type = ae.Type
		}
		e.Code = ae.Code
		e.Param = ae.Param
		e.Message = ae.Message
		if e.Message == "" {
			e.Message = err.Error()
		}
	}
	return e
}

// newID returns a fresh chat completion id: 96 random bits, so ids never
// repeat across requests or restarts.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics on a broken system source)
	return "chatcmpl-" + hex.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, status int, v any) { edge.WriteJSON(w, status, v) }

// apiErr is an error as OpenAI's API reports it, with its HTTP status.
type apiErr struct {
	Status  int
	Type    string
	Param   string
	Code    string
	Message string
}

// body is OpenAI's error object: {"error":{"message","type","param","code"}},
// param and code null when unset.
func (e apiErr) body() wire.ErrorBody {
	return wire.ErrorBody{Error: wire.ErrorDetail{Message: e.Message, Type: e.Type, Param: wire.Nullable(e.Param), Code: wire.Nullable(e.Code)}}
}

// writeError answers e with its status.
func writeError(w http.ResponseWriter, e apiErr) {
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(1))
	}
	writeJSON(w, e.Status, e.body())
}
