package pretrain

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/world"
)

// TestGradeSetsSplit checks that the delegator is graded on validation
// problems unless test is asked for, during training and after it.
func TestGradeSetsSplit(t *testing.T) {
	tests := []struct {
		name  string
		split string
		want  world.Split
	}{
		{"default", "", world.Validation},
		{"validation", "validation", world.Validation},
		{"test for a published table", "test", world.Test},
	}
	levels := []int{1, 3}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Options{Seed: 1, Eval: 12, GradeSplit: tt.split}
			graded, small, err := gradeSets(f, levels)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(small), 2*4; got != want {
				t.Errorf("%d problems for the evaluations during training, want %d", got, want)
			}
			for _, p := range small {
				if p.Split != tt.want {
					t.Errorf("problem %s of the evaluations during training: split %v, want %v", p.ID, p.Split, tt.want)
				}
			}
			for _, l := range levels {
				if got := len(graded[l]); got != f.Eval {
					t.Errorf("level %d: %d graded problems, want %d", l, got, f.Eval)
				}
				permille := world.Levels()[l].TestPermille
				for _, p := range graded[l] {
					if got := world.SplitOf(p.Text, permille); p.Split != tt.want || got != tt.want {
						t.Errorf("level %d problem %s: split %v, text's split %v, want %v", l, p.ID, p.Split, got, tt.want)
					}
				}
			}
		})
	}
}

func TestGradeSplitRejectsUnknown(t *testing.T) {
	for _, name := range []string{"train", "Test", "valid"} {
		_, err := Options{GradeSplit: name}.gradeSplit()
		if err == nil || !strings.Contains(err.Error(), "--grade-split") || !strings.Contains(err.Error(), "validation or test") {
			t.Errorf("--grade-split %q: %v, want an error naming the flag and its values", name, err)
		}
	}
}

// TestRunRejectsCoverage checks that a solver coverage goes with --model
// solver only, and must be valid.
func TestRunRejectsCoverage(t *testing.T) {
	for _, tt := range []struct {
		name string
		f    Options
		want string
	}{
		{"delegator", Options{Model: "delegator", Eval: 1, Coverage: world.DigitsCoverage()}, "--model solver"},
		{"all", Options{Model: "all", Eval: 1, Coverage: world.DigitsCoverage()}, "--model solver"},
		{"invalid", Options{Model: "solver", Eval: 1, Coverage: world.Coverage{MulFirstBelow: 5}}, "mul_first_below 5"},
	} {
		err := Run(context.Background(), io.Discard, tt.f)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}
