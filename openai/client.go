package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge"
)

// Client calls one model on an OpenAI-compatible Chat Completions endpoint.
// It implements delegate.Model. All methods may be called from many
// goroutines at once; the concurrency and rate limits of its Config apply
// across all of them. A Client holds no resources that need closing: idle
// connections belong to the shared transport (or to the *http.Client given
// with WithHTTPClient).
type Client struct {
	cfg    Config // validated
	eps    []*endpoint
	next   atomic.Uint64 // round-robin start among equally busy endpoints
	auth   []string      // Authorization header value, nil without a key
	http   *http.Client
	log    *slog.Logger
	sleep  func(context.Context, time.Duration) error
	sem    chan struct{}
	rpm    *rate.Limiter
	logLim *rate.Limiter // limits retry log lines
	quiet  atomic.Int64  // retry log lines suppressed since the last one
}

// Option configures transport plumbing of a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests through hc instead of
// the package's shared transport. hc's own Timeout, if set, applies on top
// of Config.Timeout. The Client uses a copy of hc whose redirects to
// another origin drop the API key; hc's CheckRedirect runs after.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = edge.WithRedirectPolicy(hc)
		}
	}
}

// WithLogger makes the Client log retries to l. The default discards. Log
// lines never contain the API key; retry lines are rate-limited (a burst of
// 5, then one a second) and carry the count of lines suppressed before
// them.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) {
		if l != nil {
			c.log = l
		}
	}
}

// WithSleep replaces the function that waits between attempts. It must
// return ctx.Err() promptly when ctx is done. Tests use it to observe
// backoff durations without waiting.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) {
		if sleep != nil {
			c.sleep = sleep
		}
	}
}

// sharedTransport is the http.Transport of every Client without its own *http.Client.
// Clients of models on the same server then share idle connections.
// It ignores proxy environment variables, since nothing below cmd reads the environment.
// Pass WithHTTPClient for a proxy.
var sharedTransport = sync.OnceValue(func() *http.Transport {
	return &http.Transport{
		DialContext:       (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2: true,
		// Large enough that hundreds of rollouts in flight against one host reuse connections.
		// Otherwise they dial and leave sockets in TIME_WAIT; perf/fanout/README.md has the figures.
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   4096,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
})

// New returns a Client for cfg after validating it.
func New(cfg Config, opts ...Option) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{
		cfg:    cfg,
		http:   edge.WithRedirectPolicy(&http.Client{Transport: sharedTransport()}),
		log:    slog.New(slog.DiscardHandler),
		sleep:  sleepCtx,
		logLim: rate.NewLimiter(rate.Every(time.Second), 5),
	}
	for _, b := range append([]string{cfg.BaseURL}, cfg.Replicas...) {
		e := &endpoint{url: strings.TrimRight(b, "/") + "/chat/completions"}
		if len(cfg.Replicas) > 0 {
			e.name = displayURL(b)
		}
		c.eps = append(c.eps, e)
	}
	if cfg.APIKey != "" {
		c.auth = []string{"Bearer " + cfg.APIKey}
	}
	if cfg.MaxConcurrency > 0 {
		c.sem = make(chan struct{}, cfg.MaxConcurrency)
	}
	if cfg.RequestsPerMinute > 0 {
		perSec := cfg.RequestsPerMinute / 60
		c.rpm = rate.NewLimiter(rate.Limit(perSec), max(1, int(perSec)))
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Name returns the model name requests are sent for.
func (c *Client) Name() string { return c.cfg.Model }

// String describes the client without its API key.
func (c *Client) String() string {
	return fmt.Sprintf("openai.Client{model %q at %s}", c.cfg.Model, c.cfg.BaseURL)
}

// Chat sends req and returns the model's response. It implements
// delegate.Model.
//
// Failed attempts are retried with exponential backoff and full jitter when
// the failure is retryable (429 other than insufficient_quota, 5xx,
// connection errors, per-attempt timeouts, undecodable 2xx bodies); other
// 4xx answers are final. A Retry-After or retry-after-ms header
// replaces the computed backoff, capped at max(MaxBackoff, 1 minute). When
// ctx has a deadline that the next wait would pass, Chat gives up at once
// with the last failure instead of sleeping into the deadline.
//
// Every failure is reported as a *delegate.APIError carrying the model name
// and the number of attempts; a 401 comes as an *AuthError, worded as the
// authentication failure it is, that wraps it. One exception in shape: when ctx is done
// (cancelled, or its deadline passed) the in-flight request is aborted, any
// backoff wait is cut short, and Chat returns an error that wraps both an
// *APIError of type delegate.ErrKindCanceled and ctx's error, so that
// errors.As finds the *APIError and errors.Is(err, context.Canceled) (or
// context.DeadlineExceeded) holds. Requests the client cannot encode fail
// with an *APIError of type ErrKindRequest before anything is sent.
//
// On success Response.Latency is the wall time of the whole call, waits for
// the concurrency and rate limits and retries included, and
// Response.Retries is the number of attempts after the first.
func (c *Client) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	start := time.Now()
	body, err := encodeRequest(c.cfg.Model, req, c.cfg.TokenIDs)
	if err != nil {
		return nil, &delegate.APIError{Type: ErrKindRequest, Message: err.Error(), Model: c.cfg.Model}
	}
	resp, err := c.call(ctx, body, 1+c.cfg.MaxRetries)
	if err != nil {
		return nil, err
	}
	if c.cfg.FillIDs != nil {
		if err := c.cfg.FillIDs(req, resp); err != nil {
			return nil, &delegate.APIError{Type: ErrKindRequest, Message: "token ids: " + err.Error(), Model: c.cfg.Model, Attempts: resp.Retries + 1}
		}
	}
	resp.Latency = time.Since(start)
	return resp, nil
}

// Ping checks that the endpoint answers, accepts the key and knows the model.
// It sends a one-word user message with max_tokens 1, in a single attempt.
// Its errors are those of Chat.
func (c *Client) Ping(ctx context.Context) error {
	body, err := encodeRequest(c.cfg.Model, &delegate.Request{Messages: []delegate.Message{delegate.User("ping")}, MaxTokens: 1}, false)
	if err != nil {
		return &delegate.APIError{Type: ErrKindRequest, Message: err.Error(), Model: c.cfg.Model}
	}
	_, err = c.call(ctx, body, 1)
	return err
}

// call runs up to attempts attempts of the encoded request.
func (c *Client) call(ctx context.Context, body []byte, attempts int) (*delegate.Response, error) {
	for n := 1; ; n++ {
		resp, ae, ep := c.attempt(ctx, body)
		if ae == nil {
			resp.Retries = n - 1
			return resp, nil
		}
		ae.Model, ae.Attempts = c.cfg.Model, n
		if ae.Type == delegate.ErrKindCanceled {
			return nil, canceled(ctx, ae)
		}
		if !retryable(ae) || n >= attempts {
			return nil, c.final(ae, ep)
		}
		wait := c.backoff(n, ae.RetryAfter)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, c.final(ae, ep)
		}
		c.logRetry(ctx, ae, wait)
		if err := c.sleep(ctx, wait); err != nil {
			last := *ae
			last.Model, last.Attempts = "", 0
			msg := "in backoff after " + strings.TrimPrefix(last.Error(), "model api error: ")
			return nil, canceled(ctx, &delegate.APIError{Type: delegate.ErrKindCanceled, Message: msg, Model: c.cfg.Model, Attempts: n})
		}
	}
}

// retryable is ae.Retryable, except that a spent quota is final: waiting does not refill it.
// A 429 says so by OpenAI's insufficient_quota in its type or code.
func retryable(ae *delegate.APIError) bool {
	if ae.Status == http.StatusTooManyRequests && (ae.Type == quotaExhausted || ae.Code == quotaExhausted) {
		return false
	}
	return ae.Retryable()
}

const quotaExhausted = "insufficient_quota"

// canceled wraps ae (of type canceled) together with ctx's error.
func canceled(ctx context.Context, ae *delegate.APIError) error {
	cause := ctx.Err()
	if cause == nil {
		// The rate limiter refuses to wait past ctx's deadline before it
		// has passed.
		cause = context.DeadlineExceeded
	}
	return fmt.Errorf("%w: %w", ae, cause)
}

// Shared header values; never modified (Header.Add would reallocate, since
// their capacity equals their length).
var (
	hdrJSON = []string{"application/json"}
)

// errorBodyLimit bounds how much of an error body is read.
const errorBodyLimit = 64 << 10

// attempt sends the request once, and returns the endpoint it went to
// (nil if none). Its *APIError has no Model or Attempts yet; a failure
// caused by ctx being done has type canceled.
func (c *Client) attempt(ctx context.Context, body []byte) (*delegate.Response, *delegate.APIError, *endpoint) {
	if c.sem != nil {
		select {
		case c.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, &delegate.APIError{Type: delegate.ErrKindCanceled, Message: "waiting for a concurrency slot"}, nil
		}
		defer func() { <-c.sem }()
	}
	if c.rpm != nil {
		if err := c.rpm.Wait(ctx); err != nil {
			return nil, &delegate.APIError{Type: delegate.ErrKindCanceled, Message: "waiting for the rate limit"}, nil
		}
	}
	ep := c.pick(time.Now())
	ep.inflight.Add(1)
	resp, ae := c.send(ctx, ep, body)
	ep.inflight.Add(-1)
	ep.observe(ae, c.cfg.MaxBackoff, time.Now())
	if resp != nil {
		resp.Endpoint = ep.name
	}
	return resp, ae, ep
}

// AuthError is a 401 from an endpoint: it refused the API key, or wanted
// one. Err is the answer, which errors.As finds as for any failure.
type AuthError struct {
	// Endpoint is the chat completions URL, without credentials or query.
	Endpoint string
	// KeySent reports whether the request carried an API key.
	KeySent bool
	Err     *delegate.APIError
}

func (e *AuthError) Error() string {
	s := "authentication failed at " + e.Endpoint
	if e.Err.Model != "" {
		s += " (model " + e.Err.Model + ")"
	}
	if e.KeySent {
		s += ": the endpoint refused the API key configured for it"
	} else {
		s += ": the endpoint wants an API key and none is configured"
	}
	if e.Err.Message != "" {
		s += ": " + e.Err.Message
	}
	return s
}

func (e *AuthError) Unwrap() error { return e.Err }

// final is the error a call ends with: ae, worded as an authentication
// failure at ep when ep answered 401.
func (c *Client) final(ae *delegate.APIError, ep *endpoint) error {
	if ae.Status != http.StatusUnauthorized || ep == nil {
		return ae
	}
	where := ep.url
	if u, err := url.Parse(ep.url); err == nil {
		u.User, u.RawQuery, u.Fragment = nil, "", ""
		where = u.String()
	}
	return &AuthError{Endpoint: where, KeySent: c.auth != nil, Err: ae}
}

// send sends the request once to ep.
func (c *Client) send(ctx context.Context, ep *endpoint, body []byte) (*delegate.Response, *delegate.APIError) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, ep.url, bytes.NewReader(body))
	if err != nil {
		return nil, &delegate.APIError{Type: ErrKindRequest, Message: c.redact(err.Error())}
	}
	hreq.Header["Content-Type"] = hdrJSON
	hreq.Header["Accept"] = hdrJSON
	if c.auth != nil {
		hreq.Header["Authorization"] = c.auth
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, c.failure(ctx, actx, 0, err)
	}
	defer drainClose(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, c.statusError(ctx, actx, resp)
	}
	return c.readResponse(ctx, actx, resp)
}

// readResponse decodes a 2xx answer's body. A body that is not a response
// is a decode error, unless it is an error object (which some proxies send
// with status 200): then its type and code are kept, and a numeric code in
// 400-599 stands in for the status.
func (c *Client) readResponse(ctx, actx context.Context, resp *http.Response) (*delegate.Response, *delegate.APIError) {
	out, err := decodeResponseLimit(resp.Body, resp.ContentLength, maxResponseBytes, c.cfg.Model, c.cfg.TokenIDs)
	if err == nil {
		return out, nil
	}
	var se *serverError
	if errors.As(err, &se) {
		status := resp.StatusCode
		if code, cerr := strconv.Atoi(string(se.detail.Code)); cerr == nil && code >= 400 && code <= 599 {
			status = code
		}
		return nil, &delegate.APIError{Status: status, Type: se.detail.Type, Code: string(se.detail.Code), Param: string(se.detail.Param), Message: c.redact(truncate(se.detail.Message, maxErrorMessage))}
	}
	var de *decodeError
	if errors.As(err, &de) && de.readErr || ctx.Err() != nil || actx.Err() != nil {
		return nil, c.failure(ctx, actx, resp.StatusCode, err)
	}
	return nil, &delegate.APIError{Status: resp.StatusCode, Type: delegate.ErrKindDecode, Message: c.redact(truncate(err.Error(), maxErrorMessage))}
}

// failure classifies a transport or body-read error: the caller's context
// first, then the per-attempt timeout, else a connection failure.
func (c *Client) failure(ctx, actx context.Context, status int, err error) *delegate.APIError {
	switch {
	case ctx.Err() != nil:
		return &delegate.APIError{Status: status, Type: delegate.ErrKindCanceled}
	case actx.Err() != nil:
		return &delegate.APIError{Status: status, Type: delegate.ErrKindTimeout, Message: "no complete response within " + c.cfg.Timeout.String()}
	}
	return &delegate.APIError{Status: status, Type: delegate.ErrKindConnection, Message: c.redact(truncate(err.Error(), maxErrorMessage))}
}

// statusError builds the error for a non-2xx answer from its body and
// headers.
func (c *Client) statusError(ctx, actx context.Context, resp *http.Response) *delegate.APIError {
	ae := &delegate.APIError{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header, time.Now())}
	body, err := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
	if err != nil {
		if ctx.Err() != nil {
			return c.failure(ctx, actx, resp.StatusCode, err)
		}
		// The status decides what happens next; say what was lost.
		ae.Message = "error body unreadable: " + c.redact(truncate(err.Error(), maxErrorMessage))
		return ae
	}
	d := parseErrorBody(body)
	ae.Type, ae.Code, ae.Message = d.Type, string(d.Code), c.redact(d.Message)
	return ae
}

// retryAfter reads retry-after-ms (OpenAI) or Retry-After (seconds or an
// HTTP date). It returns 0 when neither is present or valid.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < math.MaxInt64/1e6 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < math.MaxInt64/1e9 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// backoff returns the wait before retry n (1-based).
func (c *Client) backoff(n int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, max(c.cfg.MaxBackoff, time.Minute))
	}
	ceil := c.cfg.MinBackoff
	for i := 1; i < n && ceil < c.cfg.MaxBackoff; i++ {
		ceil *= 2
	}
	ceil = min(ceil, c.cfg.MaxBackoff)
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

func (c *Client) logRetry(ctx context.Context, ae *delegate.APIError, wait time.Duration) {
	if !c.logLim.Allow() {
		c.quiet.Add(1)
		return
	}
	c.log.LogAttrs(ctx, slog.LevelWarn, "retrying model call",
		slog.String("model", c.cfg.Model),
		slog.Int("attempt", ae.Attempts),
		slog.Int("status", ae.Status),
		slog.String("type", ae.Type),
		slog.String("code", ae.Code),
		slog.String("message", truncate(ae.Message, 200)),
		slog.Duration("wait", wait),
		slog.Int64("suppressed", c.quiet.Swap(0)),
	)
}

// redact removes the API key from a message that may echo it.
func (c *Client) redact(s string) string {
	if c.cfg.APIKey == "" {
		return s
	}
	return strings.ReplaceAll(s, c.cfg.APIKey, "[redacted]")
}

// drainClose reads a little of what is left of a body and closes it.
// The connection can then be reused.
func drainClose(body io.ReadCloser) {
	// Errors here only cost connection reuse; the answer is already read.
	_, _ = io.CopyN(io.Discard, body, 4<<10)
	_ = body.Close()
}

// sleepCtx waits for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
