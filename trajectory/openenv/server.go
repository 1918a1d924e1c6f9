package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Config says what a Server serves and within which bounds. Start from
// DefaultConfig: a zero bound is a bound of zero, not a default.
type Config struct {
	// New makes an environment instance. It is required, and called from
	// many goroutines at once.
	New func() (Environment, error)
	// Name names New in a FACTORY_ERROR.
	Name     string
	Metadata Metadata
	Schema   Schema
	// MaxSessions bounds the WebSocket and HTTP MCP sessions open at
	// once. Zero serves stateless HTTP alone.
	MaxSessions int
	// MaxSteps bounds the steps of an episode, counted from its reset.
	MaxSteps int
	// MaxMessageBytes bounds a WebSocket message and an HTTP body. It must
	// be positive.
	MaxMessageBytes int64
	// IdleTimeout closes a session that sends nothing for so long. It
	// must be positive.
	IdleTimeout time.Duration
	// StepTimeout bounds one reset or step; an HTTP step's timeout_s
	// shortens it. A session's calls may be cut up to 1/64 of it sooner:
	// those that start that close together share one deadline. It must
	// be positive.
	StepTimeout time.Duration
	// Tools are the tools of the environment's call_tool actions, which
	// MCP's tools/list lists and tools/call calls. None: MCP's tool
	// methods answer an internal error, as OpenEnv's do.
	Tools []Tool
	// MaxMCPEpisodes bounds the episodes of one HTTP MCP session, counted
	// from its creation. Zero refuses HTTP MCP sessions.
	MaxMCPEpisodes int
	// Log gets the sessions' failures. Nil discards them.
	Log *slog.Logger
}

// DefaultConfig returns the default bounds; New and the rest are unset.
func DefaultConfig() Config {
	return Config{
		MaxSessions:     64,
		MaxSteps:        1000,
		MaxMessageBytes: 1 << 20,
		IdleTimeout:     5 * time.Minute,
		StepTimeout:     2 * time.Minute,
		MaxMCPEpisodes:  100,
	}
}

// Validate reports a missing factory, a negative bound, and a zero bound
// that would refuse every request.
func (c Config) Validate() error {
	var errs []error
	if c.New == nil {
		errs = append(errs, errors.New("New is required"))
	}
	for _, b := range []struct {
		name string
		v    int64
	}{{"MaxSessions", int64(c.MaxSessions)}, {"MaxSteps", int64(c.MaxSteps)}, {"MaxMCPEpisodes", int64(c.MaxMCPEpisodes)}} {
		if b.v < 0 {
			errs = append(errs, fmt.Errorf("%s %d is negative", b.name, b.v))
		}
	}
	for _, b := range []struct {
		name string
		v    int64
		show any
	}{
		{"MaxMessageBytes", c.MaxMessageBytes, c.MaxMessageBytes},
		{"IdleTimeout", int64(c.IdleTimeout), c.IdleTimeout},
		{"StepTimeout", int64(c.StepTimeout), c.StepTimeout},
	} {
		if b.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive (DefaultConfig has the defaults)", b.name, b.show))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("openenv server config: %w", err)
	}
	return nil
}

// Server serves environments over OpenEnv's HTTP and WebSocket protocol,
// and their tools over MCP. It is an http.Handler; put it behind the
// project's edge. Close ends every session.
type Server struct {
	cfg Config

	// mu guards active, closed and mcpSessions; wg counts the sessions
	// and the reaper. Lock order: mu, then an mcpSession's mu.
	mu          sync.Mutex
	active      int // WebSocket and HTTP MCP sessions
	closed      bool
	mcpSessions map[string]*mcpSession
	reaperOnce  sync.Once
	wg          sync.WaitGroup

	ctx    context.Context // ends every session
	cancel context.CancelFunc
}

// NewServer returns a server of cfg's environments.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, ctx: ctx, cancel: cancel}, nil
}

// Active is the number of WebSocket and HTTP MCP sessions open now.
func (s *Server) Active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// Close ends every session, closing its connection and its environment,
// and waits for them. Later sessions are refused.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// ServeHTTP routes a request to its endpoint. Unknown paths get 404 and
// known paths with another method 405, in FastAPI's shape.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method, h := http.MethodGet, s.state
	switch r.URL.Path {
	case "/reset":
		method, h = http.MethodPost, s.reset
	case "/step":
		method, h = http.MethodPost, s.step
	case "/state":
	case "/health":
		h = s.health
	case "/metadata":
		h = s.metadata
	case "/schema":
		h = s.schema
	case "/ws":
		h = s.ws
	case "/mcp":
		method, h = http.MethodPost, s.mcp
		if r.Method == http.MethodGet && isUpgrade(r) {
			method, h = http.MethodGet, s.mcpWS
		}
	default:
		WriteDetail(w, http.StatusNotFound, "Not Found")
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		WriteDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	h(w, r)
}

// isUpgrade reports whether r asks for a WebSocket, as OpenEnv routes
// /mcp: a WebSocket there, a POST otherwise.
func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// WriteDetail answers an HTTP error in FastAPI's shape, {"detail": msg}.
// A server in front of Server writes its refusals with it.
func WriteDetail(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(msg) // a string always encodes
	writeJSON(w, status, HTTPError{Detail: b})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"detail": "encode response: " + err.Error()}) // a map of strings always encodes
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status line is out; a failed write means the client went away.
	_, _ = w.Write(append(b, '\n'))
}

// writeInvalid answers a 422 listing what failed, each located under
// prefix ("body", and "action" for an action).
func writeInvalid(w http.ResponseWriter, errs []FieldError, prefix ...any) {
	out := make([]FieldError, len(errs))
	for i, e := range errs {
		e.Loc = append(append([]any{}, prefix...), e.Loc...)
		out[i] = e
	}
	b, _ := json.Marshal(out) // strings and slices of strings and ints always encode
	writeJSON(w, http.StatusUnprocessableEntity, HTTPError{Detail: b})
}

// readBody reads a JSON object body of at most MaxMessageBytes. An empty
// body reads as {} when empty is true. It answers the request itself
// when it fails.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, empty bool) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxMessageBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		WriteDetail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", s.cfg.MaxMessageBytes))
		return nil, false
	case err != nil:
		WriteDetail(w, http.StatusBadRequest, "read body: "+err.Error())
		return nil, false
	}
	if len(bytes.TrimSpace(b)) == 0 && empty {
		return []byte("{}"), true
	}
	if !validJSON(b) {
		writeInvalid(w, []FieldError{{Type: "json_invalid", Loc: []any{0}, Msg: "JSON decode error"}}, "body")
		return nil, false
	}
	if !isObject(b) {
		writeInvalid(w, []FieldError{{Type: "model_attributes_type", Loc: []any{}, Msg: "Input should be a valid dictionary or object to extract fields from"}}, "body")
		return nil, false
	}
	return b, true
}

// newEnv makes an environment for one HTTP request, answering 500 when
// the factory fails.
func (s *Server) newEnv(w http.ResponseWriter) (Environment, bool) {
	env, err := s.cfg.New()
	if err != nil {
		s.cfg.Log.Error("openenv: make environment", "factory", s.cfg.Name, "err", err)
		WriteDetail(w, http.StatusInternalServerError, fmt.Sprintf("environment factory %s failed: %v", s.cfg.Name, err))
		return nil, false
	}
	return env, true
}

func closeEnv(env Environment, log *slog.Logger) {
	if err := env.Close(); err != nil {
		log.Warn("openenv: close environment", "err", err)
	}
}

// reset serves POST /reset on a fresh environment, as OpenEnv's HTTP server does.
// The episode it starts ends with the request.
func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	b, ok := s.readBody(w, r, true)
	if !ok {
		return
	}
	var req ResetRequest
	if err := json.Unmarshal(b, &req); err != nil {
		writeInvalid(w, []FieldError{{Type: "value_error", Loc: []any{}, Msg: err.Error()}}, "body")
		return
	}
	if errs := req.Validate(); len(errs) > 0 {
		writeInvalid(w, errs, "body")
		return
	}
	env, ok := s.newEnv(w)
	if !ok {
		return
	}
	defer closeEnv(env, s.cfg.Log)
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.StepTimeout)
	defer cancel()
	obs, err := env.Reset(ctx, req.Seed, deref(req.EpisodeID))
	s.writeResult(w, obs, err)
}

// step serves POST /step on a fresh environment, as OpenEnv's HTTP server
// does. An environment that needs a reset first refuses it (409).
func (s *Server) step(w http.ResponseWriter, r *http.Request) {
	b, ok := s.readBody(w, r, false)
	if !ok {
		return
	}
	var req StepRequest
	if err := json.Unmarshal(b, &req); err != nil {
		writeInvalid(w, []FieldError{{Type: "value_error", Loc: []any{}, Msg: err.Error()}}, "body")
		return
	}
	if req.Action == nil {
		writeInvalid(w, []FieldError{{Type: "missing", Loc: []any{"action"}, Msg: "Field required"}}, "body")
		return
	}
	if errs := req.Validate(); len(errs) > 0 {
		writeInvalid(w, errs, "body")
		return
	}
	env, ok := s.newEnv(w)
	if !ok {
		return
	}
	defer closeEnv(env, s.cfg.Log)
	timeout := s.cfg.StepTimeout
	if req.TimeoutS != nil && *req.TimeoutS < timeout.Seconds() {
		timeout = time.Duration(*req.TimeoutS * float64(time.Second)) // below StepTimeout, so no overflow
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	obs, err := env.Step(ctx, req.Action)
	s.writeResult(w, obs, err)
}

// writeResult answers a reset or a step over HTTP.
func (s *Server) writeResult(w http.ResponseWriter, obs Observation, err error) {
	var verr *ValidationError
	switch {
	case errors.As(err, &verr):
		writeInvalid(w, verr.Errors, "body", "action")
		return
	case errors.Is(err, ErrNoEpisode), errors.Is(err, ErrEpisodeDone), errors.Is(err, ErrStepLimit):
		WriteDetail(w, http.StatusConflict, err.Error())
		return
	case errors.Is(err, context.DeadlineExceeded):
		WriteDetail(w, http.StatusGatewayTimeout, err.Error())
		return
	case err != nil:
		s.cfg.Log.Warn("openenv: environment failed", "err", err)
		WriteDetail(w, http.StatusInternalServerError, err.Error())
		return
	}
	res, err := obs.Result()
	if err != nil {
		WriteDetail(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// state serves GET /state: a fresh environment's state, as OpenEnv's
// HTTP server answers it.
func (s *Server) state(w http.ResponseWriter, r *http.Request) {
	env, ok := s.newEnv(w)
	if !ok {
		return
	}
	defer closeEnv(env, s.cfg.Log)
	writeJSON(w, http.StatusOK, env.State())
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Health{Status: HealthHealthy})
}

func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.cfg.Metadata)
}

func (s *Server) schema(w http.ResponseWriter, r *http.Request) {
	sc := s.cfg.Schema
	for _, p := range []*json.RawMessage{&sc.Action, &sc.Observation, &sc.State} {
		if *p == nil {
			*p = json.RawMessage(`{}`)
		}
	}
	writeJSON(w, http.StatusOK, sc)
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
