package edge

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsOverHTTP checks that the registry serves its metrics over real HTTP.
// It serves the Go runtime's, the process's and the server's own, behind the
// edge's token like any other path.
func TestMetricsOverHTTP(t *testing.T) {
	m, err := NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	hits := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_hits_total", Help: "Hits."})
	if err := m.Register(hits); err != nil {
		t.Fatal(err)
	}
	hits.Add(3)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m)
	srv := httptest.NewServer(Config{Token: "s3cret"}.Handler(mux))
	defer srv.Close()

	get := func(token string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", srv.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, token := range []string{"", "wrong"} {
		resp := get(token)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: status %d, want 401", token, resp.StatusCode)
		}
	}

	resp := get("s3cret")
	defer resp.Body.Close()
	if got := expfmt.ResponseFormat(resp.Header).FormatType(); got != expfmt.TypeTextPlain {
		t.Errorf("Content-Type %q is not the text format", resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	if mf := mfs["test_hits_total"]; mf == nil || mf.GetMetric()[0].GetCounter().GetValue() != 3 {
		t.Errorf("test_hits_total = %v, want 3", mf)
	}
	want := []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "promhttp_metric_handler_errors_total"}
	if runtime.GOOS == "linux" { // where the process collector reads /proc
		want = append(want, "process_cpu_seconds_total", "process_resident_memory_bytes", "process_start_time_seconds")
	}
	for _, name := range want {
		if mfs[name] == nil {
			t.Errorf("no %s in /metrics", name)
		}
	}
}

// A collector whose metrics clash with registered ones is refused.
func TestMetricsRegisterClash(t *testing.T) {
	m, err := NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	opts := prometheus.GaugeOpts{Name: "test_depth", Help: "Depth."}
	if err := m.Register(prometheus.NewGauge(opts)); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(prometheus.NewGauge(opts)); err == nil {
		t.Error("a second test_depth was registered")
	}
}
