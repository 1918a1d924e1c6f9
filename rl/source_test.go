package rl

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// fixedSource hands out prepared groups, one slice per step.
type fixedSource struct{ steps [][]Group }

func (s *fixedSource) Next(_ context.Context, step int) ([]Group, error) {
	if step > len(s.steps) {
		return nil, errors.New("no more groups")
	}
	return s.steps[step-1], nil
}

// TestSourceTrainsLikeTheEnvironment: the groups the in-process loop makes,
// handed to a trainer through a Source, give the same update, bit for
// bit, whether the producer computed the advantages or left them to the
// trainer.
func TestSourceTrainsLikeTheEnvironment(t *testing.T) {
	cfg := toyConfig(t.TempDir())
	cfg.Steps = 1
	envTr, _, envP := newToy(t, cfg, nil)
	rng := *envTr.rng
	_, groups, err := envTr.rollouts(context.Background(), 1, &rng)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envTr.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	withoutAdv := make([]Group, len(groups))
	for i, g := range groups {
		for _, r := range g.Rollouts {
			r.Advantage, r.HasAdvantage = 0, false
			withoutAdv[i].Rollouts = append(withoutAdv[i].Rollouts, r)
		}
	}
	for _, tt := range []struct {
		name   string
		groups []Group
	}{{"advantages given", groups}, {"advantages computed", withoutAdv}} {
		t.Run(tt.name, func(t *testing.T) {
			p := tinyParams(t, 64, 7)
			tr, err := NewFromSource(cfg, p, &fixedSource{steps: [][]Group{tt.groups}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			m, err := tr.Step(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if m.Skipped || m.TrainedTokens == 0 {
				t.Fatalf("the source's step trained nothing: %+v", m)
			}
			if !slices.Equal(p.Data, envP.Data) {
				t.Errorf("parameters after the source's step differ from the environment's")
			}
		})
	}
}

func TestSourceRejectsBadGroups(t *testing.T) {
	cfg := toyConfig(t.TempDir())
	rng := rand.New(rand.NewPCG(1, 2))
	eps := randomEpisodes(rng, 2, 64)
	tests := []struct {
		name   string
		groups []Group
		want   string
	}{
		{"mixed advantages", []Group{{Rollouts: []ScoredRollout{{Episodes: eps[:1], HasAdvantage: true}, {Episodes: eps[1:]}}}}, "all or none"},
		{"empty", []Group{{}}, "no rollouts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := NewFromSource(cfg, tinyParams(t, 64, 7), &fixedSource{steps: [][]Group{tt.groups}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Step(context.Background()); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("step: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
