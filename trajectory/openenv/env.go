package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Environment is one instance of an environment, running at most one episode at a time.
// An episode runs from Reset to the observation that is done.
// The server makes one per WebSocket connection and one per HTTP request,
// and calls an instance from one goroutine at a time.
// Close releases it; the server calls it once, after the last call.
type Environment interface {
	// Reset starts a new episode, ending any other. A nil seed lets the
	// environment choose one; an empty episodeID lets it make one.
	Reset(ctx context.Context, seed *int64, episodeID string) (Observation, error)
	// Step applies one action, a JSON object of the environment's action
	// schema. An action that breaks the schema is a *ValidationError; a
	// step before Reset wraps ErrNoEpisode, one after the episode ended
	// ErrEpisodeDone.
	Step(ctx context.Context, action json.RawMessage) (Observation, error)
	// State returns the episode's state: a value that encodes to a JSON
	// object with State's fields and the environment's own.
	State() any
	Close() error
}

// Observation is what an environment answers to a reset or a step.
// Value encodes to the JSON object of the environment's observation
// schema, without done, reward and metadata, which sit beside it.
type Observation struct {
	Value    any
	Reward   *float64
	Done     bool
	Metadata map[string]any
}

// Result encodes o as the protocol's answer.
func (o Observation) Result() (Result, error) { return o.result(nil) }

// result is Result with the observation encoded over buf, whose array it
// reuses when it can. The Result holds buf's bytes until the next use.
func (o Observation) result(buf []byte) (Result, error) {
	var b []byte
	var err error
	if a, ok := o.Value.(jsonAppender); ok {
		b, err = a.appendJSON(buf[:0])
	} else {
		b, err = json.Marshal(o.Value)
	}
	if err != nil {
		return Result{}, fmt.Errorf("encode observation: %w", err)
	}
	if !startsObject(b) { // json.Marshal's output is valid JSON
		return Result{}, fmt.Errorf("encode observation: %s is not a JSON object", clip(string(b)))
	}
	return Result{Observation: b, Reward: o.Reward, Done: o.Done, Metadata: o.Metadata}, nil
}

// jsonAppender is a value that appends the bytes json.Marshal writes for
// it, with less work.
type jsonAppender interface {
	appendJSON(dst []byte) ([]byte, error)
}

// Errors of a request that the episode's state refuses. The server answers
// them as OpenEnv answers an environment's exception: EXECUTION_ERROR on
// the WebSocket; over HTTP, 409.
var (
	ErrNoEpisode   = errors.New("no episode: send reset first")
	ErrEpisodeDone = errors.New("the episode is done: send reset to start another")
	ErrStepLimit   = errors.New("the episode reached the server's step limit: send reset to start another")
)

// ValidationError is a request or an action that breaks its schema,
// answered VALIDATION_ERROR on the WebSocket and 422 over HTTP.
type ValidationError struct {
	Errors []FieldError
}

func (e *ValidationError) Error() string {
	var msgs []string
	for _, f := range e.Errors {
		msgs = append(msgs, fmt.Sprintf("%v: %s", f.Loc, f.Msg))
	}
	return "invalid: " + strings.Join(msgs, "; ")
}

// clip shortens s for an error message.
func clip(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
