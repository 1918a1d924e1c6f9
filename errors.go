package delegate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// APIError is a failure reported by a model server. Retry decisions look at
// Status and Type, never at Message.
type APIError struct {
	Status     int           // HTTP status; 0 when the failure was not an HTTP answer
	Type       string        // the error type the server gave, or one of the Err* kinds below
	Code       string        // the server's error code, if any
	Message    string        // the server's message, for people only
	Param      string        // the request field a refusal names, if any
	RetryAfter time.Duration // from a Retry-After header, 0 if absent
	Model      string        // the model the request was for
	Attempts   int           // how many attempts were made in all
}

// Kinds of failure that did not come from a server's error body.
const (
	ErrKindConnection = "connection" // dial, reset or broken body
	ErrKindTimeout    = "timeout"    // the per-call timeout passed
	ErrKindDecode     = "decode"     // the body was not the expected JSON
	ErrKindCanceled   = "canceled"   // the caller's context was cancelled
)

// ErrorClass returns the status and type of a call's error, as Node.ErrorStatus and Node.ErrorType record them.
// An *APIError gives its own status and type.
// A passed deadline gives ErrKindTimeout, a cancelled context ErrKindCanceled.
// Anything else gives zero values.
func ErrorClass(err error) (status int, typ string) {
	var ae *APIError
	switch {
	case errors.As(err, &ae):
		return ae.Status, ae.Type
	case errors.Is(err, context.DeadlineExceeded):
		return 0, ErrKindTimeout
	case errors.Is(err, context.Canceled):
		return 0, ErrKindCanceled
	}
	return 0, ""
}

func (e *APIError) Error() string {
	s := "model api error"
	if e.Model != "" {
		s += " (model " + e.Model + ")"
	}
	if e.Status != 0 {
		s += fmt.Sprintf(": status %d %s", e.Status, http.StatusText(e.Status))
	}
	if e.Type != "" {
		s += ": " + e.Type
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	return s
}

// Retryable reports whether another attempt may succeed.
// Rate limits, server errors, timeouts, connection failures and undecodable bodies are retryable.
// Other 4xx answers and cancellation are not.
func (e *APIError) Retryable() bool {
	switch {
	case e.Type == ErrKindCanceled:
		return false
	case e.Status == http.StatusTooManyRequests, e.Status >= 500:
		return true
	case e.Status >= 400:
		return false
	}
	return e.Type == ErrKindConnection || e.Type == ErrKindTimeout || e.Type == ErrKindDecode
}

// AttemptsOf returns the number of attempts recorded on err's *APIError, or
// 1 when err carries none.
func AttemptsOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) && ae.Attempts > 0 {
		return ae.Attempts
	}
	return 1
}

// Unwrap makes a cancelled call match context.Canceled, and a call whose
// deadline passed match context.DeadlineExceeded, through errors.Is.
func (e *APIError) Unwrap() error {
	switch e.Type {
	case ErrKindCanceled:
		return context.Canceled
	case ErrKindTimeout:
		return context.DeadlineExceeded
	}
	return nil
}
