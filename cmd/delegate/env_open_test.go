package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/trajectory/openenv"
)

// TestEnvOpenNeedsJudge refuses open questions when the config names no
// judge.
func TestEnvOpenNeedsJudge(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "nojudge.yaml")
	doc := "models:\n  small:\n    base_url: http://127.0.0.1:1/v1\n    model: small\n    max_retries: 0\nroles:\n  weak: small\n"
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := execute(t, testEnv, "env", "--config", cfg, "--addr", "127.0.0.1:0", "--dataset", "open", "--split", "test")
	if err == nil || !strings.Contains(err.Error(), "--dataset open needs a judge") || !strings.Contains(err.Error(), "roles.judge") {
		t.Errorf("got %v, want an error naming --dataset open and roles.judge", err)
	}
}

// TestEnvOpen serves open questions over the WebSocket, with scripted
// models over HTTP as the sub-agent, the baseline and the judge. The judge
// scores the episode's answer 90 and the baseline's 30: the quality is
// 0.6, the reward --reward graded of it. Two episodes of one task run the
// baseline once.
func TestEnvOpen(t *testing.T) {
	srv := newBenchServer(t, 1, judgeByAnswer)
	cfg := writeBenchConfig(t, srv.url)
	data := filepath.Join(t.TempDir(), "open.jsonl")
	if err := os.WriteFile(data, []byte(`{"id":"tides","prompt":"Why does the sea have tides?"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, out := startEnvOutWith(t, testEnv, "--config", cfg, "--dataset", "open", "--data", data, "--reward", "graded")
	if !strings.Contains(out, "answers judged by model judge against the baseline of model big") {
		t.Errorf("startup output lacks the judge:\n%s", out)
	}
	ctx := context.Background()
	s, err := (&openenv.Client{BaseURL: base}).Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for ep := range 2 {
		seed := int64(ep)
		if _, err := s.Reset(ctx, openenv.ResetRequest{Seed: &seed}); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(map[string]string{"answer": "The moon's pull makes the tides."}) // strings always encode
		res, err := s.Step(ctx, openenv.ToolAction{Type: openenv.ActionCallTool, ToolName: openenv.ToolAnswer, Arguments: a})
		if err != nil {
			t.Fatal(err)
		}
		var o openenv.DelegationObservation
		if err := json.Unmarshal(res.Observation, &o); err != nil || !res.Done || res.Reward == nil || o.Error != nil || !strings.Contains(o.Result, "quality 0.60") {
			t.Fatalf("episode %d: answer: %s, done %v, reward %v (%v)", ep, res.Observation, res.Done, res.Reward, err)
		}
		raw, err := s.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var st openenv.DelegationState
		if err := json.Unmarshal(raw, &st); err != nil || st.Terms == nil || st.Terms.Verdict == nil {
			t.Fatalf("episode %d: state %s (%v): want the judge's verdict in its terms", ep, raw, err)
		}
		g := reward.DefaultConfig().Graded
		if got, want := *res.Reward, g.Reward(st.Terms.Outcome); st.Correct != nil || st.Terms.Quality != 0.6 || got != want {
			t.Errorf("episode %d: correct %v, quality %v, reward %v; want no verdict of a verifier, 0.6 and %v", ep, st.Correct, st.Terms.Quality, got, want)
		}
	}
	if got := srv.calls(); got[0] != 1 || got[2] == 0 {
		t.Errorf("calls of big, small and the judge: %v; want the baseline once and the judge", got)
	}
}
