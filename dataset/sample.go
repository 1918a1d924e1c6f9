package dataset

import (
	"sort"

	"github.com/delegatelab/delegate"
)

// splitmix64 is a small, fully specified generator: the same seed gives
// the same sample on every Go version and platform.
type splitmix64 uint64

func (s *splitmix64) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// below returns a uniform integer in [0, n) by rejection.
func (s *splitmix64) below(n uint64) uint64 {
	limit := -n % n // 2^64 mod n: values below it would bias the result
	for {
		if v := s.next(); v >= limit {
			return v % n
		}
	}
}

// Sample returns n tasks drawn without replacement, deterministically for
// a given seed and input order, in their original order. n >= len(tasks)
// returns a copy of all tasks; n <= 0 returns none. tasks is not modified.
func Sample(tasks []delegate.Task, n int, seed uint64) []delegate.Task {
	if n <= 0 {
		return nil
	}
	if n >= len(tasks) {
		return append([]delegate.Task(nil), tasks...)
	}
	idx := make([]int, len(tasks))
	for i := range idx {
		idx[i] = i
	}
	rng := splitmix64(seed)
	for i := 0; i < n; i++ { // partial Fisher-Yates
		j := i + int(rng.below(uint64(len(idx)-i)))
		idx[i], idx[j] = idx[j], idx[i]
	}
	pick := idx[:n]
	sort.Ints(pick)
	out := make([]delegate.Task, n)
	for i, k := range pick {
		out[i] = tasks[k]
	}
	return out
}
