package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/nn"
)

func TestServeExposure(t *testing.T) {
	tests := []struct {
		addr            string
		key, insecure   bool
		wantErrContains string
	}{
		{"127.0.0.1:8080", false, false, ""},
		{"[::1]:8080", false, false, ""},
		{"localhost:8080", false, false, ""},
		{"0.0.0.0:8080", false, false, serveKeyEnv},
		{":8080", false, false, "--insecure"},
		{"192.168.1.5:8080", false, false, "beyond loopback"},
		{"0.0.0.0:8080", true, false, ""},
		{"0.0.0.0:8080", false, true, ""},
		{"no-port", false, false, "--addr"},
	}
	for _, tt := range tests {
		err := checkExposure(tt.addr, tt.key, tt.insecure)
		switch {
		case tt.wantErrContains == "" && err != nil:
			t.Errorf("checkExposure(%q, key %v, insecure %v) = %v, want nil", tt.addr, tt.key, tt.insecure, err)
		case tt.wantErrContains != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErrContains)):
			t.Errorf("checkExposure(%q, key %v, insecure %v) = %v, want an error containing %q", tt.addr, tt.key, tt.insecure, err, tt.wantErrContains)
		}
	}
	// The command refuses before loading anything.
	out, err := execute(t, testEnv, "serve", "--config", "../../examples/world.yaml", "--addr", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "without an API key") {
		t.Errorf("serve off loopback without a key: err = %v\n%s", err, out)
	}
	out, err = execute(t, testEnv, "serve", "--config", "../../examples/world.yaml", "--write-timeout", "1m", "--request-timeout", "2m")
	if err == nil || !strings.Contains(err.Error(), "--write-timeout") {
		t.Errorf("write timeout under the request timeout: err = %v\n%s", err, out)
	}
}

// TestServeShippedModels runs `delegate serve` on examples/world.yaml as a
// user would, with the key in the environment. It asks the solver a
// question with no system message over HTTP; the config's system prompt
// makes it answer right.
func TestServeShippedModels(t *testing.T) {
	const key = "sk-serve-command-test"
	getenv := func(name string) string {
		if name == serveKeyEnv {
			return key
		}
		return ""
	}
	var out, logs syncBuffer
	// At warn, as main sets it: the access log passes anyway.
	cmd := newRootCmd(getenv, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"serve", "--config", "../../examples/world.yaml", "--addr", "127.0.0.1:0", "--idle-timeout", "300ms", "--read-timeout", "500ms"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	addr := regexp.MustCompile(`serving \[delegator solver\] on (http://\S+/v1)`)
	base := awaitListening(t, &out, done, addr, "serve")
	for _, want := range []string{`model "solver" (config key solver, local checkpoint`, `default system prompt "Compute."`, "API key required"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("startup output lacks %q:\n%s", want, out.String())
		}
	}
	post := func(key, body string) (int, string) {
		req, err := http.NewRequest("POST", base+"/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	const ask = `{"model":"solver","temperature":0,"messages":[{"role":"user","content":"56*23"}]}`
	if status, body := post("", ask); status != 401 {
		t.Errorf("no key: %d %s", status, body)
	}
	status, body := post(key, ask)
	var resp struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &resp); status != 200 || err != nil || len(resp.Choices) != 1 || !strings.Contains(resp.Choices[0].Message.Content, `\boxed{1288}`) {
		t.Errorf("solver over HTTP: %d %s, want \\boxed{1288}", status, body)
	}
	// Streaming, through the preset's wrapper: the content comes as
	// events and adds up to the right answer.
	status, body = post(key, strings.Replace(ask, `"temperature"`, `"stream":true,"temperature"`, 1))
	var content strings.Builder
	pieces, doneSeen := 0, false
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		switch {
		case !ok:
		case data == "[DONE]":
			doneSeen = true
		default:
			var ch struct {
				Choices []struct {
					Delta struct{ Content string } `json:"delta"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(data), &ch); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			if len(ch.Choices) == 1 && ch.Choices[0].Delta.Content != "" {
				pieces++
				content.WriteString(ch.Choices[0].Delta.Content)
			}
		}
	}
	t.Logf("streamed content in %d pieces", pieces)
	if status != 200 || !doneSeen || !strings.Contains(content.String(), `\boxed{1288}`) {
		t.Errorf("stream: %d, [DONE] %v, content %q, want \\boxed{1288}", status, doneSeen, content.String())
	}
	// The connection timeouts are set: an idle keep-alive connection and
	// one whose body stalls are both closed by the server.
	hostport := strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/v1")
	for _, tt := range []struct{ name, send string }{
		{"idle keep-alive", "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"stalled body", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key + "\r\nContent-Length: 100\r\n\r\n{"},
	} {
		conn, err := net.Dial("tcp", hostport)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := io.WriteString(conn, tt.send); err != nil {
			t.Fatal(err)
		}
		if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil { // the server's default timeouts are longer
			t.Fatal(err)
		}
		_, err = io.ReadAll(conn) // returns when the server closes
		conn.Close()
		if err != nil {
			t.Errorf("%s: the server did not close the connection: %v", tt.name, err)
		} else {
			t.Logf("%s: closed by the server after %v", tt.name, time.Since(start).Round(time.Millisecond))
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve after interrupt: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after interrupt")
	}
	if strings.Contains(out.String()+logs.String(), key) {
		t.Error("the API key reached the output or logs")
	}
	for _, want := range []string{`msg=request method=POST path=/v1/chat/completions status=401`, `msg=request method=POST path=/v1/chat/completions status=200`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("access log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "56*23") {
		t.Error("a request body reached the logs")
	}
}

// TestServeFollowsTheTrainer serves a model with follow. It answers from
// its starting weights, version 0, until the trainer writes a checkpoint.
// Then it answers from the trainer's step once POST /admin/reload, with
// the server's key, or its own watch loads it. Every answer says its
// version.
func TestServeFollowsTheTrainer(t *testing.T) {
	const key = "sk-follow-test"
	dir := t.TempDir()
	models, err := filepath.Abs("../../models")
	if err != nil {
		t.Fatal(err)
	}
	trainer := filepath.Join(dir, "train", "checkpoint")
	doc := "models:\n  delegator:\n    kind: local\n    checkpoint: " + filepath.Join(models, "delegator") +
		"\n    follow: " + trainer + "\n    follow_every: 1h\n    price: {input: 1, output: 5}\nroles:\n  default: delegator\n"
	cfg := filepath.Join(dir, "follow.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cmd := newRootCmd(func(n string) string {
		if n == serveKeyEnv {
			return key
		}
		return ""
	}, slog.New(slog.DiscardHandler))
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"serve", "--config", cfg, "--addr", "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	addr := regexp.MustCompile(`serving \[delegator\] on (http://\S+)/v1`)
	var base string
	for deadline := time.Now().Add(20 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", out.String())
		}
	}
	call := func(path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: status %d, %v", path, resp.StatusCode, err)
		}
		return v
	}
	const ask = `{"model":"delegator","temperature":0,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	if v := call("/v1/chat/completions", ask)["policy_version"]; v != 0.0 {
		t.Errorf("before the trainer wrote anything: policy_version %v, want 0", v)
	}
	// The trainer writes step 3 as rl does: OUT/checkpoint/policy, whole.
	p, _, err := nn.Load(filepath.Join(models, "delegator"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nn.ReplaceDir(trainer, func(tmp string) error {
		return nn.Save(filepath.Join(tmp, "policy"), p, map[string]string{"rl_step": "3"})
	}); err != nil {
		t.Fatal(err)
	}
	rel := call("/admin/reload", "")
	if got := fmt.Sprint(rel["reloaded"]); !strings.Contains(got, "version:3") || !strings.Contains(got, "changed:true") {
		t.Errorf("admin reload answered %v, want the delegator at version 3", got)
	}
	if v := call("/v1/chat/completions", ask)["policy_version"]; v != 3.0 {
		t.Errorf("after the reload: policy_version %v, want 3", v)
	}
	// GET /health, open, says which version each follower serves.
	resp, err := http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var health struct {
		Versions map[string]int `json:"policy_versions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&health); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(health.Versions), "map[delegator:3]"; got != want {
		t.Errorf("health: policy_versions %s, want %s", got, want)
	}

	// GET /health?policy_version=N&wait=S: held until the follower serves
	// step N, which it looks for at once (its own watch looks every hour
	// here); with no such step, answered after S with the version served.
	if err := nn.ReplaceDir(trainer, func(tmp string) error {
		return nn.Save(filepath.Join(tmp, "policy"), p, map[string]string{"rl_step": "4"})
	}); err != nil {
		t.Fatal(err)
	}
	versions := func(query string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + "/health?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h struct {
			Versions map[string]int `json:"policy_versions"`
		}
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, fmt.Sprint(h.Versions)
	}
	if status, got := versions("policy_version=4&wait=20"); status != 200 || got != "map[delegator:4]" {
		t.Errorf("health held for step 4: %d %s, want map[delegator:4]", status, got)
	}
	start := time.Now()
	if status, got := versions("policy_version=9&wait=0.2"); status != 200 || got != "map[delegator:4]" || time.Since(start) < 200*time.Millisecond {
		t.Errorf("health held for step 9: %d %s after %v, want map[delegator:4] after the wait", status, got, time.Since(start))
	}
	for _, q := range []string{"policy_version=x&wait=1", "policy_version=4&wait=-1", "policy_version=4&wait=3600"} {
		if status, _ := versions(q); status != http.StatusBadRequest {
			t.Errorf("health?%s: %d, want 400", q, status)
		}
	}
}

// awaitListening waits until a server command started in the background
// prints the address re captures, and returns it. The test fails if the
// command ends first (its error arrives on done) or within 20 s.
func awaitListening(t *testing.T, out *syncBuffer, done <-chan error, re *regexp.Regexp, what string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("%s ended: %v\n%s", what, err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start:\n%s", what, out.String())
		}
	}
}
