package train

import (
	"fmt"
	"math"
)

// Schedule is a learning rate with linear warmup and a half-cosine decay.
// It rises linearly over Warmup steps, then follows a half cosine from MaxLR
// down to MinLR at step Total, and stays at MinLR afterwards. Steps count
// from 0:
//
//	step < Warmup:          MaxLR·(step+1)/Warmup
//	Warmup ≤ step < Total:  MinLR + (MaxLR−MinLR)·(1+cos(π·(step−Warmup)/(Total−Warmup)))/2
//	step ≥ Total:           MinLR
type Schedule struct {
	Warmup, Total int
	MaxLR, MinLR  float64
}

// Validate checks the ranges and the order of the fields.
func (s Schedule) Validate() error {
	switch {
	case s.Warmup < 0:
		return fmt.Errorf("schedule: warmup must be non-negative, got %d", s.Warmup)
	case s.Total < s.Warmup || s.Total <= 0:
		return fmt.Errorf("schedule: total %d must be positive and at least warmup %d", s.Total, s.Warmup)
	case !(s.MaxLR > 0) || math.IsInf(s.MaxLR, 0):
		return fmt.Errorf("schedule: max lr must be positive and finite, got %v", s.MaxLR)
	case !(s.MinLR >= 0 && s.MinLR <= s.MaxLR):
		return fmt.Errorf("schedule: min lr %v must be in [0, max lr %v]", s.MinLR, s.MaxLR)
	}
	return nil
}

// LR returns the learning rate of step (0-based).
func (s Schedule) LR(step int) float64 {
	switch {
	case step < s.Warmup:
		return s.MaxLR * float64(step+1) / float64(s.Warmup)
	case step >= s.Total:
		return s.MinLR
	}
	frac := float64(step-s.Warmup) / float64(s.Total-s.Warmup)
	return s.MinLR + (s.MaxLR-s.MinLR)*(1+math.Cos(math.Pi*frac))/2
}
