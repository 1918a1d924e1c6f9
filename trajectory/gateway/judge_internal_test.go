package gateway

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/reward"
)

// scoringJudge is a real judge over a fake model. It rates the answer
// "good" 90 and anything else 40, in whichever order they come, and
// counts its calls.
func scoringJudge(t *testing.T) (*judge.Judge, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	rate := func(s string) string {
		if strings.Contains(s, "good") {
			return "90"
		}
		return "40"
	}
	m := modeltest.New("judge-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		calls.Add(1)
		u := modeltest.LastUser(req)
		a := u[strings.Index(u, "[Answer A]"):strings.Index(u, "[End of Answer A]")]
		b := u[strings.Index(u, "[Answer B]"):strings.Index(u, "[End of Answer B]")]
		return modeltest.Text("Score A: " + rate(a) + "\nReasoning A: ok.\nScore B: " + rate(b) + "\nReasoning B: ok."), nil
	})
	j, err := judge.New(delegate.Agent{Role: "judge", Model: m}, judge.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return j, &calls
}

// TestJudgedSession checks that an open question's session is judged
// against its reference: the quality is the judge's Diff/100, the reward
// that quality or the reward function of it, and a given reward is kept.
func TestJudgedSession(t *testing.T) {
	quarter := 0.25
	tests := []struct {
		name      string
		kind      string // "" for no reward function
		answer    string
		reference string
		given     *float64
		want      float64
		quality   float64
		judged    bool
	}{
		// The reference "plain" scores 40 in both orders.
		{"better than the reference", "", "a good answer", "plain", nil, 0.5, 0.5, true},
		{"worse than the reference", "", "plain", "a good answer", nil, -0.5, -0.5, true},
		{"a tie", "", "plain", "plain too", nil, 0, 0, true},
		// 0.5 - 0.5·(0.004/0.01) for an answer better than the reference.
		{"success_gated", reward.KindSuccessGated, "a good answer", "plain", nil, 0.3, 0.5, true},
		{"given reward kept", "", "plain", "a good answer", &quarter, 0.25, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, calls := scoringJudge(t)
			cfg := DefaultConfig()
			cfg.Judge = j
			if tt.kind != "" {
				cfg.Reward, cfg.RewardName = kindReward(t, tt.kind), tt.kind+" reward"
			}
			g := &Gateway{cfg: cfg}
			g.cfg.Now = time.Now
			s := &session{key: "k", group: "q1", task: delegate.Task{ID: "q1", Dataset: JudgedDataset, Prompt: "Explain tides.", Answer: tt.reference}}
			fin, err := g.score(context.Background(), s, handBuiltCalls(tt.answer), RewardRequest{Reward: tt.given})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(fin.Reward-tt.want) > 1e-12 {
				t.Errorf("reward %v, want %v", fin.Reward, tt.want)
			}
			if got := calls.Load() > 0; got != tt.judged {
				t.Fatalf("judge called %d times, want called %v", calls.Load(), tt.judged)
			}
			if !tt.judged {
				return
			}
			if fin.Correct != nil {
				t.Errorf("correct %v, want none: a judged session has no verdict of right or wrong", *fin.Correct)
			}
			if fin.Terms == nil || fin.Terms.Verdict == nil {
				t.Fatalf("terms %+v, want the judge's verdict", fin.Terms)
			}
			if math.Abs(fin.Terms.Quality-tt.quality) > 1e-12 {
				t.Errorf("quality %v, want %v", fin.Terms.Quality, tt.quality)
			}
		})
	}
}

// TestJudgedSessionRefusals checks what a judged session cannot be
// scored without: a reference, a judge, a parseable verdict.
func TestJudgedSessionRefusals(t *testing.T) {
	unparseable := modeltest.New("judge-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("I cannot decide."), nil
	})
	bad, err := judge.New(delegate.Agent{Role: "judge", Model: unparseable}, judge.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	good, _ := scoringJudge(t)
	tests := []struct {
		name      string
		judge     *judge.Judge
		reference string
		wantErr   string
	}{
		{"no reference", good, "", "no reference answer for the judge"},
		{"no judge", nil, "plain", "no verifier"},
		{"unparseable verdict", bad, "plain", "judge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Judge = tt.judge
			g := &Gateway{cfg: cfg}
			g.cfg.Now = time.Now
			s := &session{key: "k", group: "q1", task: delegate.Task{ID: "q1", Dataset: JudgedDataset, Prompt: "Explain tides.", Answer: tt.reference}}
			_, err := g.score(context.Background(), s, handBuiltCalls("an answer"), RewardRequest{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
