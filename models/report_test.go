package models

import (
	"context"
	"os"
	"testing"

	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
)

// TestReportDelegatorVariants prints how the shipped delegator does alone
// (greedy, 40 held-out problems each) on level 2 as the distractor count
// grows and as digit sizes change, and on three-step problems: the
// figures README.md and the world package doc give for choosing MLPO's
// world. It asserts only that every variant was graded; run it with
// MODELS_REPORT=1 go test ./models -run TestReportDelegatorVariants -v.
func TestReportDelegatorVariants(t *testing.T) {
	if os.Getenv("MODELS_REPORT") == "" {
		t.Skip("a report; set MODELS_REPORT=1 to print it")
	}
	d := load(t, "delegator", "delegator")
	l2 := world.Levels()[2]
	variants := []struct {
		name string
		edit func(c *world.Config)
	}{
		{"level 2, up to 1 distractor", func(c *world.Config) {}},
		{"level 2, up to 2 distractors", func(c *world.Config) { c.Distractors = 2 }},
		{"level 2, up to 3 distractors", func(c *world.Config) { c.Distractors = 3 }},
		{"level 2, up to 4 distractors", func(c *world.Config) { c.Distractors = 4 }},
		{"level 2, 2x1-digit products", func(c *world.Config) { c.MulSizes = []world.MulSize{{X: 2, Y: 1, Weight: 1}} }},
		{"level 2, 3x1-digit products", func(c *world.Config) { c.MulSizes = []world.MulSize{{X: 3, Y: 1, Weight: 1}} }},
		{"level 2, 1-digit amounts", func(c *world.Config) { c.AddDigits = [2]int{1, 1} }},
		{"level 2, 3-digit amounts", func(c *world.Config) { c.AddDigits = [2]int{3, 3} }},
		{"three steps in a chain", func(c *world.Config) { c.MinSteps, c.MaxSteps = 3, 3 }},
	}
	for _, v := range variants {
		c := l2
		v.edit(&c)
		ps, err := world.Generate(c, 77, world.Test, 40)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		sc, err := world.GradeDelegator(context.Background(), strategy.NameSingle, d, nil, ps, 16)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if sc.N != len(ps) {
			t.Fatalf("%s: %d of %d graded", v.name, sc.N, len(ps))
		}
		t.Logf("%-30s %2d/%d right, %d failed, %3.0f tokens", v.name, sc.Right, sc.N, sc.Failed, float64(sc.DelegatorTokens)/float64(sc.N))
	}
}
