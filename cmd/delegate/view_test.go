package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/view"
)

func TestViewRefuses(t *testing.T) {
	dir := t.TempDir()
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"off loopback without a token", []string{"view", dir, "--addr", "0.0.0.0:0"}, viewTokenEnv},
		{"no directory", []string{"view"}, "give a directory, a trace file or --server"},
		{"server without a URL", []string{"view", "--server", "api"}, "want NAME=URL"},
		{"server token unset", []string{"view", "--server", "api=http://127.0.0.1:8000,API_TOKEN"}, "$API_TOKEN is empty"},
		{"server URL without scheme", []string{"view", "--server", "api=127.0.0.1:8000"}, "want http://HOST"},
		{"empty directory", []string{"view", dir}, "holds no trace"},
		{"poll too fast", []string{"view", dir, "--poll", "1ms"}, "poll 1ms out of bounds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := execute(t, noEnv, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestParseServers(t *testing.T) {
	getenv := func(name string) string { return map[string]string{"API_TOKEN": " secret\n"}[name] }
	got, err := parseServers(getenv, []string{"api=http://127.0.0.1:8000,API_TOKEN", "env=http://h:9/"})
	if err != nil {
		t.Fatal(err)
	}
	want := []view.LiveServer{{Name: "api", URL: "http://127.0.0.1:8000", Token: "secret"}, {Name: "env", URL: "http://h:9/"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestViewServesRunJSON views the trace delegate run --json writes. It
// takes a token from the environment, and stops while a live stream is
// open.
func TestViewServesRunJSON(t *testing.T) {
	dir := t.TempDir()
	out, err := execute(t, func(string) string { return "" }, "run", "--config", "../../examples/world.yaml", "--strategy", "route", "--json",
		"Dot has 91 jars of 23 coins. Gus has 19 jars of 83 coins. Gus gets 49 more. How many coins do they have in all?")
	if err != nil {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "trace.json"), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	line, err := json.Marshal(rl.Metrics{Version: rl.MetricsVersion, Step: 1, Steps: 2, Reward: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "train"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "train", rl.MetricsFile), append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}

	const token = "view-command-test-token"
	getenv := func(name string) string {
		if name == viewTokenEnv {
			return token
		}
		return ""
	}
	var buf, logs syncBuffer
	cmd := newRootCmd(getenv, slog.New(slog.NewTextHandler(&logs, nil)))
	cmd.SetOut(&buf)
	cmd.SetErr(&buf)
	cmd.SetArgs([]string{"view", dir, "--addr", "127.0.0.1:0", "--poll", "50ms"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	base := awaitListening(t, &buf, done, regexp.MustCompile(`serving the view on (http://\S+)/,`), "view")
	for _, want := range []string{"found 1 trace, 1 train", "token required"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("startup output lacks %q:\n%s", want, buf.String())
		}
	}
	get := func(path, tok string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := get("/api/runs", ""); resp.StatusCode != 401 {
		t.Errorf("without the token: got %d, want 401", resp.StatusCode)
	}
	resp := get("/api/trace?run=0", token)
	var tv view.TraceView
	err = json.NewDecoder(resp.Body).Decode(&tv)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || tv.Strategy != "route" || tv.Root == nil || tv.Total.Calls == 0 || tv.CriticalCalls == 0 {
		t.Fatalf("trace of run --json: status %d, %v, %+v", resp.StatusCode, err, tv)
	}
	// A live stream open while the command stops must not hold it up.
	stream := get(fmt.Sprintf("/api/train/events?run=%d", 1), token)
	defer stream.Body.Close()
	if stream.StatusCode != 200 {
		t.Fatalf("events: status %d", stream.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("view: %v", err)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("view did not stop with a stream open")
	}
}
