package openenv

import (
	"context"
	"encoding/json"
	"testing"
)

// DelegationConfig.Ended sees an answered episode once, with its steps and the sub-agent's call.
// It also sees an episode whose session closed before it ended.
func TestEndedSeesEveryEpisode(t *testing.T) {
	var seen []EpisodeRecord
	d, err := NewDelegation(DelegationConfig{Subagent: fakeSolver(), Ended: func(r EpisodeRecord) { seen = append(seen, r) }})
	if err != nil {
		t.Fatal(err)
	}
	env, err := d.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	step := func(tool string, args any) {
		t.Helper()
		a, _ := json.Marshal(map[string]any{"type": "call_tool", "tool_name": tool, "arguments": args})
		if _, err := env.Step(ctx, a); err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
	}
	seed := int64(5)
	if _, err := env.Reset(ctx, &seed, "ep-1"); err != nil {
		t.Fatal(err)
	}
	step(ToolDelegate, map[string]string{"question": "12*34"})
	step(ToolAnswer, map[string]any{"answer": 1})
	if _, err := env.Reset(ctx, &seed, "ep-2"); err != nil {
		t.Fatal(err)
	}
	step(ToolDelegate, map[string]string{"question": "12*34"})
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 {
		t.Fatalf("Ended saw %d episodes, want 2", len(seen))
	}
	tests := []struct {
		id    string
		done  bool
		steps int
	}{{"ep-1", true, 2}, {"ep-2", false, 1}}
	for i, tt := range tests {
		r := seen[i]
		if id := r.State.EpisodeID; id == nil || *id != tt.id || r.State.Done != tt.done || len(r.Steps) != tt.steps {
			t.Errorf("episode %d: id %v, done %v, %d steps; want %s, %v, %d", i, id, r.State.Done, len(r.Steps), tt.id, tt.done, tt.steps)
			continue
		}
		sub := r.Steps[0].Subagent
		if r.Steps[0].Tool != ToolDelegate || r.Steps[0].CallID != "call_1" || sub == nil || sub.Model == "" || sub.Usage.PromptTokens == 0 {
			t.Errorf("episode %d: first step %+v, sub-agent call %+v", i, r.Steps[0], sub)
		}
		if r.Latency <= 0 || r.Start.IsZero() {
			t.Errorf("episode %d: start %v, latency %v", i, r.Start, r.Latency)
		}
	}
	if seen[0].State.Reward == nil || seen[0].Steps[1].Subagent != nil {
		t.Errorf("the answered episode: reward %v, answer's sub-agent call %+v", seen[0].State.Reward, seen[0].Steps[1].Subagent)
	}
}
