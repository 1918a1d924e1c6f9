package tokenizer

import "slices"

// longWord is the length in bytes above which a word is merged with a heap.
// A heap costs O(n log n). Scanning all pairs at each step costs O(n²) but
// is faster for the short words that make up nearly all text. Either way
// the pair of lowest rank merges first, the leftmost of equals, as in the
// tokenizers library.
const longWord = 48

const noMerge = int32(1<<31 - 1)

func (t *HF) rank(a, b int32) (merge, bool) {
	m, ok := t.merges[mergeKey(a, b)]
	return m, ok
}

// mergeShort merges sym in place by repeated scans.
func (t *HF) mergeShort(sym []int32) []int32 {
	// rank[k] is the rank of the pair (sym[k], sym[k+1]), noMerge if none.
	rank := make([]int32, len(sym)-1)
	rankOf := func(k int) int32 {
		if m, ok := t.rank(sym[k], sym[k+1]); ok {
			return m.rank
		}
		return noMerge
	}
	for k := range rank {
		rank[k] = rankOf(k)
	}
	for len(sym) > 1 {
		best := 0
		for k := 1; k < len(rank); k++ {
			if rank[k] < rank[best] {
				best = k
			}
		}
		if rank[best] == noMerge {
			break
		}
		m, _ := t.rank(sym[best], sym[best+1])
		sym[best] = m.id
		sym = slices.Delete(sym, best+1, best+2)
		rank = slices.Delete(rank, best, best+1)
		if best > 0 {
			rank[best-1] = rankOf(best - 1)
		}
		if best < len(rank) {
			rank[best] = rankOf(best)
		}
	}
	return sym
}

// candidate is a pair that may merge: the symbol at pos and the one after it.
// They had ids left and right when the pair was pushed.
type candidate struct {
	rank, pos   int32
	left, right int32
}

func (c candidate) less(d candidate) bool {
	return c.rank < d.rank || c.rank == d.rank && c.pos < d.pos
}

// mergeLong merges sym with a linked list of symbols and a min-heap of candidate pairs.
// The heap is keyed by rank, then position. A candidate whose symbols
// changed since it was pushed is skipped.
func (t *HF) mergeLong(sym []int32) []int32 {
	n := int32(len(sym))
	next := make([]int32, n) // index of the next live symbol, n at the end
	prev := make([]int32, n) // index of the previous live symbol, -1 at the start
	for i := range n {
		next[i], prev[i] = i+1, i-1
	}
	var h []candidate
	push := func(pos int32) {
		if pos < 0 || next[pos] >= n {
			return
		}
		a, b := sym[pos], sym[next[pos]]
		m, ok := t.rank(a, b)
		if !ok {
			return
		}
		h = append(h, candidate{m.rank, pos, a, b})
		for i := len(h) - 1; i > 0; { // sift up
			p := (i - 1) / 2
			if !h[i].less(h[p]) {
				break
			}
			h[i], h[p] = h[p], h[i]
			i = p
		}
	}
	pop := func() candidate {
		top := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		for i := 0; ; { // sift down
			l, r, m := 2*i+1, 2*i+2, i
			if l < len(h) && h[l].less(h[m]) {
				m = l
			}
			if r < len(h) && h[r].less(h[m]) {
				m = r
			}
			if m == i {
				break
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
		return top
	}
	const dead = -1
	for i := range n - 1 {
		push(i)
	}
	for len(h) > 0 {
		c := pop()
		if sym[c.pos] != c.left || next[c.pos] >= n || sym[next[c.pos]] != c.right {
			continue // stale: one of its symbols merged since
		}
		m, _ := t.rank(c.left, c.right)
		right := next[c.pos]
		sym[c.pos] = m.id
		sym[right] = dead
		next[c.pos] = next[right]
		if next[right] < n {
			prev[next[right]] = c.pos
		}
		push(prev[c.pos])
		push(c.pos)
	}
	out := sym[:0]
	for i := int32(0); i < n; i = next[i] {
		out = append(out, sym[i])
	}
	return out
}
