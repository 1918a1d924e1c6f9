package edge

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one server's Prometheus registry, served by ServeHTTP. It
// starts with the Go runtime's and the process's collectors; the server
// registers its own. Safe for concurrent use.
//
// Every server mounts it at GET /metrics behind its own checks, so a
// server with a token asks for it there too.
type Metrics struct {
	reg *prometheus.Registry
	h   http.Handler
}

// NewMetrics returns a registry holding the Go runtime and process
// collectors. Each server has its own, so that two servers in one
// process (tests) do not share series.
func NewMetrics() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("register go collector: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("register process collector: %w", err)
	}
	// Registry makes the handler count its own failures there
	// (promhttp_metric_handler_errors_total).
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, ErrorHandling: promhttp.HTTPErrorOnError})
	return &Metrics{reg: reg, h: h}, nil
}

// Register adds a server's collectors. It fails on a collector whose
// metrics clash with one registered already.
func (m *Metrics) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	return nil
}

// ServeHTTP writes every metric in the format the scraper accepts: the
// text format (version 0.0.4) when it names none.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.h.ServeHTTP(w, r) }
