package world

import (
	"context"
	"fmt"
	"math/rand/v2"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate"
)

// SizeScore is a solver's exact-match score on one size class.
type SizeScore struct {
	Size    SolverSize
	Covered bool
	Right   int
	N       int
	Failed  int // calls that returned an error (counted wrong)
}

// GradeSolver asks model perSize questions of every size class of
// SolverSizes (covered and not), under the solver's prompts at
// temperature 0, and returns the exact-match score of each class, in the
// order of SolverSizes(true) then SolverSizes(false). Questions are
// deterministic from seed. At most concurrency calls run at once; a failed
// call counts as wrong and is counted in Failed; only ctx ending stops the
// grading, with ctx's error.
func GradeSolver(ctx context.Context, model delegate.Model, perSize, concurrency int, seed uint64) ([]SizeScore, error) {
	if perSize < 1 || concurrency < 1 {
		return nil, fmt.Errorf("grade solver %s: per size %d and concurrency %d must be positive", model.Name(), perSize, concurrency)
	}
	rng := rand.New(rand.NewPCG(seed, 0x67ade))
	type job struct {
		class int
		t     Transcript
		want  int64
	}
	var scores []SizeScore
	var jobs []job
	for _, covered := range []bool{true, false} {
		for _, sz := range SolverSizes(covered) {
			for range perSize {
				x, y := sz.Question(rng)
				jobs = append(jobs, job{class: len(scores), t: SolverTranscript(sz.Op, x, y), want: sz.Op.apply(x, y)})
			}
			scores = append(scores, SizeScore{Size: sz, Covered: covered, N: perSize})
		}
	}
	right := make([]bool, len(jobs))
	failed := make([]bool, len(jobs))
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(concurrency)
	zero := 0.0
	for i, j := range jobs {
		if gctx.Err() != nil {
			break
		}
		eg.Go(func() error {
			resp, err := model.Chat(gctx, &delegate.Request{Messages: j.t.Messages[:2], Temperature: &zero, MaxTokens: 128})
			if err != nil {
				failed[i] = true
				return nil // recorded; a model failure is a wrong answer, not the grading's end
			}
			right[i] = Correct(resp.Text(), j.want)
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, fmt.Errorf("grade solver %s: %w", model.Name(), err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("grade solver %s: %w", model.Name(), err)
	}
	for i, j := range jobs {
		if right[i] {
			scores[j.class].Right++
		}
		if failed[i] {
			scores[j.class].Failed++
		}
	}
	return scores, nil
}
