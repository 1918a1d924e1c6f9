package view

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/delegatelab/delegate/rollout"
)

// target is what a page's request must take at most.
const target = time.Second

func verdict(d time.Duration) string {
	if d <= target {
		return "pass"
	}
	return "MISS"
}

// timedGet times one GET and fails on any status but 200.
func timedGet(b *testing.B, url string) time.Duration {
	b.Helper()
	start := time.Now()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET %s: status %d, %d bytes, %v", url, resp.StatusCode, n, err)
	}
	return time.Since(start)
}

// summary reads the rollout summary of run 0.
func summary(b *testing.B, base string) (RolloutSummary, time.Duration) {
	b.Helper()
	start := time.Now()
	resp, err := http.Get(base + "?run=0")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var sum RolloutSummary
	if err := json.NewDecoder(resp.Body).Decode(&sum); err != nil || resp.StatusCode != 200 {
		b.Fatalf("summary: status %d, %v", resp.StatusCode, err)
	}
	return sum, time.Since(start)
}

// BenchmarkRollouts100k builds a process directory of 100,000 rollouts and times its pages.
// Each time is checked against one second.
// It times the first page of a server that has read nothing yet:
// the summary and the first 100 rows, what is indexed within the request's budget.
// It times how long until the whole file is indexed, and the first page then.
// It times drill-downs: a page sorted by reward, the last rollout, and the trace of the first.
// The loop times the first page on the complete index.
func BenchmarkRollouts100k(b *testing.B) {
	const n = 100_000
	dir := filepath.Join(b.TempDir(), "rollouts")
	writeRollouts(b, dir, n)
	st, err := os.Stat(filepath.Join(dir, rollout.ArtifactsFile))
	if err != nil {
		b.Fatal(err)
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, hs := serveCold(b, config(func(c *Config) { c.Paths = []string{dir} }))
	base := hs.URL + "/api/rollouts"
	sum, first := summary(b, base)
	first += timedGet(b, base+"/list?run=0&offset=0&limit=100")
	partial := sum.All.N
	for !sum.Progress.Complete {
		time.Sleep(50 * time.Millisecond)
		sum, _ = summary(b, base)
	}
	indexed := time.Since(start)
	if sum.All.N != n {
		b.Fatalf("indexed %d rollouts, want %d", sum.All.N, n)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	_, full := summary(b, base)
	full += timedGet(b, base+"/list?run=0&offset=0&limit=100")
	sorted := timedGet(b, base+"/list?run=0&sort=reward&offset=50000&limit=500")
	last := timedGet(b, fmt.Sprintf("%s/item?run=0&rec=%d", base, n-1))
	trace := timedGet(b, hs.URL+"/api/trace?run=0&rec=0")
	b.Logf("%d rollouts, %.1f MB of artifacts.jsonl; heap after indexing %+.1f MB", n, float64(st.Size())/1e6, (float64(after.HeapAlloc)-float64(before.HeapAlloc))/1e6)
	b.Logf("first page, cold (summary + 100 rows of the %d rollouts indexed so far): %v %s", partial, first.Round(time.Millisecond), verdict(first))
	b.Logf("whole file indexed after %v (in the background, while pages answer)", indexed.Round(time.Millisecond))
	b.Logf("first page, all indexed (summary of %d + 100 rows): %v %s", n, full.Round(time.Millisecond), verdict(full))
	b.Logf("drill-down, page of 500 sorted by reward at offset 50,000: %v %s", sorted.Round(time.Millisecond), verdict(sorted))
	b.Logf("drill-down, rollout %d: %v %s", n-1, last.Round(time.Microsecond), verdict(last))
	b.Logf("drill-down, a rollout's trace: %v %s", trace.Round(time.Microsecond), verdict(trace))
	b.ReportMetric(float64(first.Milliseconds()), "cold-first-page-ms")
	b.ReportMetric(indexed.Seconds(), "index-s")
	b.ResetTimer()
	for b.Loop() {
		timedGet(b, base+"?run=0")
		timedGet(b, base+"/list?run=0&offset=0&limit=100")
	}
}
