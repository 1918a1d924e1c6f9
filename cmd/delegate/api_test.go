package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
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

func TestAPICommand(t *testing.T) {
	const token = "cmd-test-token-123"
	getenv := func(k string) string {
		if k == "DELEGATE_API_TOKEN" {
			return token
		}
		return ""
	}
	t.Run("off loopback needs a token", func(t *testing.T) {
		cmd := newRootCmd(func(string) string { return "" }, slog.New(slog.DiscardHandler))
		cmd.SetArgs([]string{"api", "--addr", "0.0.0.0:0", "--data", t.TempDir()})
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), "beyond loopback") {
			t.Fatalf("err = %v, want a refusal naming loopback", err)
		}
	})
	t.Run("a --data that is a file fails at once", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "store")
		if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := newRootCmd(getenv, slog.New(slog.DiscardHandler))
		cmd.SetArgs([]string{"api", "--addr", "127.0.0.1:0", "--data", file})
		start := time.Now()
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("err = %v; want one naming %s and why", err, file)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("failed after %v; want at once", d)
		}
	})
	t.Run("an inflate budget below twice the decompressed bound", func(t *testing.T) {
		cmd := newRootCmd(func(string) string { return "" }, slog.New(slog.DiscardHandler))
		cmd.SetArgs([]string{"api", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--max-body", "1048576", "--inflate-budget", "4194304"})
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), "inflate budget 4194304") {
			t.Fatalf("err = %v, want a refusal naming the inflate budget", err)
		}
	})
	t.Run("serves with the token from the environment", func(t *testing.T) {
		var out, logs syncBuffer
		cmd := newRootCmd(getenv, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"api", "--addr", "127.0.0.1:0", "--data", t.TempDir()})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- cmd.ExecuteContext(ctx) }()
		re := regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
		deadline := time.Now().Add(30 * time.Second)
		for re.FindString(out.String()) == "" {
			if time.Now().After(deadline) {
				t.Fatalf("no address printed: %q", out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		url := re.FindString(out.String())
		for _, tc := range []struct {
			auth string
			want int
		}{{"", 401}, {"Bearer " + token, 200}} {
			for _, path := range []string{"/status", "/metrics"} {
				req, _ := http.NewRequest("GET", url+path, nil)
				if tc.auth != "" {
					req.Header.Set("Authorization", tc.auth)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("%s with token %v: status %d, want %d", path, tc.auth != "", resp.StatusCode, tc.want)
				}
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("api after interrupt: %v", err)
		}
		http.DefaultClient.CloseIdleConnections()
		if strings.Contains(out.String()+logs.String(), token) {
			t.Errorf("the token leaked into the output or logs")
		}
	})
}
