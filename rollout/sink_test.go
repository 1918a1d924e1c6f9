package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
)

// recordingSink keeps the ids of the groups it accepted; failAt, when set,
// refuses the n-th Send (from 1).
type recordingSink struct {
	mu       sync.Mutex
	waits    int
	sends    int
	failAt   int
	accepted []string
}

func (s *recordingSink) Wait(context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits++
	return 10 + s.waits, nil
}

func (s *recordingSink) Send(_ context.Context, g *GroupRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sends++
	if s.sends == s.failAt {
		return errors.New("the trajectory API is down")
	}
	if len(g.Tokens) != len(g.Scores) || g.ID == "" || g.Run == "" || g.PolicyVersion <= 10 {
		return errors.New("a group without its sequences, run id or policy version")
	}
	s.accepted = append(s.accepted, g.ID)
	return nil
}

func TestRunSendsEveryWrittenGroup(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	cfg := config(dir, 4, 2)
	sink := &recordingSink{}
	cfg.Sink = sink
	if _, err := Run(context.Background(), cfg, tasks(4), f.baseline, Same(f.policy), f.scorer, nil); err != nil {
		t.Fatal(err)
	}
	_, groups, _ := checkComplete(t, dir, 4, 2)
	var want []string
	for _, g := range groups {
		want = append(want, g.ID)
	}
	if strings.Join(sink.accepted, ",") != strings.Join(want, ",") {
		t.Errorf("sent %v, want every written group once in file order %v", sink.accepted, want)
	}
	if sink.waits != 4 {
		t.Errorf("Wait called %d times, want once per item (4)", sink.waits)
	}
}

// TestRunSinkFailureResumes checks that a failing Send stops the run with its error.
// The same run resumed sends what was not sent, so every written group reaches a sink exactly once.
func TestRunSinkFailureResumes(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	cfg := config(dir, 5, 2)
	first := &recordingSink{failAt: 2}
	cfg.Sink = first
	_, err := Run(context.Background(), cfg, tasks(5), f.baseline, Same(f.policy), f.scorer, nil)
	if err == nil || !strings.Contains(err.Error(), "the trajectory API is down") || !strings.Contains(err.Error(), "send group") {
		t.Fatalf("run with a failing sink: %v, want the sink's error naming the group", err)
	}
	second := &recordingSink{}
	cfg.Sink = second
	if _, err := Run(context.Background(), cfg, tasks(5), f.baseline, Same(f.policy), f.scorer, nil); err != nil {
		t.Fatal(err)
	}
	_, groups, _ := checkComplete(t, dir, 5, 2)
	seen := map[string]int{}
	for _, id := range append(first.accepted, second.accepted...) {
		seen[id]++
	}
	for _, g := range groups {
		if seen[g.ID] != 1 {
			t.Errorf("group %s sent %d times, want 1", g.ID, seen[g.ID])
		}
		delete(seen, g.ID)
	}
	if len(seen) != 0 {
		t.Errorf("sent groups that are not in groups.jsonl: %v", seen)
	}
}

func TestFingerprintDiff(t *testing.T) {
	now := `{"Models":{"big":{"Price":{"output":9}}},"Reward":"graded"}`
	if d := fingerprintDiff(now, now); d != nil {
		t.Errorf("same settings: %v", d)
	}
	h := sha256.Sum256([]byte(now))
	if d := fingerprintDiff(hex.EncodeToString(h[:8]), now); d != nil {
		t.Errorf("a run recorded with the settings' hash, same settings: %v", d)
	}
	old := `{"Models":{"big":{"Price":{"output":8}}},"Reward":"graded"}`
	if d := fingerprintDiff(old, now); len(d) != 1 || d[0] != "settings Models.big.Price.output: 8 there, 9 now" {
		t.Errorf("another price: %q", d)
	}
	if d := fingerprintDiff("0123456789abcdef", now); len(d) != 1 || !strings.Contains(d[0], "fingerprint") {
		t.Errorf("a hash of other settings: %q", d)
	}
}
