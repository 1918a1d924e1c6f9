package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge"
)

// metrics are the server's Prometheus metrics, registered on the edge's
// registry beside the Go runtime's and the process's. Their names and
// labels are the ones of the exposition written by hand before, so that
// scrapers and dashboards keep working. Safe for concurrent use.
type metrics struct {
	reg *edge.Metrics

	queue    prometheus.Gauge       // requests waiting for a turn
	byRoute  *prometheus.CounterVec // every request: path, status
	requests *prometheus.CounterVec // chat completions: model, status
	prompt   *prometheus.CounterVec // by model
	output   *prometheus.CounterVec
	latency  prometheus.Histogram
}

// latencyBounds are the upper bounds of the latency histogram, in seconds.
var latencyBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// newMetrics registers the server's metrics; inFlight reports the number
// of requests generating at scrape time.
func newMetrics(inFlight func() float64) (*metrics, error) {
	reg, err := edge.NewMetrics()
	if err != nil {
		return nil, err
	}
	m := &metrics{
		reg: reg,
		queue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "delegate_serve_queue_depth", Help: "Chat completion requests waiting for a turn."}),
		byRoute: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "delegate_serve_http_requests_total",
			Help: "Requests answered on every path, by route (\"other\" for unknown paths) and HTTP status (499: the client went away).",
		}, []string{"path", "status"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "delegate_serve_requests_total",
			Help: "Chat completion requests answered, by model and HTTP status (499: the client went away).",
		}, []string{"model", "status"}),
		prompt: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "delegate_serve_prompt_tokens_total", Help: "Prompt tokens of the chat completions answered, by model.",
		}, []string{"model"}),
		output: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "delegate_serve_completion_tokens_total", Help: "Completion tokens generated for the chat completions answered, by model.",
		}, []string{"model"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "delegate_serve_request_duration_seconds",
			Help:    "Latency of chat completion requests, from their headers read to the last byte written.",
			Buckets: latencyBounds,
		}),
	}
	flight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "delegate_serve_in_flight", Help: "Chat completion requests generating."}, inFlight)
	if err := reg.Register(m.queue, m.byRoute, m.requests, m.prompt, m.output, m.latency, flight); err != nil {
		return nil, err
	}
	return m, nil
}

// request counts a chat completion request answered with status. model is
// "" for requests that named no served model.
func (m *metrics) request(model string, status int) {
	m.requests.WithLabelValues(model, strconv.Itoa(status)).Inc()
}

// http counts a finished request of any path by its route and status.
func (m *metrics) http(route string, status int) {
	m.byRoute.WithLabelValues(route, strconv.Itoa(status)).Inc()
}

// done counts a finished chat completion request and its latency.
func (m *metrics) done(model string, status int, d time.Duration) {
	m.request(model, status)
	m.latency.Observe(d.Seconds())
}

// tokens counts a completion's usage. A negative count, which a backend
// should never report, is left out: a counter only grows.
func (m *metrics) tokens(model string, u delegate.Usage) {
	m.prompt.WithLabelValues(model).Add(float64(max(u.PromptTokens, 0)))
	m.output.WithLabelValues(model).Add(float64(max(u.CompletionTokens, 0)))
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) { s.metrics.reg.ServeHTTP(w, r) }
