package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunServesAndReports(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-latency", "1ms", "-faults", "0"}, &out, &errOut) }()

	var url string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if line, _, ok := strings.Cut(out.String(), "\n"); ok {
			url = strings.TrimPrefix(line, "standin listening on ")
			break
		}
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("no listening line; stdout %q stderr %q", out.String(), errOut.String())
	}
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // only the status matters
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status %d, want 200", resp.StatusCode)
	}
	resp, err = http.Get(strings.TrimSuffix(url, "/v1") + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	var st statsReport
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.Requests != 1 || st.AnswersByKind["plain"] != 1 {
		t.Errorf("/stats: %+v, %v; want 1 request, 1 plain answer", st, err)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	_, final, _ := strings.Cut(out.String(), "\n")
	if err := json.Unmarshal([]byte(final), &st); err != nil || st.Requests != 1 {
		t.Errorf("exit report %q: %v", final, err)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-jitter", "gamma"}, {"-faults", "0.5"}, {"-addr", "0.0.0.0:0"}, {"stray"}, {"-latency", "soon"}} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, &out, &errOut); err == nil {
			t.Errorf("run %q: nil error, want one", args)
		}
	}
}
