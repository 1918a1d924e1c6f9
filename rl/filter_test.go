package rl

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestFilterSolved(t *testing.T) {
	// correct answers out of 4 for items 0..6; item 6 has none.
	correct := []int{0, 1, 2, 3, 4, 3, 0}
	total := []int{4, 4, 4, 4, 4, 4, 0}
	rate := func(_ context.Context, i int) (int, int, error) { return correct[i], total[i], nil }
	tests := []struct {
		max  float64
		want []int
	}{
		{0.75, []int{0, 1, 2, 6}},
		{1, []int{0, 1, 2, 3, 5, 6}},
		{0.25, []int{0, 6}},
	}
	for _, tt := range tests {
		got, err := FilterSolved(context.Background(), len(correct), rate, tt.max, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("max rate %v: kept %v, want %v", tt.max, got, tt.want)
		}
	}
}

func TestFilterSolvedErrors(t *testing.T) {
	boom := func(_ context.Context, i int) (int, int, error) {
		if i == 4 {
			return 0, 0, errors.New("peer model down")
		}
		return 0, 1, nil
	}
	if _, err := FilterSolved(context.Background(), 8, boom, 0.75, 2); err == nil || !strings.Contains(err.Error(), "item 4: peer model down") {
		t.Errorf("err = %v, want one naming item 4", err)
	}
	bad := func(context.Context, int) (int, int, error) { return 3, 2, nil }
	if _, err := FilterSolved(context.Background(), 2, bad, 0.75, 2); err == nil || !strings.Contains(err.Error(), "3 correct of 2") {
		t.Errorf("err = %v, want one naming the impossible count", err)
	}
	panicky := func(context.Context, int) (int, int, error) { panic("oops") }
	if _, err := FilterSolved(context.Background(), 2, panicky, 0.75, 2); err == nil || !strings.Contains(err.Error(), "panicked: oops") {
		t.Errorf("err = %v, want the panic as an error", err)
	}
	if _, err := FilterSolved(context.Background(), 2, bad, 0, 2); err == nil {
		t.Error("max rate 0 accepted")
	}
}
