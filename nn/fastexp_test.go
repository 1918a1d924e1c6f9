package nn

import (
	"math"
	"testing"
)

func TestTrainExp(t *testing.T) {
	worst := 0.0
	for x := float32(-87); x < 88.7; x += 0.00731 {
		got, want := float64(trainExp(x)), math.Exp(float64(x))
		rel := math.Abs(got-want) / want
		if rel > worst {
			worst = rel
		}
		if rel > 3e-7 {
			t.Fatalf("trainExp(%v) = %v, want %v (relative error %.2g)", x, got, want, rel)
		}
	}
	t.Logf("worst relative error %.3g", worst)
	tests := []struct {
		x, want float32
	}{
		{0, 1},
		{1, float32(math.E)},
		{89, float32(math.Inf(1))},
		{float32(math.Inf(1)), float32(math.Inf(1))},
		{-88, 0},
		{float32(math.Inf(-1)), 0},
	}
	for _, tt := range tests {
		if got := trainExp(tt.x); got != tt.want && math.Abs(float64(got-tt.want)) > 1e-6 {
			t.Errorf("trainExp(%v) = %v, want %v", tt.x, got, tt.want)
		}
	}
	if got := trainExp(float32(math.NaN())); got == got {
		t.Errorf("trainExp(NaN) = %v, want NaN", got)
	}
}
