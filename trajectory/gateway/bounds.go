package gateway

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delegatelab/delegate"
)

// The bounds a call may pass, as the refusal metric labels them.
const (
	boundCalls = "session_calls"
	boundBytes = "session_bytes"
	boundTotal = "total_bytes"
)

// The sizes the byte estimates count: an int or float64 is 8 bytes, and
// each record, message, tool call and tool has a fixed part besides its
// text. The fixed parts are those of the structs on 64-bit platforms,
// rounded up.
const (
	wordBytes     = strconv.IntSize / 8
	callBytes     = 512
	messageBytes  = 96
	toolCallBytes = 48
	toolBytes     = 80
	sampleBytes   = 256
	turnBytes     = messageBytes + 8
)

// requestBytes estimates the memory a recorded request holds.
func requestBytes(req *delegate.Request) int64 {
	n := int64(0)
	for i := range req.Messages {
		n += msgBytes(&req.Messages[i])
	}
	for _, t := range req.Tools {
		n += toolBytes + int64(len(t.Name)+len(t.Description)+len(t.Parameters))
	}
	for _, s := range req.Stop {
		n += int64(len(s)) + 16
	}
	return n
}

// msgBytes estimates the memory of one message.
func msgBytes(m *delegate.Message) int64 {
	n := int64(messageBytes + len(m.Content) + len(m.Name) + len(m.ToolCallID))
	for _, tc := range m.ToolCalls {
		n += toolCallBytes + int64(len(tc.ID)+len(tc.Name)+len(tc.Arguments))
	}
	return n
}

// choiceBytes estimates the memory a recorded call holds beyond its
// request and prompt ids, which the choices of one request share.
func choiceBytes(c *Call) int64 {
	return callBytes + msgBytes(&c.Output) + int64(wordBytes*(len(c.CompletionTokenIDs)+len(c.Logprobs))+
		len(c.NoTokens)+len(c.Error)+len(c.Model)+len(c.Role)+len(c.TemplateHash)+len(c.FinishReason))
}

// recordBytes estimates the memory the calls of one request hold: the
// request and its prompt ids once, and each choice.
func recordBytes(calls []Call) int64 {
	if len(calls) == 0 {
		return 0
	}
	n := requestBytes(&calls[0].Request) + int64(wordBytes*len(calls[0].PromptTokenIDs))
	for i := range calls {
		n += choiceBytes(&calls[i])
	}
	return n
}

// finishedBytes estimates the memory a finished session waiting for its
// group holds: its calls, each with its own request, and its samples.
func finishedBytes(f *Finished) int64 {
	n := int64(0)
	for i := range f.Calls {
		c := &f.Calls[i]
		n += requestBytes(&c.Request) + int64(wordBytes*len(c.PromptTokenIDs)) + choiceBytes(c)
	}
	for _, s := range f.Samples {
		// A sample's turns share their text with the calls.
		n += sampleBytes + int64(3*wordBytes*len(s.Tokens)+turnBytes*len(s.Messages)+wordBytes*len(s.Calls))
	}
	return n
}

// admit reserves room for a request of n choices and bytes in s. It
// returns the refusal of the bound the request would pass, recorded in
// the session, or nil. A refusal is answered before the backend sees the
// request, and the agent is told not to retry one of the session's own
// bounds.
func (g *Gateway) admit(s *session, w http.ResponseWriter, c *Call, n int, bytes int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var bound, msg string
	status := http.StatusTooManyRequests
	switch {
	case len(s.calls)+s.generating+n > g.cfg.MaxSessionCalls:
		bound = boundCalls
		msg = fmt.Sprintf("the session's bound of %d recorded calls is reached (%d recorded, %d asked): end it with its reward", g.cfg.MaxSessionCalls, len(s.calls)+s.generating, n)
	case s.bytes+bytes > g.cfg.MaxSessionBytes:
		bound, status = boundBytes, http.StatusRequestEntityTooLarge
		msg = fmt.Sprintf("the session's bound of %d recorded bytes would be passed (%d held, this request %d): end it with its reward", g.cfg.MaxSessionBytes, s.bytes, bytes)
	case !g.reserve(bytes):
		bound = boundTotal
		msg = fmt.Sprintf("the gateway's bound of %d bytes held by its sessions would be passed: retry once sessions end", g.cfg.MaxTotalBytes)
	}
	if bound == "" {
		s.generating += n
		s.bytes += bytes
		return nil
	}
	g.metrics.refused.WithLabelValues(bound).Inc()
	s.refused++
	if bound != boundTotal {
		// Retrying cannot help: the session's record is full.
		w.Header().Set("X-Should-Retry", "false")
	}
	// The first refusal by each bound is recorded, the others counted:
	// a looping agent cannot grow its record past the bound.
	if !s.done && !s.refusedBy[bound] {
		if s.refusedBy == nil {
			s.refusedBy = map[string]bool{}
		}
		s.refusedBy[bound] = true
		rec := *c
		rec.Request = delegate.Request{} // the request is what the bound keeps out
		rec.Failed, rec.Status, rec.Error, rec.Index = true, status, msg, len(s.calls)
		s.calls = append(s.calls, &rec)
		g.addHeld(s, choiceBytes(&rec))
	}
	code := "session_calls_exceeded"
	switch bound {
	case boundBytes:
		code = "session_bytes_exceeded"
	case boundTotal:
		code = "gateway_bytes_exceeded"
	}
	return &delegate.APIError{Status: status, Type: "invalid_request_error", Code: code, Message: msg}
}

// reserve adds n to the bytes held by the gateway's sessions unless that
// would pass MaxTotalBytes.
func (g *Gateway) reserve(n int64) bool {
	for {
		held := g.held.Load()
		if held+n > g.cfg.MaxTotalBytes {
			return false
		}
		if g.held.CompareAndSwap(held, held+n) {
			return true
		}
	}
}

// addHeld adds n bytes to s and to the gateway's total, unless s was
// released; the caller holds s.mu.
func (g *Gateway) addHeld(s *session, n int64) {
	if s.released {
		return
	}
	s.bytes += n
	g.held.Add(n)
}

// release takes a session that left the live ones out of the gateway's
// total. Calls that end later change nothing there.
func (g *Gateway) release(s *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.released {
		s.released = true
		g.held.Add(-s.bytes)
	}
}

// secrets match what an error text may carry that must not be stored:
// a URL's user and password, bearer and API keys, session ids. Each
// match becomes its replacement.
var secrets = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`://[^/@\s]+@`), "://[redacted]@"},
	{regexp.MustCompile(`(?i)(bearer\s+)\S+`), "${1}[redacted]"},
	{regexp.MustCompile(`sk-[A-Za-z0-9_\-]{6,}`), "sk-[redacted]"},
	{regexp.MustCompile(`sess-[0-9a-f]{16,}`), "sess-[redacted]"},
}

// maxErrorText bounds the error text a failed call keeps.
const maxErrorText = 1024

// secretFree returns an error text without credentials, at most
// maxErrorText bytes.
func secretFree(msg string) string {
	for _, sc := range secrets {
		msg = sc.re.ReplaceAllString(msg, sc.with)
	}
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText] + "…"
	}
	return msg
}

// gatewayMetrics are the gateway's Prometheus metrics, registered beside
// its server's and served at GET /metrics.
type gatewayMetrics struct {
	refused   *prometheus.CounterVec // by bound
	failed    prometheus.Counter     // calls the backend failed
	timedOut  *prometheus.CounterVec // groups closed by the time-out, by outcome
	dropped   prometheus.Counter     // sessions of dropped groups
	heldBytes prometheus.GaugeFunc
}

func newGatewayMetrics(held func() float64) *gatewayMetrics {
	return &gatewayMetrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "delegate_gateway_refused_calls_total",
			Help: "Calls refused before the backend because they would pass a bound: session_calls, session_bytes or total_bytes."}, []string{"bound"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "delegate_gateway_failed_calls_total",
			Help: "Calls the backend failed (an error status, a timeout, a lost connection, a client gone), recorded as failed."}),
		timedOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "delegate_gateway_groups_timed_out_total",
			Help: "Groups closed by the group time-out: written smaller, or dropped with fewer than 2 sessions."}, []string{"outcome"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "delegate_gateway_dropped_sessions_total",
			Help: "Finished sessions of groups dropped by the group time-out."}),
		heldBytes: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "delegate_gateway_held_bytes",
			Help: "Estimated bytes held by open sessions and finished ones waiting for their group."}, held),
	}
}

func (m *gatewayMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.refused, m.failed, m.timedOut, m.dropped, m.heldBytes}
}
