package standin

import (
	"github.com/prometheus/client_golang/prometheus"
)

// collector reports a server's counters to Prometheus, read at each scrape.
// A request costs nothing more than the atomic adds it did before.
type collector struct{ s *Server }

var (
	descRequests    = prometheus.NewDesc("delegate_standin_requests_total", "Chat completion requests received.", nil, nil)
	descBad         = prometheus.NewDesc("delegate_standin_bad_requests_total", "Chat completion requests answered 4xx: malformed, no messages, streaming.", nil, nil)
	descCanceled    = prometheus.NewDesc("delegate_standin_canceled_total", "Requests whose client went away, or whose server closed, before the answer.", nil, nil)
	descInFlight    = prometheus.NewDesc("delegate_standin_in_flight", "Chat completion requests being handled now.", nil, nil)
	descMaxInFlight = prometheus.NewDesc("delegate_standin_max_in_flight", "The most chat completion requests handled at once.", nil, nil)
	descFaults      = prometheus.NewDesc("delegate_standin_faults_total", "Faults injected, by kind.", []string{"kind"}, nil)
	descAnswers     = prometheus.NewDesc("delegate_standin_answers_total", "Proper answers written, by the kind of request recognised.", []string{"kind"}, nil)
)

// faultNames label the faults in the order of faultRateLimit..faultGarbage,
// as Config's fault rates name them.
var faultNames = [faultGarbage + 1]string{faultRateLimit: "rate_limit", faultServerError: "server_error",
	faultReset: "reset", faultTruncated: "truncated", faultSlow: "slow", faultGarbage: "garbage"}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRequests, descBad, descCanceled, descInFlight, descMaxInFlight, descFaults, descAnswers} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := &c.s.st
	send := func(d *prometheus.Desc, t prometheus.ValueType, v int64, labels ...string) {
		m, err := prometheus.NewConstMetric(d, t, float64(v), labels...)
		if err != nil { // a bug: labels that do not fit the description
			m = prometheus.NewInvalidMetric(d, err)
		}
		ch <- m
	}
	send(descRequests, prometheus.CounterValue, st.requests.Load())
	send(descBad, prometheus.CounterValue, st.bad.Load())
	send(descCanceled, prometheus.CounterValue, st.canceled.Load())
	send(descInFlight, prometheus.GaugeValue, st.inFlight.Load())
	send(descMaxInFlight, prometheus.GaugeValue, st.maxInFlight.Load())
	for f := faultRateLimit; f <= faultGarbage; f++ {
		send(descFaults, prometheus.CounterValue, st.faults[f].Load(), faultNames[f])
	}
	for k := range NumKinds {
		send(descAnswers, prometheus.CounterValue, st.answers[k].Load(), k.String())
	}
}
