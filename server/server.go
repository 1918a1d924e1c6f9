// Package server exposes any delegate.Model as an OpenAI-compatible HTTP
// server: POST /v1/chat/completions (tool calls, usage, logprobs, and
// vLLM's return_tokens_as_token_ids), GET /v1/models and GET /health. It is
// what `delegate serve` runs over the project's local transformers, so that
// any OpenAI client, ours or another, can call them. Concurrent requests
// reach the model concurrently; a local model batches them in its engine.
package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/delegatelab/delegate"
)

// maxBody bounds a request body.
const maxBody = 8 << 20

// Server routes requests to models by name. It is an http.Handler, safe for
// concurrent use.
type Server struct {
	models  map[string]delegate.Model
	names   []string
	log     *slog.Logger
	mux     *http.ServeMux
	created int64
	served  atomic.Int64
}

// New serves models under their names. log may be nil.
func New(log *slog.Logger, models ...delegate.Model) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{models: map[string]delegate.Model{}, log: log, mux: http.NewServeMux(), created: time.Now().Unix()}
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
	sort.Strings(s.names)
	s.mux.HandleFunc("POST /v1/chat/completions", s.chat)
	s.mux.HandleFunc("GET /v1/models", s.list)
	s.mux.HandleFunc("GET /health", s.health)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Served counts the chat completions answered successfully.
func (s *Server) Served() int64 { return s.served.Load() }

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "models": s.names})
}

func (s *Server) list(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	for _, n := range s.names {
		out.Data = append(out.Data, model{ID: n, Object: "model", Created: s.created, OwnedBy: "delegate"})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req wireRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "request body is not a chat completion request: "+err.Error())
		return
	}
	m, ok := s.models[req.Model]
	if !ok {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", fmt.Sprintf("model %q is not served here (serving %v)", req.Model, s.names))
		return
	}
	dreq, err := req.toDelegate()
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		return
	}
	resp, err := m.Chat(r.Context(), dreq)
	if err != nil {
		var ae *delegate.APIError
		status, typ, code := http.StatusInternalServerError, "server_error", ""
		if errors.As(err, &ae) {
			if ae.Status != 0 {
				status = ae.Status
			}
			if ae.Type != "" {
				typ = ae.Type
			}
			code = ae.Code
			if ae.Type == delegate.ErrKindCanceled {
				return // the client went away
			}
		}
		s.log.Warn("chat completion failed", "model", req.Model, "err", err)
		writeError(w, status, typ, code, err.Error())
		return
	}
	s.served.Add(1)
	writeJSON(w, http.StatusOK, fromDelegate(resp, s.created, req.ReturnTokensAsTokenIDs))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status line is out; a failed write means the client went away.
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	type body struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
	}
	b := body{Message: msg, Type: typ}
	if code != "" {
		b.Code = &code
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(1))
	}
	writeJSON(w, status, map[string]body{"error": b})
}
