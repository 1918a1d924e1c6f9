package atropos_test

import (
	"fmt"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/delegatelab/delegate/internal/edge/edgetest"
	"github.com/delegatelab/delegate/trajectory/atropos"
)

// metricValue is the value of the counter or gauge name, or -1 when
// absent. label is a label's name and value, or empty for a metric with
// no label. For a histogram it is the sample count.
func metricValue(mfs map[string]*dto.MetricFamily, name string, label ...string) float64 {
	for _, m := range mfs[name].GetMetric() {
		lp := m.GetLabel()
		if len(label) == 0 && len(lp) != 0 || len(label) == 2 && (len(lp) != 1 || lp[0].GetName() != label[0] || lp[0].GetValue() != label[1]) {
			continue
		}
		switch mfs[name].GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

type wantMetric struct {
	name  string
	label []string
	want  float64
}

func checkMetrics(t *testing.T, what string, mfs map[string]*dto.MetricFamily, want []wantMetric) {
	t.Helper()
	for _, w := range want {
		if got := metricValue(mfs, w.name, w.label...); got != w.want {
			t.Errorf("%s: %s%q = %v, want %v", what, w.name, w.label, got, w.want)
		}
	}
}

// After known pushes and batches, GET /metrics reports each of them, on
// both backends.
func TestMetrics(t *testing.T) {
	backends(t, config(func(c *atropos.Config) { c.MaxStaleness = 1 }), func(t *testing.T, h *harness) {
		u := h.url
		startRun(t, u, 2, 2) // batch size 2, group size 2
		pv := func(tag, v int) []byte {
			return group(2, tag, fmt.Sprintf(`, "env_id": 0, "group_overrides": {"policy_version": %d}`, v))
		}
		callJSON(t, "POST", u+"/scored_data", pv(1, 0))
		callJSON(t, "POST", u+"/scored_data", pv(1, 0)) // a duplicate
		wantFields(t, "odd group", callJSON(t, "POST", u+"/scored_data", group(1, 9, `, "env_id": 0`)), map[string]any{"status": "buffered"})
		if status, out := call(t, "POST", u+"/scored_data", group(2, 8, `, "env_id": 7`)); status != http.StatusBadRequest {
			t.Errorf("push to an unknown env: %d %s, want 400", status, out)
		}
		if status, out := call(t, "POST", u+"/scored_data_list", []byte(`[{"tokens": [[1]]}]`)); status != http.StatusUnprocessableEntity {
			t.Errorf("push without masks: %d %s, want 422", status, out)
		}
		call(t, "GET", u+"/no/such/path", nil)
		checkMetrics(t, "before a batch", edgetest.Scrape(t, u, ""), []wantMetric{
			{"delegate_api_groups_received_total", nil, 2},
			{"delegate_api_groups_buffered_total", nil, 1},
			{"delegate_api_groups_duplicate_total", nil, 1},
			{"delegate_api_pushes_refused_total", []string{"status", "400"}, 1},
			{"delegate_api_pushes_refused_total", []string{"status", "422"}, 1},
			{"delegate_api_queue_depth", nil, 1},
			{"delegate_api_buffered_sequences", nil, 1},
			{"delegate_api_batches_sent_total", nil, 0},
			{"delegate_api_step", nil, 0},
			{"delegate_api_request_duration_seconds", []string{"route", "/scored_data"}, 4},
			{"delegate_api_request_duration_seconds", []string{"route", "/scored_data_list"}, 1},
			{"delegate_api_request_duration_seconds", []string{"route", "/batch"}, 1}, // startRun's
			{"delegate_api_request_duration_seconds", []string{"route", "/register-env"}, 1},
			{"delegate_api_request_duration_seconds", []string{"route", "other"}, 1},
		})

		// Steps 1 to 3: step 1 is sent again, and at step 3 one group is
		// more than one step behind.
		callJSON(t, "GET", u+"/batch", nil)
		callJSON(t, "GET", u+"/batch?step=1", nil)
		callJSON(t, "POST", u+"/scored_data", pv(2, 0))
		callJSON(t, "GET", u+"/batch", nil)
		callJSON(t, "POST", u+"/scored_data", pv(3, 0))
		callJSON(t, "POST", u+"/scored_data", pv(4, 2))
		callJSON(t, "GET", u+"/batch", nil)

		// A trainer held waiting for step 4, whose batch comes from the
		// buffer once a second odd group fills it.
		held := callAsync(t, "GET", u+"/batch?wait=30", nil)
		waitHeld(t, h, 1)
		checkMetrics(t, "while held", edgetest.Scrape(t, u, ""), []wantMetric{
			{"delegate_api_held_requests", nil, 1},
			{"delegate_api_batches_sent_total", nil, 3},
			{"delegate_api_batches_resent_total", nil, 1},
			{"delegate_api_groups_stale_dropped_total", nil, 1},
			{"delegate_api_step", nil, 3},
			{"delegate_api_sent_step", nil, 3},
		})
		callJSON(t, "POST", u+"/scored_data", group(1, 10, `, "env_id": 0`))
		if a := <-held; a.status != http.StatusOK || fmt.Sprint(a.body["step"]) != "4" {
			t.Errorf("held batch: %d %v, want step 4", a.status, a.body)
		}
		checkMetrics(t, "at the end", edgetest.Scrape(t, u, ""), []wantMetric{
			{"delegate_api_groups_received_total", nil, 6},
			{"delegate_api_groups_buffered_total", nil, 2},
			{"delegate_api_groups_duplicate_total", nil, 1},
			{"delegate_api_groups_stale_dropped_total", nil, 1},
			{"delegate_api_batches_sent_total", nil, 4},
			{"delegate_api_batches_resent_total", nil, 1},
			{"delegate_api_queue_depth", nil, 0},
			{"delegate_api_buffered_sequences", nil, 0},
			{"delegate_api_held_requests", nil, 0},
			{"delegate_api_step", nil, 4},
			{"delegate_api_sent_step", nil, 4},
			{"delegate_api_inflate_bytes", nil, 0},
			{"delegate_api_inflate_budget_bytes", nil, 2 * 4 * 64 << 20}, // the defaults
			{"delegate_api_request_duration_seconds", []string{"route", "/batch"}, 6},
			{"delegate_api_request_duration_seconds", []string{"route", "/metrics"}, 2},
		})
	})
}

// The Go runtime's and the process's metrics come with the API's own.
func TestMetricsRuntime(t *testing.T) {
	h := startMemory(t, atropos.DefaultConfig())
	mfs := edgetest.Scrape(t, h.url, "")
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "delegate_api_queue_depth"} {
		if mfs[name] == nil {
			t.Errorf("no %s in /metrics", name)
		}
	}
}
