package atropos

// queued is what the queue keeps of a stored group; its body stays in the
// store under seq.
type queued struct {
	seq       uint64
	id        string
	env       int // -1: no env_id
	size      int
	policy    int64
	hasPolicy bool
	released  bool // came from a buffer of odd-sized groups
	// unit is the environment's group_size when the group is larger
	// than it (oversized), else 0.
	unit int
}

// nominal is the sequences the group counts for in a batch. An oversized
// group takes whole packs of its environment's group_size.
func (q queued) nominal() int { return nominalSize(q.size, q.unit) }

// packSize is what the group brings to the pack unit. When oversized it
// brings its group_size, so it never enlarges the packs.
func (q queued) packSize() int {
	if q.unit > 0 {
		return q.unit
	}
	return q.size
}

// nominalSize rounds size up to a multiple of unit; unit 0 leaves it.
func nominalSize(size, unit int) int {
	if unit <= 0 {
		return size
	}
	return (size + unit - 1) / unit * unit
}

// packFull reports whether n groups of nominal size make whole packs of
// unit. That is exactly one pack, or for an oversized size a whole number.
func packFull(n, size, unit int) bool {
	return n*size == unit || size > unit && n*size%unit == 0
}

// envRecord is a registered environment, as persisted.
type envRecord struct {
	MaxContextLen      int      `json:"max_context_len"`
	Weight             float64  `json:"weight"`
	DesiredName        string   `json:"desired_name"`
	RealName           string   `json:"real_name"`
	RegisteredID       int      `json:"registered_id"`
	Connected          bool     `json:"connected"`
	MinBatchAllocation *float64 `json:"min_batch_allocation"`
	GroupSize          int      `json:"group_size"`
}

// sumToTarget returns ascending indices of buffered groups whose sizes sum
// exactly to target, or nil. It first takes groups in arrival order while
// they fit. Then it tries subset-sum over all of them, preferring earlier
// groups. This is Atropos's rule for releasing odd-sized groups.
func sumToTarget(sizes []int, target int) []int {
	if len(sizes) == 0 || target <= 0 {
		return nil
	}
	var idx []int
	sum := 0
	for i, s := range sizes {
		if sum+s <= target {
			idx = append(idx, i)
			sum += s
			if sum == target {
				return idx
			}
		}
	}
	n := len(sizes)
	// reach[i][j]: some subset of the first i groups sums to j.
	reach := make([][]bool, n+1)
	for i := range reach {
		reach[i] = make([]bool, target+1)
	}
	reach[0][0] = true
	for i := 1; i <= n; i++ {
		for j := 0; j <= target; j++ {
			reach[i][j] = reach[i-1][j] || j >= sizes[i-1] && reach[i-1][j-sizes[i-1]]
		}
	}
	if !reach[n][target] {
		return nil
	}
	idx = idx[:0]
	j := target
	for i := n; i > 0; i-- {
		if j >= sizes[i-1] && reach[i-1][j-sizes[i-1]] {
			idx = append(idx, i-1)
			j -= sizes[i-1]
		}
	}
	for l, r := 0, len(idx)-1; l < r; l, r = l+1, r-1 {
		idx[l], idx[r] = idx[r], idx[l]
	}
	return idx
}

// grabExact picks groups from q summing to exactly batchSize sequences,
// never splitting a group. Groups smaller than the largest group size are
// first gathered, per size, into packs of the largest size. Packs are
// taken in the order they were completed. An oversized group
// counts its nominal size and makes its packs alone; a pack that would
// overfill the batch is left for a later one. When packs taken in order
// cannot fill the batch, any packs that fill it exactly are taken
// (sumToTarget): groups of several roles vary in size, and in order
// they could stall the run for good. It returns the indices into q, or
// nil when no full batch can be formed.
func grabExact(q []queued, batchSize int) []int {
	if len(q) == 0 || batchSize <= 0 {
		return nil
	}
	total, unit := 0, 0
	for _, g := range q {
		total += g.nominal()
		unit = max(unit, g.packSize())
	}
	if total < batchSize {
		return nil
	}
	pending := map[int][]int{}
	var packs [][]int
	for i, g := range q {
		n := g.nominal()
		pending[n] = append(pending[n], i)
		if packFull(len(pending[n]), n, unit) {
			packs = append(packs, pending[n])
			pending[n] = nil
		}
	}
	sizes := make([]int, len(packs))
	for k, p := range packs {
		for _, i := range p {
			sizes[k] += q[i].nominal()
		}
	}
	var pick []int
	for _, k := range sumToTarget(sizes, batchSize) {
		pick = append(pick, packs[k]...)
	}
	return pick
}

// grabGroups picks the first n groups of q, whatever their sizes, or nil
// when q holds fewer. It makes the batches of a trainer registered with
// batch_groups.
func grabGroups(q []queued, n int) []int {
	if n <= 0 || len(q) < n {
		return nil
	}
	pick := make([]int, n)
	for i := range pick {
		pick[i] = i
	}
	return pick
}

type packItem struct{ idx, size int }

// grabWithMinimums picks a batch honouring each connected environment's
// min_batch_allocation. First it takes each such environment's packs up to
// its minimum, scaled down when the minimums exceed the batch. Then it takes
// packs of any environment in queue order. Without minimums it is grabExact.
func grabWithMinimums(q []queued, batchSize int, envs []envRecord) []int {
	if len(q) == 0 {
		return nil
	}
	var mins []minAlloc
	for _, e := range envs {
		if e.Connected && e.MinBatchAllocation != nil {
			mins = append(mins, minAlloc{env: e.RegisteredID, frac: *e.MinBatchAllocation})
		}
	}
	if len(mins) == 0 {
		return grabExact(q, batchSize)
	}
	seen, packable := packableByEnv(q)
	need, ok := minimumNeeds(mins, batchSize, seen, packable)
	if !ok {
		return nil
	}
	taken := map[int]bool{}
	var pick []int
	total := 0
	for _, m := range need {
		got := 0
		for _, p := range packable[m.env] {
			if got >= m.seqs {
				break
			}
			if total+p.size <= batchSize {
				pick = append(pick, p.idx)
				taken[p.idx] = true
				got += p.size
				total += p.size
			}
		}
	}
	if total < batchSize {
		pick, total = fillFromPacks(q, packable, taken, pick, total, batchSize)
	}
	if total != batchSize {
		return nil
	}
	return pick
}

// minAlloc is an environment's minimum share of a batch: its fraction,
// and the sequences that makes.
type minAlloc struct {
	env  int
	frac float64
	seqs int
}

// packableByEnv sorts the queue's groups by environment and size. It
// returns the environments seen and, per environment, the groups that make
// whole packs. A pack is as many groups of one size as fill the largest
// group's size. Sizes are nominal (an oversized group's whole packs).
func packableByEnv(q []queued) (seen map[int]bool, packable map[int][]packItem) {
	unit := 0
	for _, g := range q {
		unit = max(unit, g.packSize())
	}
	seen = map[int]bool{}
	pending := map[int]map[int][]packItem{}
	packable = map[int][]packItem{}
	for i, g := range q {
		if g.env < 0 {
			continue
		}
		if !seen[g.env] {
			seen[g.env] = true
			pending[g.env] = map[int][]packItem{}
		}
		n := g.nominal()
		p := append(pending[g.env][n], packItem{i, n})
		pending[g.env][n] = p
		if packFull(len(p), n, unit) {
			packable[g.env] = append(packable[g.env], p...)
			pending[g.env][n] = nil
		}
	}
	return seen, packable
}

// minimumNeeds gives each minimum its sequences in a batch of batchSize.
// They are scaled down when together they exceed it. ok is false when an
// environment with a minimum has nothing packable.
func minimumNeeds(mins []minAlloc, batchSize int, seen map[int]bool, packable map[int][]packItem) (need []minAlloc, ok bool) {
	totalMin := 0
	for _, m := range mins {
		m.seqs = int(float64(batchSize) * m.frac)
		if m.seqs <= 0 {
			continue
		}
		if !seen[m.env] || len(packable[m.env]) == 0 {
			return nil, false
		}
		need = append(need, m)
		totalMin += m.seqs
	}
	if totalMin > batchSize {
		scale := float64(batchSize) / float64(totalMin)
		for k := range need {
			smallest := packable[need[k].env][0].size
			for _, p := range packable[need[k].env] {
				smallest = min(smallest, p.size)
			}
			need[k].seqs = max(smallest, int(float64(need[k].seqs)*scale))
		}
	}
	return need, true
}

// fillFromPacks tops pick up to batchSize with packable groups not yet
// taken, in queue order.
func fillFromPacks(q []queued, packable map[int][]packItem, taken map[int]bool, pick []int, total, batchSize int) ([]int, int) {
	inPack := map[int]bool{}
	for _, ps := range packable {
		for _, p := range ps {
			inPack[p.idx] = true
		}
	}
	for i, g := range q {
		if taken[i] || !inPack[i] {
			continue
		}
		if n := g.nominal(); total+n <= batchSize {
			pick = append(pick, i)
			total += n
		}
		if total == batchSize {
			break
		}
	}
	return pick, total
}
