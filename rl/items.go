package rl

import (
	"math/rand/v2"
	"sort"
)

// Items draws the training items of each step for a source that makes its rollouts in process.
// A step draws ItemsPerStep distinct items of n, in increasing order.
// The draws follow each other from a PCG seeded by Config.Seed.
// A step asked for out of order replays the earlier draws,
// so its items depend on the seed, n, k and the step only.
// A step redone after a failure, or the first step of a resumed run, draws the same items.
// Not safe for concurrent use.
type Items struct {
	seed uint64
	n, k int
	rng  *rand.PCG
	done int // steps drawn from rng
}

// NewItems returns the sampler of k items a step of n items under seed.
func NewItems(seed uint64, n, k int) *Items {
	return &Items{seed: seed, n: n, k: k, rng: rand.NewPCG(seed, 0x726c)}
}

// Step returns the items of step (from 1).
func (s *Items) Step(step int) []int {
	if step <= s.done {
		s.rng, s.done = rand.NewPCG(s.seed, 0x726c), 0
	}
	for s.done < step-1 {
		sampleItems(s.rng, s.n, s.k)
		s.done++
	}
	s.done++
	return sampleItems(s.rng, s.n, s.k)
}

// sampleItems draws k distinct items of n, in increasing order.
func sampleItems(src *rand.PCG, n, k int) []int {
	r := rand.New(src)
	picked := make(map[int]bool, k)
	out := make([]int, 0, k)
	for len(out) < k { // Floyd's algorithm: exactly k draws
		j := r.IntN(n - k + len(out) + 1)
		if picked[j] {
			j = n - k + len(out)
		}
		picked[j] = true
		out = append(out, j)
	}
	sort.Ints(out)
	return out
}

// RolloutSeed is the seed of rollout k of step under seed.
// Rollouts are numbered across the step's groups: item i's rollout g is i·GroupSize+g.
func RolloutSeed(seed uint64, step, k int) uint64 {
	x := seed ^ uint64(step)*0x9e3779b97f4a7c15 ^ uint64(k)*0xbf58476d1ce4e5b9
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
