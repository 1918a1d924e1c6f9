package rl

import (
	"fmt"
	"math"
)

// Span gives the completion tokens [Start, End) of an episode their own advantage.
// Positions count Episode.Completion, masked tokens included; a masked token carries no loss.
type Span struct {
	Start, End int
	Advantage  float64
}

// checkSpans refuses spans that are empty, out of [0, n], out of order,
// overlapping or not finite.
func checkSpans(spans []Span, n int) error {
	prev := 0
	for i, s := range spans {
		switch {
		case math.IsNaN(s.Advantage) || math.IsInf(s.Advantage, 0):
			return fmt.Errorf("span %d [%d, %d): advantage %v is not finite", i, s.Start, s.End, s.Advantage)
		case s.Start < 0 || s.End > n || s.Start >= s.End:
			return fmt.Errorf("span %d [%d, %d): out of range of %d completion tokens", i, s.Start, s.End, n)
		case s.Start < prev:
			return fmt.Errorf("span %d [%d, %d): overlaps or precedes the span before, which ends at %d", i, s.Start, s.End, prev)
		}
		prev = s.End
	}
	return nil
}

// tokenAdvantages is the advantage of each of n completion tokens: adv,
// replaced by the spans' own where they cover a token. The spans are
// checked (checkSpans).
func tokenAdvantages(adv float64, n int, spans []Span) []float64 {
	out := make([]float64, n)
	for j := range out {
		out[j] = adv
	}
	for _, s := range spans {
		for j := s.Start; j < s.End; j++ {
			out[j] = s.Advantage
		}
	}
	return out
}
