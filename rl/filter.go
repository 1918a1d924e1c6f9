package rl

import (
	"context"
	"fmt"
	"runtime/debug"

	"golang.org/x/sync/errgroup"
)

// SolveRate reports how many of the frozen peers' sampled answers to item
// are correct, out of how many. It may be called from many goroutines at
// once.
type SolveRate func(ctx context.Context, item int) (correct, total int, err error)

// FilterSolved returns, in increasing order, the items among 0..n−1 whose peers solve under maxRate.
// MLPO trains its leader only on those, so that the leader does not learn to copy the majority.
// With maxRate 0.75, items where three quarters of the peers' answers are right are dropped.
// An item with no peer answers is kept.
// At most concurrency calls of rate run at once.
// The first error or panic stops the filter and is returned naming its item.
// Env.Items is then the number kept, and the environment's rollout maps its item i to kept[i].
func FilterSolved(ctx context.Context, n int, rate SolveRate, maxRate float64, concurrency int) ([]int, error) {
	if !(maxRate > 0 && maxRate <= 1) {
		return nil, fmt.Errorf("filter solved: max rate must be in (0, 1], got %v", maxRate)
	}
	if n < 0 || concurrency < 1 {
		return nil, fmt.Errorf("filter solved: %d items, concurrency %d", n, concurrency)
	}
	keep := make([]bool, n)
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(concurrency)
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		eg.Go(func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("filter solved: item %d panicked: %v\n%s", i, p, debug.Stack())
				}
			}()
			c, tot, err := rate(gctx, i)
			if err != nil {
				return fmt.Errorf("filter solved: item %d: %w", i, err)
			}
			if c < 0 || tot < 0 || c > tot {
				return fmt.Errorf("filter solved: item %d: %d correct of %d", i, c, tot)
			}
			keep[i] = tot == 0 || float64(c) < maxRate*float64(tot)
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("filter solved: %w", err)
	}
	var out []int
	for i, k := range keep {
		if k {
			out = append(out, i)
		}
	}
	return out, nil
}
