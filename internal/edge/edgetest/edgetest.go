// Package edgetest holds what tests of the project's servers share about the edge.
// That is scraping /metrics as Prometheus would.
package edgetest

import (
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape GETs base/metrics and parses the answer with Prometheus's own text parser.
// A non-empty token goes as a bearer token.
// Any status but 200, or another format, fails the test.
func Scrape(t testing.TB, base, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/metrics", nil)
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
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: status %d", resp.StatusCode)
	}
	if got := expfmt.ResponseFormat(resp.Header).FormatType(); got != expfmt.TypeTextPlain {
		t.Fatalf("GET /metrics: Content-Type %q is not the text format", resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}
