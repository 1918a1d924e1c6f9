package standin

import (
	"context"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/delegatelab/delegate/internal/edge/edgetest"
)

// metricValue is the value of counter or gauge name whose kind label is kind, or -1 when absent.
// An empty kind means no label.
func metricValue(mfs map[string]*dto.MetricFamily, name, kind string) float64 {
	for _, m := range mfs[name].GetMetric() {
		got := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "kind" {
				got = lp.GetValue()
			}
		}
		if got != kind {
			continue
		}
		if m.Counter != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return -1
}

// GET /metrics reports Stats' counters after known requests: answers
// by kind on one server, faults by kind on another.
func TestMetrics(t *testing.T) {
	plain := wireReq{Messages: []wireMsg{wmsg("user", "hello")}}
	type want struct {
		name, kind string
		value      float64
	}
	tests := []struct {
		name string
		cfg  Config
		ok   int // requests answered 200
		want []want
	}{
		{"answers", DefaultConfig(), 3, []want{
			{"delegate_standin_requests_total", "", 4},
			{"delegate_standin_bad_requests_total", "", 1},
			{"delegate_standin_canceled_total", "", 0},
			{"delegate_standin_in_flight", "", 0},
			{"delegate_standin_max_in_flight", "", 1},
			{"delegate_standin_answers_total", "plain", 3},
			{"delegate_standin_answers_total", "route_calls", 0},
			{"delegate_standin_faults_total", "server_error", 0},
		}},
		{"faults", testConfig(func(c *Config) { c.Faults = FaultRates{ServerError: 1} }), 0, []want{
			{"delegate_standin_requests_total", "", 4},
			{"delegate_standin_bad_requests_total", "", 1},
			{"delegate_standin_answers_total", "plain", 0},
			{"delegate_standin_faults_total", "server_error", 3},
			{"delegate_standin_faults_total", "rate_limit", 0},
			{"delegate_standin_faults_total", "garbage", 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, tt.cfg)
			base := "http://" + s.Addr()
			for range 3 {
				status, _, body, err := post(context.Background(), http.DefaultClient, s.URL(), plain)
				if err != nil {
					t.Fatal(err)
				}
				if wantOK := tt.ok > 0; (status == http.StatusOK) != wantOK {
					t.Fatalf("status %d: %s", status, body)
				}
			}
			if status, _, _, err := post(context.Background(), http.DefaultClient, s.URL(), wireReq{}); err != nil || status != http.StatusBadRequest {
				t.Fatalf("no messages: status %d, err %v; want 400", status, err)
			}
			mfs := edgetest.Scrape(t, base, "")
			for _, w := range tt.want {
				if got := metricValue(mfs, w.name, w.kind); got != w.value {
					t.Errorf("%s{kind=%q} = %v, want %v", w.name, w.kind, got, w.value)
				}
			}
			for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes"} {
				if mfs[name] == nil {
					t.Errorf("no %s in /metrics", name)
				}
			}
		})
	}
}
