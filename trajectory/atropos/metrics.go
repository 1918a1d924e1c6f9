package atropos

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delegatelab/delegate/internal/edge"
)

// metrics are the trajectory API's Prometheus metrics, served on GET
// /metrics with the Go runtime's and the process's. Counters of events
// count from the process's start; the server's state (queue, buffers,
// steps, the persisted drop counts) is read from Stats at each scrape.
type metrics struct {
	reg       *edge.Metrics
	received  prometheus.Counter
	buffered  prometheus.Counter
	oversized prometheus.Counter
	refused   *prometheus.CounterVec // by status
	batches   prometheus.Counter
	resent    prometheus.Counter
	duration  *prometheus.HistogramVec // by route
}

// durationBounds are the upper bounds of the request latency histogram,
// in seconds. A held request (wait=S) lasts up to Config.MaxWait.
var durationBounds = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

func newMetrics(s *Server) (*metrics, error) {
	reg, err := edge.NewMetrics()
	if err != nil {
		return nil, err
	}
	m := &metrics{
		reg: reg,
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "delegate_api_groups_received_total",
			Help: "New groups stored, queued or buffered; a duplicate is not counted here.",
		}),
		buffered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "delegate_api_groups_buffered_total",
			Help: "New groups whose size differed from their environment's group_size, buffered until some sum to it.",
		}),
		oversized: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "delegate_api_groups_oversized_total",
			Help: "New groups larger than their environment's group_size, queued at once as whole packs of it.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "delegate_api_pushes_refused_total",
			Help: "Pushes (POST /scored_data, /scored_data_list) answered with an error, by HTTP status (499: the client went away).",
		}, []string{"status"}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "delegate_api_batches_sent_total",
			Help: "Batches handed out to the trainer for the first time.",
		}),
		resent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "delegate_api_batches_resent_total",
			Help: "Batches sent again on GET /batch?step=N.",
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "delegate_api_request_duration_seconds",
			Help:    "Latency of requests past the token check, by route (\"other\" for unknown paths and methods), held time included.",
			Buckets: durationBounds,
		}, []string{"route"}),
	}
	if err := reg.Register(m.received, m.buffered, m.oversized, m.refused, m.batches, m.resent, m.duration, statsCollector{s}); err != nil {
		return nil, err
	}
	return m, nil
}

// observe records a request's latency under the route of its mux
// pattern.
func (m *metrics) observe(pattern string, d time.Duration) {
	route := "other"
	if _, path, ok := strings.Cut(pattern, " "); ok {
		route = strings.TrimSuffix(path, "{$}")
	}
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}

// refuse counts a push answered with status.
func (m *metrics) refuse(status int) { m.refused.WithLabelValues(strconv.Itoa(status)).Inc() }

// statsCollector reports the server's state, one Stats snapshot per
// scrape.
type statsCollector struct{ s *Server }

var (
	descQueue    = prometheus.NewDesc("delegate_api_queue_depth", "Groups queued, not yet in a batch.", nil, nil)
	descBuffered = prometheus.NewDesc("delegate_api_buffered_sequences", "Sequences of the groups waiting in buffers.", nil, nil)
	descHeld     = prometheus.NewDesc("delegate_api_held_requests", "Requests held waiting now (GET /batch?wait=S, /status-env?wait=S).", nil, nil)
	descStep     = prometheus.NewDesc("delegate_api_step", "The current step: the starting step plus the batches assembled.", nil, nil)
	descSent     = prometheus.NewDesc("delegate_api_sent_step", "The last step handed out to the trainer.", nil, nil)
	descDup      = prometheus.NewDesc("delegate_api_groups_duplicate_total", "Groups pushed again and dropped, since the run's data was last reset (kept in the store).", nil, nil)
	descStale    = prometheus.NewDesc("delegate_api_groups_stale_dropped_total", "Groups dropped as more than max staleness steps behind, since the run's data was last reset (kept in the store).", nil, nil)
	descInflate  = prometheus.NewDesc("delegate_api_inflate_bytes", "Decompressed request body bytes held now, charged to the inflate budget.", nil, nil)
	descBudget   = prometheus.NewDesc("delegate_api_inflate_budget_bytes", "The inflate budget: the most decompressed bytes held at once.", nil, nil)
)

func (c statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueue, descBuffered, descHeld, descStep, descSent, descDup, descStale, descInflate, descBudget} {
		ch <- d
	}
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	for _, v := range []struct {
		desc *prometheus.Desc
		typ  prometheus.ValueType
		val  float64
	}{
		{descQueue, prometheus.GaugeValue, float64(st.Queued)},
		{descBuffered, prometheus.GaugeValue, float64(st.Buffered)},
		{descHeld, prometheus.GaugeValue, float64(st.Held)},
		{descStep, prometheus.GaugeValue, float64(st.Step)},
		{descSent, prometheus.GaugeValue, float64(st.Sent)},
		{descDup, prometheus.CounterValue, float64(st.Duplicates)},
		{descStale, prometheus.CounterValue, float64(st.StaleDropped)},
		{descInflate, prometheus.GaugeValue, float64(st.Inflating)},
		{descBudget, prometheus.GaugeValue, float64(c.s.cfg.InflateBudget)},
	} {
		m, err := prometheus.NewConstMetric(v.desc, v.typ, v.val)
		if err != nil { // a bug: the descriptions take no labels
			m = prometheus.NewInvalidMetric(v.desc, err)
		}
		ch <- m
	}
}
