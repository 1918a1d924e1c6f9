package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// judgeByAnswer is a judge model that scores an answer holding "tides"
// 90 and any other 30, in whichever order the two come.
func judgeByAnswer(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
	u := modeltest.LastUser(req)
	score := func(start, end string) string {
		i, j := strings.Index(u, start), strings.Index(u, end)
		if i < 0 || j < i {
			return "30"
		}
		if strings.Contains(u[i:j], "tides") {
			return "90"
		}
		return "30"
	}
	return modeltest.Text("Score A: " + score("[Answer A]", "[End of Answer A]") + "\nReasoning A: ok.\nScore B: " +
		score("[Answer B]", "[End of Answer B]") + "\nReasoning B: ok."), nil
}

// TestGatewayJudge runs `delegate gateway --judge` over HTTP: a session of
// an open question ends with the judge's comparison of its answer with
// the task's reference, which no verifier can check.
func TestGatewayJudge(t *testing.T) {
	const token = "gateway-judge-test-token"
	getenv := func(name string) string {
		if name == gatewayTokenEnv {
			return token
		}
		return testEnv(name)
	}
	srv := newBenchServer(t, 1, judgeByAnswer)
	cfg := writeBenchConfig(t, srv.url)
	var out, logs syncBuffer
	cmd := newRootCmd(getenv, slog.New(slog.NewTextHandler(&logs, nil)))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"gateway", "--config", cfg, "--addr", "127.0.0.1:0", "--out", t.TempDir(), "--judge", "big"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	base := awaitListening(t, &out, done, regexp.MustCompile(`gateway on (http://\S+):`), "gateway")
	if !strings.Contains(out.String(), "judged against their reference answer by model judge") {
		t.Errorf("startup output does not name the judge:\n%s", out.String())
	}
	post := func(path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	tests := []struct {
		answer     string
		wantReward float64
	}{
		{"The moon's pull raises tides.", 0.6}, // 90 against the reference's 30
		{"No idea.", 0},                        // 30 against 30
	}
	for _, tt := range tests {
		code, b := post("/sessions", `{"task":{"id":"q1","dataset":"open","prompt":"Why does the sea rise and fall?","answer":"Gravity."}}`)
		if code != 200 {
			t.Fatalf("create: %d %s", code, b)
		}
		var cr gateway.CreateResponse
		if err := json.Unmarshal(b, &cr); err != nil {
			t.Fatal(err)
		}
		ans, _ := json.Marshal(tt.answer)
		code, b = post("/sessions/"+cr.SessionID+"/reward", `{"answer":`+string(ans)+`}`)
		if code != 200 {
			t.Fatalf("reward: %d %s", code, b)
		}
		var rr gateway.RewardResponse
		if err := json.Unmarshal(b, &rr); err != nil {
			t.Fatal(err)
		}
		if rr.Reward != tt.wantReward || rr.Correct != nil || rr.Terms == nil || rr.Terms.Verdict == nil || rr.Terms.Quality != tt.wantReward {
			t.Errorf("answer %q: reward %v, correct %v, terms %+v; want %v judged, no right or wrong", tt.answer, rr.Reward, rr.Correct, rr.Terms, tt.wantReward)
		}
	}
	if n := srv.judge.Calls(); n != 4 {
		t.Errorf("the judge got %d calls, want 4: both orders of two sessions", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("gateway: %v", err)
	}
}

// TestGatewayJudgeNeedsAJudge checks that --judge without a judge model
// in the config is refused, naming the keys to set.
func TestGatewayJudgeNeedsAJudge(t *testing.T) {
	srv := newBenchServer(t, 1, judgeByAnswer)
	cfg := filepath.Join(t.TempDir(), "delegate.yaml")
	doc := `models:
  small:
    base_url: ` + srv.url + `/v1
    model: small
    max_retries: 0
roles:
  weak: small
`
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := execute(t, testEnv, "gateway", "--config", cfg, "--addr", "127.0.0.1:0", "--out", t.TempDir(), "--judge", "small")
	if err == nil || !strings.Contains(err.Error(), "set roles.judge (or roles.default)") {
		t.Errorf("error %v, want one naming roles.judge", err)
	}
}
