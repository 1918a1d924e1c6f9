package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate/world"
)

// startEnv runs delegate env with args and getenv until the test ends,
// and returns its base URL.
func startEnv(t *testing.T, getenv env, args ...string) string {
	t.Helper()
	var out, logs syncBuffer
	cmd := newRootCmd(getenv, slog.New(slog.NewTextHandler(&logs, nil)))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"env"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("env: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("env did not stop")
		}
		if strings.Contains(logs.String()+out.String(), envPythonToken) {
			t.Errorf("the token shows in the output or the log:\n%s\n%s", out.String(), logs.String())
		}
	})
	return awaitListening(t, &out, done, regexp.MustCompile(`serving OpenEnv on (http://\S+) `), "env")
}

// envPythonToken is URL-safe, as a token in a URL must be.
const envPythonToken = "trl-token_0123456789abcdef"

// pythonWSHandshake is the request OpenEnv's Python client makes for
// GenericEnvClient(base_url="http://trl:TOKEN@HOST"). websockets 15,
// connecting to ws://trl:TOKEN@HOST/ws, sends Basic credentials from the
// URL. It sends headers in this order and asks for permessage-deflate.
func pythonWSHandshake(host, user, password string) string {
	return "GET /ws HTTP/1.1\r\n" +
		"Host: " + host + "\r\n" +
		"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password)) + "\r\n" +
		"Upgrade: websocket\r\n" +
		"Connection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
		"Sec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n" +
		"User-Agent: Python/3.12 websockets/15.0.1\r\n" +
		"\r\n"
}

// clientFrame is a masked text frame of payload, as a client sends it.
func clientFrame(payload []byte) []byte {
	f := []byte{0x81} // FIN, text
	switch n := len(payload); {
	case n < 126:
		f = append(f, 0x80|byte(n))
	default:
		f = append(f, 0x80|126)
		f = binary.BigEndian.AppendUint16(f, uint16(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:]) // crypto/rand never fails
	f = append(f, mask[:]...)
	for i, b := range payload {
		f = append(f, b^mask[i%4])
	}
	return f
}

// readServerFrame reads one unmasked, unfragmented frame of the server.
func readServerFrame(r *bufio.Reader) (opcode byte, payload []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	if h[0]&0x80 == 0 || h[0]&0x70 != 0 || h[1]&0x80 != 0 {
		return 0, nil, fmt.Errorf("frame header %x: want FIN, no RSV bits (no compression), unmasked", h)
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	payload = make([]byte, n)
	_, err = io.ReadFull(r, payload)
	return h[0] & 0x0f, payload, err
}

// TestEnvTokenFromPythonClient sends the bytes OpenEnv's Python clients
// send with the token in base_url's user information. They are
// GenericEnvClient's WebSocket handshake (websockets) and reset message,
// and MCPToolClient's POST /mcp (httpx). Both carry the token as Basic
// credentials, which delegate env takes; a wrong password gets 401.
func TestEnvTokenFromPythonClient(t *testing.T) {
	getenv := func(name string) string {
		if name == envTokenEnv {
			return envPythonToken
		}
		return ""
	}
	base := startEnv(t, getenv, "--config", "../../examples/world.yaml", "--addr", "127.0.0.1:0", "--split", "test")
	host := strings.TrimPrefix(base, "http://")

	handshake := func(t *testing.T, password string) (*http.Response, net.Conn, *bufio.Reader) {
		t.Helper()
		conn, err := net.DialTimeout("tcp", host, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second)) // a failure shows in the reads below
		if _, err := io.WriteString(conn, pythonWSHandshake(host, "trl", password)); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp, conn, br
	}

	t.Run("websocket", func(t *testing.T) {
		resp, conn, br := handshake(t, envPythonToken)
		if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
			t.Fatalf("handshake: got %s %v, want 101 with the key's accept", resp.Status, resp.Header)
		}
		// The client's first message, as its json.dumps writes it.
		if _, err := conn.Write(clientFrame([]byte(`{"type": "reset", "data": {"seed": 3}}`))); err != nil {
			t.Fatal(err)
		}
		op, payload, err := readServerFrame(br)
		if err != nil || op != 0x1 {
			t.Fatalf("answer: opcode %d, %v", op, err)
		}
		var msg struct {
			Type string `json:"type"`
			Data struct {
				Observation struct {
					Task string `json:"task"`
				} `json:"observation"`
				Done bool `json:"done"`
			} `json:"data"`
		}
		if err := json.Unmarshal(payload, &msg); err != nil || msg.Type != "observation" || msg.Data.Observation.Task == "" || msg.Data.Done {
			t.Errorf("reset: got %s, %v; want an observation with a task", payload, err)
		}
	})
	t.Run("websocket with a wrong token", func(t *testing.T) {
		resp, _, _ := handshake(t, envPythonToken+"x")
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096)) // the status is the check
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "Basic") {
			t.Errorf("handshake: got %s %s, want 401 saying how to send the token", resp.Status, body)
		}
		if strings.Contains(string(body), envPythonToken) {
			t.Errorf("the refusal shows the token: %s", body)
		}
	})
	t.Run("mcp over http", func(t *testing.T) {
		// httpx turns the URL's user information into Basic credentials.
		u, err := url.Parse(base + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword("trl", envPythonToken)
		rpc := func(body string) (int, string) {
			req, err := http.NewRequest(http.MethodPost, u.String(), strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", "*/*")
			req.Header.Set("User-Agent", "python-httpx/0.28.1")
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req) // sends the URL's user as Basic credentials, as httpx does
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body) // a short read fails the checks below
			return resp.StatusCode, string(b)
		}
		status, body := rpc(`{"jsonrpc": "2.0", "method": "openenv/session/create", "params": {}, "id": 1}`)
		var created struct {
			Result struct {
				SessionID string `json:"session_id"`
			} `json:"result"`
		}
		if status != http.StatusOK || json.Unmarshal([]byte(body), &created) != nil || created.Result.SessionID == "" {
			t.Fatalf("session/create: got %d %s, want a session", status, body)
		}
		status, body = rpc(fmt.Sprintf(`{"jsonrpc": "2.0", "method": "openenv/session/close", "params": {"session_id": %q}, "id": 2}`, created.Result.SessionID))
		if status != http.StatusOK || !bytes.Contains([]byte(body), []byte(`"closed":true`)) {
			t.Errorf("session/close: got %d %s", status, body)
		}
	})
}

// TestTRLExample plays an episode with examples/trl/delegate_env.py's
// class, under python3, through a stand-in of OpenEnv's client in the
// standard library (testdata/trl/openenv.py), with a token. Its delegate
// method asks one question, then several at once, and sends a list the
// server refuses as the model wrote it. It skips without python3.
func TestTRLExample(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	getenv := func(name string) string {
		if name == envTokenEnv {
			return envPythonToken
		}
		return ""
	}
	base := startEnv(t, getenv, "--config", "../../examples/world.yaml", "--addr", "127.0.0.1:0", "--split", "test")
	g, err := world.NewGenerator(world.DefaultConfig(), 3, world.Test)
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.Next() // the problem a reset with seed 3 draws
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-B", "testdata/trl/drive.py", strings.TrimPrefix(base, "http://"), "3", strconv.FormatInt(p.Answer, 10)}
	for _, s := range p.Steps {
		args = append(args, s.Expr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", envTokenEnv + "=" + envPythonToken}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var got struct {
		Task, One, Many, Both, Answer string
		TooMany                       string `json:"too_many"`
		AfterDone                     string `json:"after_done"`
		Reward                        float64
		Done                          bool
	}
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("drive.py's output %s: %v", stdout, err)
	}
	if got.Task != p.Text {
		t.Errorf("reset: got task %q, want %q", got.Task, p.Text)
	}
	var many []string
	if err := json.Unmarshal([]byte(got.Many), &many); err != nil || len(many) != len(p.Steps) {
		t.Errorf("delegate(questions=%d questions): got %q, want a JSON array of %d answers", len(p.Steps), got.Many, len(p.Steps))
	} else if many[0] != got.One {
		t.Errorf("delegate(questions=...)[0] = %q, delegate(question=...) = %q: want the same answer", many[0], got.One)
	}
	for _, c := range []struct{ name, got, want string }{
		{"too many questions", got.TooMany, "at most 8"},
		{"question and questions", got.Both, "not both"},
		{"after the answer", got.AfterDone, "The episode is over"},
	} {
		if !strings.Contains(c.got, c.want) {
			t.Errorf("%s: got %q, want it to say %q", c.name, c.got, c.want)
		}
	}
	if got.Answer != "correct" || !got.Done || got.Reward <= 0 || got.Reward >= 1 {
		t.Errorf("answer: got %q, done %v, reward %v; want correct, done, a reward in (0, 1)", got.Answer, got.Done, got.Reward)
	}
}
