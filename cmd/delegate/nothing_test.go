package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestNothingProducedExitsNonZero runs process and bench against a server
// that refuses every key, and a port where nothing listens. With no result
// at all, the command must fail and its summary say so.
func TestNothingProducedExitsNonZero(t *testing.T) {
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
	}))
	defer refuse.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()

	data := writeGSM8K(t, 2)
	for _, srv := range []struct{ name, url string }{{"401", refuse.URL}, {"nothing listening", goneURL}} {
		cfg := writeBenchConfig(t, srv.url)
		for _, tt := range []struct {
			name    string
			args    []string
			summary string
		}{
			{"process", []string{"process", "--config", cfg, "--dataset", "gsm8k", "--data", data, "-g", "2", "--strategy", "single",
				"--progress", "none", "--out", filepath.Join(t.TempDir(), "out")}, "nothing produced: no rollout of 4 succeeded"},
			{"bench", []string{"bench", "--config", cfg, "--dataset", "gsm8k", "--data", data, "--strategies", "single",
				"--progress=false", "--out", t.TempDir()}, "nothing produced: every item ended in an error"},
		} {
			t.Run(srv.name+"/"+tt.name, func(t *testing.T) {
				out, err := execute(t, testEnv, tt.args...)
				if err == nil || !strings.Contains(err.Error(), "nothing produced") {
					t.Errorf("err = %v; want nothing produced\n%s", err, out)
				}
				if !strings.Contains(out, tt.summary) {
					t.Errorf("output lacks %q:\n%s", tt.summary, out)
				}
			})
		}
	}
}
