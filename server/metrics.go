package server

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegatelab/delegate"
)

// metrics are the server's Prometheus metrics, written in the text
// exposition format (version 0.0.4) by serveMetrics. Safe for concurrent
// use.
type metrics struct {
	queue atomic.Int64 // requests waiting for a turn

	mu       sync.Mutex
	byRoute  map[routeKey]int64 // every request, by route and status
	requests map[reqKey]int64
	prompt   map[string]int64 // by model
	output   map[string]int64
	buckets  []int64 // latency counts per le bound (not cumulative)
	count    int64
	sum      float64
}

type routeKey struct {
	route  string
	status int
}

type reqKey struct {
	model  string
	status int
}

// latencyBounds are the upper bounds of the latency histogram, in seconds.
var latencyBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

func newMetrics() *metrics {
	return &metrics{
		byRoute: map[routeKey]int64{}, requests: map[reqKey]int64{}, prompt: map[string]int64{}, output: map[string]int64{},
		buckets: make([]int64, len(latencyBounds)),
	}
}

// request counts a chat completion request answered with status. model is
// "" for requests that named no served model.
func (m *metrics) request(model string, status int) {
	m.mu.Lock()
	m.requests[reqKey{model, status}]++
	m.mu.Unlock()
}

// http counts a finished request of any path by its route and status.
func (m *metrics) http(route string, status int) {
	m.mu.Lock()
	m.byRoute[routeKey{route, status}]++
	m.mu.Unlock()
}

// done counts a finished chat completion request and its latency.
func (m *metrics) done(model string, status int, d time.Duration) {
	sec := d.Seconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[reqKey{model, status}]++
	m.count++
	m.sum += sec
	if i := sort.SearchFloat64s(latencyBounds, sec); i < len(latencyBounds) {
		m.buckets[i]++
	}
}

// tokens counts a completion's usage.
func (m *metrics) tokens(model string, u delegate.Usage) {
	m.mu.Lock()
	m.prompt[model] += int64(u.PromptTokens)
	m.output[model] += int64(u.CompletionTokens)
	m.mu.Unlock()
}

func (s *Server) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	// A failed write means the scraper went away.
	_, _ = w.Write([]byte(s.metrics.text(len(s.turns))))
}

// text renders every metric in the text exposition format, series sorted
// so that the output is stable. inFlight is the number of requests
// generating (the turns held).
func (m *metrics) text(inFlight int) string {
	var b strings.Builder
	m.mu.Lock()
	defer m.mu.Unlock()

	header(&b, "delegate_serve_requests_total", "counter", "Chat completion requests answered, by model and HTTP status (499: the client went away).")
	keys := make([]reqKey, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].model != keys[j].model {
			return keys[i].model < keys[j].model
		}
		return keys[i].status < keys[j].status
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "delegate_serve_requests_total{model=\"%s\",status=\"%d\"} %d\n", label(k.model), k.status, m.requests[k])
	}
	header(&b, "delegate_serve_http_requests_total", "counter", "Requests answered on every path, by route (\"other\" for unknown paths) and HTTP status (499: the client went away).")
	routes := make([]routeKey, 0, len(m.byRoute))
	for k := range m.byRoute {
		routes = append(routes, k)
	}
	sort.Slice(routes, func(i, j int) bool {
		if routes[i].route != routes[j].route {
			return routes[i].route < routes[j].route
		}
		return routes[i].status < routes[j].status
	})
	for _, k := range routes {
		fmt.Fprintf(&b, "delegate_serve_http_requests_total{path=\"%s\",status=\"%d\"} %d\n", label(k.route), k.status, m.byRoute[k])
	}
	byModel(&b, "delegate_serve_prompt_tokens_total", "Prompt tokens of the chat completions answered, by model.", m.prompt)
	byModel(&b, "delegate_serve_completion_tokens_total", "Completion tokens generated for the chat completions answered, by model.", m.output)

	header(&b, "delegate_serve_request_duration_seconds", "histogram", "Latency of chat completion requests, from their headers read to the last byte written.")
	var cum int64
	for i, le := range latencyBounds {
		cum += m.buckets[i]
		fmt.Fprintf(&b, "delegate_serve_request_duration_seconds_bucket{le=\"%s\"} %d\n", strconv.FormatFloat(le, 'g', -1, 64), cum)
	}
	fmt.Fprintf(&b, "delegate_serve_request_duration_seconds_bucket{le=\"+Inf\"} %d\n", m.count)
	fmt.Fprintf(&b, "delegate_serve_request_duration_seconds_sum %s\n", strconv.FormatFloat(m.sum, 'g', -1, 64))
	fmt.Fprintf(&b, "delegate_serve_request_duration_seconds_count %d\n", m.count)

	header(&b, "delegate_serve_queue_depth", "gauge", "Chat completion requests waiting for a turn.")
	fmt.Fprintf(&b, "delegate_serve_queue_depth %d\n", m.queue.Load())
	header(&b, "delegate_serve_in_flight", "gauge", "Chat completion requests generating.")
	fmt.Fprintf(&b, "delegate_serve_in_flight %d\n", inFlight)
	return b.String()
}

func header(b *strings.Builder, name, typ, help string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func byModel(b *strings.Builder, name, help string, v map[string]int64) {
	header(b, name, "counter", help)
	models := make([]string, 0, len(v))
	for k := range v {
		models = append(models, k)
	}
	sort.Strings(models)
	for _, k := range models {
		fmt.Fprintf(b, "%s{model=\"%s\"} %d\n", name, label(k), v[k])
	}
}

// label escapes a label value as the text format wants: backslash, double
// quote and line feed.
func label(v string) string { return labelEscaper.Replace(v) }

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
