package atropos

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

func qs(env int, sizes ...int) []queued {
	out := make([]queued, len(sizes))
	for i, s := range sizes {
		out[i] = queued{seq: uint64(i + 1), env: env, size: s}
	}
	return out
}

func TestSumToTarget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sizes  []int
		target int
		want   []int
	}{
		{"fifo", []int{1, 2, 1}, 4, []int{0, 1, 2}},
		{"fifo skips what does not fit", []int{2, 3, 2}, 4, []int{0, 2}},
		{"subset sum when fifo fails", []int{3, 2, 2}, 4, []int{1, 2}},
		{"impossible", []int{3, 3}, 4, nil},
		{"larger than target stays", []int{8}, 4, nil},
		{"empty", nil, 4, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sumToTarget(tc.sizes, tc.target); !slices.Equal(got, tc.want) {
				t.Errorf("sumToTarget(%v, %d) = %v, want %v", tc.sizes, tc.target, got, tc.want)
			}
		})
	}
}

func TestGrabExact(t *testing.T) {
	for _, tc := range []struct {
		name  string
		q     []queued
		batch int
		want  []int
	}{
		{"whole groups in order", qs(0, 4, 4, 4), 8, []int{0, 1}},
		{"not enough sequences", qs(0, 4), 8, nil},
		{"mixed sizes packed to the largest", qs(0, 2, 4, 2, 4), 8, []int{1, 0, 2}},
		{"a size that never fills a pack is left", qs(0, 3, 4, 3, 4), 7, nil},
		{"a group larger than the batch is never split", qs(0, 8), 4, nil},
		{"batch not a multiple of the pack", qs(0, 4, 4, 4), 6, nil},
		{"sizes 1 2 4 8", qs(0, 1, 2, 8, 4, 1, 2, 4, 8, 1, 1, 1, 1, 2, 2), 16, []int{2, 3, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := grabExact(tc.q, tc.batch)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("grabExact = %v, want %v", got, tc.want)
			}
			if got != nil {
				sum := 0
				for _, i := range got {
					sum += tc.q[i].size
				}
				if sum != tc.batch {
					t.Errorf("batch has %d sequences, want %d", sum, tc.batch)
				}
			}
		})
	}
}

// sized queues groups of env whose group_size is groupSize, marking the
// larger ones oversized as push does.
func sized(env, groupSize int, sizes ...int) []queued {
	q := qs(env, sizes...)
	for i := range q {
		if q[i].size > groupSize {
			q[i].unit = groupSize
		}
	}
	return q
}

func TestGrabExactOversized(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sizes     []int
		groupSize int
		batch     int
		want      []int
	}{
		{"one over takes two packs", []int{4, 5, 4}, 4, 12, []int{0, 1}},
		{"alone fills a batch of two packs", []int{5}, 4, 8, []int{0}},
		{"does not enlarge the pack unit", []int{5, 4, 4}, 4, 8, []int{0}},
		{"a pack that would overfill is left", []int{4, 5, 4}, 4, 8, []int{0, 2}},
		{"a later pack fills the batch the earlier cannot", []int{4, 5}, 4, 8, []int{1}},
		{"packs that fill it out of order", []int{24, 24, 16, 16}, 4, 32, []int{2, 3}},
		{"no packs fill it", []int{24, 24, 24}, 4, 32, nil},
		{"small groups still pack to group_size", []int{2, 6, 2}, 4, 12, []int{1, 0, 2}},
		{"nominal over the batch never fits", []int{9}, 4, 8, nil},
		{"three packs", []int{9, 4}, 4, 16, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := sized(0, tc.groupSize, tc.sizes...)
			got := grabExact(q, tc.batch)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("grabExact(%v, group_size %d, batch %d) = %v, want %v", tc.sizes, tc.groupSize, tc.batch, got, tc.want)
			}
			nominal, real := 0, 0
			for _, i := range got {
				nominal += q[i].nominal()
				real += q[i].size
			}
			if got != nil && (nominal != tc.batch || real > tc.batch) {
				t.Errorf("batch counts %d nominal and %d real sequences, want %d and at most %d", nominal, real, tc.batch, tc.batch)
			}
		})
	}
}

func TestGrabWithMinimumsOversized(t *testing.T) {
	half := 0.5
	envs := []envRecord{
		{RegisteredID: 0, Connected: true, MinBatchAllocation: &half, GroupSize: 4, Weight: 1},
		{RegisteredID: 1, Connected: true, GroupSize: 4, Weight: 1},
	}
	q := append(sized(1, 4, 4, 4), sized(0, 4, 5, 4)...)
	for i := range q {
		q[i].seq = uint64(i + 1)
	}
	for _, tc := range []struct {
		name  string
		batch int
		want  []int
	}{
		{"the minimum is met by the oversized group's two packs", 16, []int{2, 0, 1}},
		{"its two packs may fill the batch past the minimum", 8, []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := grabWithMinimums(q, tc.batch, envs)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("grabWithMinimums = %v, want %v", got, tc.want)
			}
			nominal, real := 0, 0
			for _, i := range got {
				nominal += q[i].nominal()
				real += q[i].size
			}
			if nominal != tc.batch || real > tc.batch {
				t.Errorf("batch counts %d nominal and %d real sequences, want %d and at most %d", nominal, real, tc.batch, tc.batch)
			}
		})
	}
}

func TestGrabWithMinimums(t *testing.T) {
	half, most, tenth := 0.5, 0.75, 0.1
	env := func(id int, min *float64) envRecord {
		return envRecord{RegisteredID: id, Connected: true, MinBatchAllocation: min, GroupSize: 4, Weight: 1}
	}
	mixed := append(qs(1, 4, 4, 4, 4), qs(0, 4, 4)...)
	for i := range mixed {
		mixed[i].seq = uint64(i + 1)
	}
	for _, tc := range []struct {
		name  string
		q     []queued
		envs  []envRecord
		batch int
		want  []int
	}{
		{"minimum first, then queue order", mixed, []envRecord{env(0, &half), env(1, nil)}, 8, []int{4, 0}},
		{"env with a minimum and no groups blocks the batch", qs(1, 4, 4), []envRecord{env(0, &half), env(1, nil)}, 8, nil},
		{"minimums over the batch are scaled down", mixed, []envRecord{env(0, &most), env(1, &most)}, 8, []int{4, 0}},
		{"a minimum rounding to zero sequences is ignored", qs(1, 4, 4), []envRecord{env(0, &tenth), env(1, nil)}, 8, []int{0, 1}},
		{"disconnected minimums fall back to grabExact", qs(1, 4, 4), []envRecord{{RegisteredID: 0, MinBatchAllocation: &half}, env(1, nil)}, 8, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := grabWithMinimums(tc.q, tc.batch, tc.envs); !slices.Equal(got, tc.want) {
				t.Errorf("grabWithMinimums = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestScanNumbers(t *testing.T) {
	for _, tc := range []struct {
		raw   string
		depth int
		ints  bool
		outer int
		inner []int
		bad   bool
	}{
		{`[[1,2],[3]]`, 2, true, 2, []int{2, 1}, false},
		{` [ [ -1 , 2 ] , [ ] ] `, 2, true, 2, []int{2, 0}, false},
		{`[1.5,-2e3,0]`, 1, false, 3, nil, false},
		{`[[1.5]]`, 2, true, 0, nil, true},
		{`[["1"]]`, 2, true, 0, nil, true},
		{`[[null]]`, 2, false, 0, nil, true},
		{`[1]`, 2, true, 0, nil, true},
		{`{"a":1}`, 1, false, 0, nil, true},
		{`[[[1,2]],[[3]]]`, 3, true, 2, []int{1, 1}, false},
	} {
		sh, err := scanNumbers([]byte(tc.raw), tc.depth, tc.ints)
		if (err != nil) != tc.bad {
			t.Errorf("scanNumbers(%s): err = %v, want bad=%v", tc.raw, err, tc.bad)
			continue
		}
		if !tc.bad && (sh.outer != tc.outer || !slices.Equal(sh.inner, tc.inner)) {
			t.Errorf("scanNumbers(%s) = %d %v, want %d %v", tc.raw, sh.outer, sh.inner, tc.outer, tc.inner)
		}
	}
}

func FuzzParseGroup(f *testing.F) {
	f.Add([]byte(`{"tokens":[[1,2]],"masks":[[-100,2]],"scores":[1.0]}`))
	f.Add([]byte(`{"tokens":[[1,2]],"masks":[[-100,2]],"scores":[1.0],"inference_logprobs":[[1.0,-0.5]],"group_overrides":{"group_id":7}}`))
	f.Add([]byte(`{"tokens":[[1,"2"]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := parseGroup(data, noLimits, "body")
		if err != nil {
			return
		}
		if !json.Valid(g.body) {
			t.Fatalf("stored body is not JSON:\n%s", g.body)
		}
		for _, pooled := range []bool{false, true} {
			list, err := parseGroups(append(append([]byte("[ "), data...), " ]"...), noLimits, pooled)
			if err != nil || len(list) != 1 || string(list[0].body) != string(g.body) || (list[0].buf != nil) != pooled {
				t.Fatalf("the group as a list, pooled %v: %v", pooled, err)
			}
			if list[0].release(); pooled && (list[0].body != nil || list[0].buf != nil) {
				t.Fatalf("a released group still holds its pooled body")
			}
		}
		again, err := parseGroup(g.body, noLimits, "body")
		if err != nil {
			t.Fatalf("stored body does not parse again: %v\n%s", err, g.body)
		}
		if string(again.body) != string(g.body) || again.size != g.size {
			t.Fatalf("stored body is not stable:\n%s\n%s", g.body, again.body)
		}
	})
}

// FuzzScanNumbers checks the scanner against encoding/json: what it
// accepts is JSON, and it writes it as json.Compact does.
func FuzzScanNumbers(f *testing.F) {
	f.Add([]byte(`[[1, -2], [3.5e-3, 0]]`), uint8(2), false)
	f.Add([]byte(`[ [ [1] ] , [ ] ]`), uint8(3), true)
	f.Add([]byte(`[1,2 ,3 ]`), uint8(1), true)
	f.Fuzz(func(t *testing.T, raw []byte, depth uint8, ints bool) {
		d := int(depth%3) + 1
		s := scanner{raw: raw}
		out, _, err := s.numbers(d, ints, nil)
		if err != nil {
			return
		}
		var want bytes.Buffer
		if cerr := json.Compact(&want, raw[:s.pos]); cerr != nil {
			t.Fatalf("accepted %q, which is not JSON: %v", raw[:s.pos], cerr)
		}
		if !bytes.Equal(out, want.Bytes()) {
			t.Fatalf("compacted %q to %q, want %q", raw[:s.pos], out, want.Bytes())
		}
	})
}

func TestDigits(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		from int
		want int
	}{
		{"", 0, 0},
		{"123", 0, 3},
		{"12345678", 0, 8},
		{"123456789", 0, 9},
		{"12345678,", 0, 8},
		{"1234567/9012", 0, 7},
		{"1234567:9012", 0, 7},
		{"-1234567890123456789]", 1, 20},
		{"12\xff45678901", 0, 2},
		{"\x80\x39", 0, 0},
		{"0123456789012345678901234 ", 3, 25},
		{"12345678901234567\x00", 0, 17},
	} {
		if got := digits([]byte(tc.raw), tc.from); got != tc.want {
			t.Errorf("digits(%q, %d) = %d, want %d", tc.raw, tc.from, got, tc.want)
		}
	}
}

func FuzzDigits(f *testing.F) {
	f.Add([]byte("12345678901234567890x"), uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, from uint8) {
		p := min(int(from), len(raw))
		want := p
		for want < len(raw) && raw[want] >= '0' && raw[want] <= '9' {
			want++
		}
		if got := digits(raw, p); got != want {
			t.Fatalf("digits(%q, %d) = %d, want %d", raw, p, got, want)
		}
	})
}
