package server_test

import (
	"context"
	"math"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge/edgetest"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/server"
)

// series returns the series of family name whose labels are exactly
// labels (name=value pairs), or nil.
func series(mfs map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	for _, m := range mfs[name].GetMetric() {
		if len(m.GetLabel())*2 != len(labels) {
			continue
		}
		match := true
		for i, lp := range m.GetLabel() {
			if lp.GetName() != labels[2*i] || lp.GetValue() != labels[2*i+1] {
				match = false
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// value is the value of a counter or gauge series, -1 when absent.
func value(mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	m := series(mfs, name, labels...)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	return m.GetUntyped().GetValue()
}

// After known requests, every metric serve exported before client_golang
// carries the same name, type, labels and value.
func TestServerMetricsExposition(t *testing.T) {
	usage := delegate.Usage{PromptTokens: 7, CompletionTokens: 3}
	srv := serve(t, modeltest.New("m", func(context.Context, *delegate.Request) (*delegate.Response, error) {
		r := modeltest.Text("ok")
		r.Usage = usage
		return r, nil
	}))
	do(t, "POST", srv.URL+"/v1/chat/completions", "", userX)
	do(t, "POST", srv.URL+"/v1/chat/completions", "", userX)
	do(t, "POST", srv.URL+"/v1/chat/completions", "", `{"model":"m"}`)
	do(t, "POST", srv.URL+"/v1/chat/completions", "", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`)
	do(t, "GET", srv.URL+"/v1/models/m", "", "")
	do(t, "GET", srv.URL+"/no/such/path", "", "")
	mfs := edgetest.Scrape(t, srv.URL, "")

	types := []struct {
		name string
		typ  dto.MetricType
	}{
		{"delegate_serve_requests_total", dto.MetricType_COUNTER},
		{"delegate_serve_http_requests_total", dto.MetricType_COUNTER},
		{"delegate_serve_prompt_tokens_total", dto.MetricType_COUNTER},
		{"delegate_serve_completion_tokens_total", dto.MetricType_COUNTER},
		{"delegate_serve_request_duration_seconds", dto.MetricType_HISTOGRAM},
		{"delegate_serve_queue_depth", dto.MetricType_GAUGE},
		{"delegate_serve_in_flight", dto.MetricType_GAUGE},
	}
	for _, tt := range types {
		if got := mfs[tt.name].GetType(); mfs[tt.name] == nil || got != tt.typ {
			t.Errorf("%s: type %v (present %t), want %v", tt.name, got, mfs[tt.name] != nil, tt.typ)
		}
	}

	values := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"delegate_serve_requests_total", []string{"model", "m", "status", "200"}, 2},
		{"delegate_serve_requests_total", []string{"model", "m", "status", "400"}, 1},
		{"delegate_serve_requests_total", []string{"model", "", "status", "404"}, 1},
		{"delegate_serve_http_requests_total", []string{"path", "/v1/chat/completions", "status", "200"}, 2},
		{"delegate_serve_http_requests_total", []string{"path", "/v1/chat/completions", "status", "400"}, 1},
		{"delegate_serve_http_requests_total", []string{"path", "/v1/chat/completions", "status", "404"}, 1},
		{"delegate_serve_http_requests_total", []string{"path", "/v1/models/{model}", "status", "200"}, 1},
		{"delegate_serve_http_requests_total", []string{"path", "other", "status", "404"}, 1},
		{"delegate_serve_prompt_tokens_total", []string{"model", "m"}, 14},
		{"delegate_serve_completion_tokens_total", []string{"model", "m"}, 6},
		{"delegate_serve_queue_depth", nil, 0},
		{"delegate_serve_in_flight", nil, 0},
	}
	for _, tt := range values {
		if got := value(mfs, tt.name, tt.labels...); got != tt.want {
			t.Errorf("%s%q = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}

	// The histogram keeps its buckets, 5 ms to 300 s then +Inf, and counts
	// the four chat completions.
	h := series(mfs, "delegate_serve_request_duration_seconds").GetHistogram()
	if got, want := h.GetSampleCount(), uint64(4); got != want {
		t.Errorf("duration count = %d, want %d", got, want)
	}
	b := h.GetBucket()
	if len(b) != 16 || b[0].GetUpperBound() != 0.005 || b[14].GetUpperBound() != 300 ||
		!math.IsInf(b[15].GetUpperBound(), 1) || b[15].GetCumulativeCount() != h.GetSampleCount() {
		t.Errorf("duration buckets = %v, want 15 from 0.005 to 300, then +Inf holding every sample", b)
	}
	for i := 1; i < len(b); i++ {
		if b[i].GetCumulativeCount() < b[i-1].GetCumulativeCount() || b[i].GetCumulativeCount() > h.GetSampleCount() {
			t.Errorf("bucket %v not cumulative", b[i])
		}
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes"} {
		if mfs[name] == nil {
			t.Errorf("no %s in /metrics", name)
		}
	}
}

// With a key, /metrics asks for it like /v1 does; /health stays open.
func TestServerMetricsNeedTheKey(t *testing.T) {
	const key = "sk-metrics-key-0123456789"
	s, err := server.NewWithConfig(testConfig(func(c *server.Config) { c.APIKey = key }), nil, okModel("m"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	for _, tt := range []struct {
		name, key string
		status    int
	}{
		{"no key", "", 401},
		{"wrong key", "sk-wrong", 401},
		{"right key", key, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if status, _, body := do(t, "GET", srv.URL+"/metrics", tt.key, ""); status != tt.status {
				t.Errorf("status %d, want %d: %s", status, tt.status, body)
			}
		})
	}
	do(t, "POST", srv.URL+"/v1/chat/completions", "", userX)
	do(t, "POST", srv.URL+"/v1/chat/completions", key, userX)
	mfs := edgetest.Scrape(t, srv.URL, key)
	for _, tt := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"model", "", "status", "401"}, 1},
		{[]string{"model", "m", "status", "200"}, 1},
	} {
		if got := value(mfs, "delegate_serve_requests_total", tt.labels...); got != tt.want {
			t.Errorf("delegate_serve_requests_total%q = %v, want %v", tt.labels, got, tt.want)
		}
	}
	if got := value(mfs, "delegate_serve_http_requests_total", "path", "/metrics", "status", "401"); got != 2 {
		t.Errorf("refused scrapes counted %v, want 2", got)
	}
}
