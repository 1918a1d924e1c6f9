package world

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Literal is the Ref of an operand written in the problem's text.
const Literal = -1

// Operand is one input of a step. It is a number from the text, with Ref
// Literal, or an earlier step's result, with Ref its index.
type Operand struct {
	Ref   int
	Value int64
}

// Step is one operation of a problem's solution.
type Step struct {
	Op     Op
	X, Y   Operand
	Result int64
	// Part is the independent sub-part the step belongs to, 0 or 1. It is
	// -1 for the step that combines the parts.
	Part int
}

// Expr is the step's self-contained question, with the values of its
// operands: "347*28".
func (s Step) Expr() string { return Expr(s.Op, s.X.Value, s.Y.Value) }

// Ready reports whether the step's operands are all in the text, so it
// can be computed before any other step.
func (s Step) Ready() bool { return s.X.Ref == Literal && s.Y.Ref == Literal }

// Problem is one word problem with its structured solution. Steps are in
// an order that computes each operand before it is used; steps of
// different Parts never depend on each other and can be solved in
// parallel. Answer is the last step's result.
type Problem struct {
	ID     string // 16 hex digits of the FNV-1a hash of Text
	Text   string
	Steps  []Step
	Answer int64
	Split  Split
}

// Depends reports whether step j uses the result of step i, directly or
// through other steps.
func (p *Problem) Depends(j, i int) bool {
	for _, o := range []Operand{p.Steps[j].X, p.Steps[j].Y} {
		if o.Ref == i || (o.Ref != Literal && p.Depends(o.Ref, i)) {
			return true
		}
	}
	return false
}

// Independent reports whether neither of steps i and j needs the other.
func (p *Problem) Independent(i, j int) bool {
	return i != j && !p.Depends(i, j) && !p.Depends(j, i)
}

// Split is the held-out status of a problem.
type Split int

// The three splits. Which one a problem is in depends on its text only.
// Training choices are made on Validation: world knobs, learning rate,
// steps, estimator. Test is read once, for the reported table.
const (
	Train Split = iota
	Test
	Validation
)

func (s Split) String() string {
	switch s {
	case Test:
		return "test"
	case Validation:
		return "validation"
	}
	return "train"
}

// ParseSplit reads a split's name.
func ParseSplit(name string) (Split, error) {
	for _, s := range []Split{Train, Validation, Test} {
		if s.String() == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("split %q: want train, validation or test", name)
}

// SplitOf returns the split of a problem text. The held-out texts are
// those whose FNV-1a hash falls in the first heldOutPermille thousandths
// of the hash space; a second digit of the hash halves them into
// Validation and Test. The splits are disjoint by construction: a text is
// in exactly one, and the training split is the same as when there was
// no validation split.
func SplitOf(text string, heldOutPermille int) Split {
	h := hashText(text)
	switch {
	case h%1000 >= uint64(heldOutPermille):
		return Train
	case (h/1000)%2 == 0:
		return Validation
	}
	return Test
}

func hashText(text string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(text)) // a hash.Hash never returns an error
	return h.Sum64()
}

// MulSize is a class of products "x C of y" in the text. It holds the
// digits of x and of y, and the class's weight among the classes.
type MulSize struct {
	X, Y   int
	Weight float64
}

// Config holds the difficulty knobs of the generator.
type Config struct {
	// MinSteps and MaxSteps bound the number of operations of a problem.
	MinSteps int `json:"min_steps"`
	MaxSteps int `json:"max_steps"`
	// Parallel is the probability that a problem of 3 or more steps has
	// two independent parts. Each part is a quantity computed separately,
	// and a last step combines them.
	Parallel float64 `json:"parallel"`
	// MulStart is the probability that a part starts with a product, not a
	// plain number. An example is "Ann has 23 bags of 47 pens.".
	MulStart float64 `json:"mul_start"`
	// MulSizes are the digit sizes of those products, by weight.
	MulSizes []MulSize `json:"mul_sizes"`
	// AddDigits bounds the digits of a number added or taken away, and of
	// a part's plain starting number.
	AddDigits [2]int `json:"add_digits"`
	// Times is the chance that a later step multiplies by one digit
	// instead of adding or taking away. An example is "Ann then has 3
	// times as many.".
	Times float64 `json:"times"`
	// Distractors is the most irrelevant sentences with numbers a problem
	// gets. Their count is uniform over 0..Distractors.
	Distractors int `json:"distractors"`
	// TestPermille is the held-out share of the hash space, in
	// thousandths. Half is the validation split, half the test split.
	TestPermille int `json:"test_permille"`
}

// DefaultConfig is level 3: the world delegate train runs and the shipped
// router is trained for. docs/world.md explains its numbers. It has two
// quantities, each starting with a product of two 2-digit numbers. One of
// them is sometimes followed by a 2-digit amount got or given away. A sum
// or a difference combines them, with one distractor at most. Only the
// products are worth delegating, and where they fall varies with the text.
//
//	steps 3..4, parallel 1, mul_start 1, mul_sizes 2x2, add_digits 2..2,
//	times 0, distractors 1, test_permille 100
func DefaultConfig() Config { return twoParts() }

// oneQuantity is level 5: one quantity built by 1 to 3 steps. It starts
// with a product of two 2-digit numbers in 4 problems of 5, else with a
// plain 2-digit number. Then 2-digit amounts are added or taken away, with
// one distractor at most. It was the default world before two parts were,
// and the shipped delegator's last pretraining phase trained on it. At
// most one step of its problems is worth delegating, so delegation saves
// less than on two parts; docs/world.md has the figures.
func oneQuantity() Config {
	return Config{
		MinSteps: 1, MaxSteps: 3,
		Parallel:     0,
		MulStart:     0.8,
		MulSizes:     []MulSize{{X: 2, Y: 2, Weight: 1}},
		AddDigits:    [2]int{2, 2},
		Times:        0,
		Distractors:  1,
		TestPermille: 100,
	}
}

// twoParts is level 3: two parts, each a product of two 2-digit numbers.
// One is sometimes followed by an amount. A sum or a difference combines
// them.
func twoParts() Config {
	c := oneQuantity()
	c.MinSteps, c.MaxSteps, c.Parallel, c.MulStart = 3, 4, 1, 1
	return c
}

// DefaultLevel is the level of DefaultConfig.
const DefaultLevel = 3

// OneQuantityLevel is the level of one quantity built by 1 to 3 steps,
// the default world before two parts.
const OneQuantityLevel = 5

// MLPOLevel is the level delegate train --mode mlpo runs, with up to
// MLPODistractors distractors.
const MLPOLevel = 2

// MLPODistractors is the most distractor sentences of a problem under
// delegate train --mode mlpo. With that many, the leader alone is not at
// its ceiling, so training can show it better alone. The package doc
// says why.
const MLPODistractors = 4

// Levels returns the worlds by number, the shipped models' curriculum.
// Level 1 is one product; 2 a product then an amount added or taken away;
// 3 two parts combined, the default world. Level 4 has up to 6 steps in
// two parts and two distractors. Level 5 is one quantity of 1 to 3 steps,
// the default world before level 3. Their configs never change, so the
// commands that made the shipped models reproduce.
func Levels() map[int]Config {
	l1, l2, l3, l4 := twoParts(), twoParts(), twoParts(), twoParts()
	l1.MinSteps, l1.MaxSteps, l1.Parallel, l1.Distractors = 1, 1, 0, 0
	l2.MinSteps, l2.MaxSteps, l2.Parallel = 2, 2, 0
	l4.MinSteps, l4.MaxSteps, l4.Distractors = 4, 6, 2
	return map[int]Config{1: l1, 2: l2, 3: l3, 4: l4, OneQuantityLevel: oneQuantity()}
}

// maxQuantity bounds every quantity of a part, so that a sum of two parts
// fits Width digits.
var maxQuantity = pow10(Width) / 2

// Summary describes the problems c draws in one line, for reports. An
// example is "2 steps, products of 2x2 digits, amounts of 2 digits, up to
// 4 distractors".
func (c Config) Summary() string {
	steps := fmt.Sprintf("%d steps", c.MinSteps)
	if c.MaxSteps != c.MinSteps {
		steps = fmt.Sprintf("%d-%d steps", c.MinSteps, c.MaxSteps)
	}
	parts := []string{steps}
	switch {
	case c.Parallel >= 1 && c.MinSteps >= 3:
		parts = append(parts, "two parts")
	case c.Parallel > 0:
		parts = append(parts, fmt.Sprintf("two parts in %g%% of those of 3 or more", 100*c.Parallel))
	}
	if c.MulStart > 0 {
		sizes := make([]string, len(c.MulSizes))
		for i, m := range c.MulSizes {
			sizes[i] = fmt.Sprintf("%dx%d", m.X, m.Y)
		}
		parts = append(parts, fmt.Sprintf("products of %s digits", strings.Join(sizes, ", ")))
	}
	amounts := fmt.Sprintf("amounts of %d digits", c.AddDigits[0])
	if c.AddDigits[1] != c.AddDigits[0] {
		amounts = fmt.Sprintf("amounts of %d-%d digits", c.AddDigits[0], c.AddDigits[1])
	}
	parts = append(parts, amounts)
	if c.Times > 0 {
		parts = append(parts, fmt.Sprintf("\"times as many\" in %g%% of later steps", 100*c.Times))
	}
	switch c.Distractors {
	case 0:
		parts = append(parts, "no distractors")
	case 1:
		parts = append(parts, "up to 1 distractor")
	default:
		parts = append(parts, fmt.Sprintf("up to %d distractors", c.Distractors))
	}
	return strings.Join(parts, ", ")
}

// Validate reports every knob out of range, naming it.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.MinSteps < 1 || c.MinSteps > 8 {
		bad("min_steps", "%d is outside [1, 8]", c.MinSteps)
	}
	if c.MaxSteps < c.MinSteps || c.MaxSteps > 8 {
		bad("max_steps", "%d is outside [min_steps %d, 8]", c.MaxSteps, c.MinSteps)
	}
	for key, p := range map[string]float64{"parallel": c.Parallel, "mul_start": c.MulStart, "times": c.Times} {
		if !(p >= 0 && p <= 1) {
			bad(key, "%v is outside [0, 1]", p)
		}
	}
	if c.MulStart > 0 && len(c.MulSizes) == 0 {
		bad("mul_sizes", "empty while mul_start is %v", c.MulStart)
	}
	var total float64
	for i, m := range c.MulSizes {
		if m.X < 1 || m.Y < 1 || m.X+m.Y > Width {
			bad(fmt.Sprintf("mul_sizes[%d]", i), "%dx%d digits, want at least 1 each and at most %d together", m.X, m.Y, Width)
		}
		if !(m.Weight >= 0) {
			bad(fmt.Sprintf("mul_sizes[%d].weight", i), "%v is negative", m.Weight)
		}
		total += m.Weight
	}
	if len(c.MulSizes) > 0 && !(total > 0) {
		bad("mul_sizes", "weights sum to %v", total)
	}
	if c.AddDigits[0] < 1 || c.AddDigits[1] < c.AddDigits[0] || c.AddDigits[1] > Width-1 {
		bad("add_digits", "%v, want 1 <= lo <= hi <= %d", c.AddDigits, Width-1)
	}
	if c.Distractors < 0 || c.Distractors > 4 {
		bad("distractors", "%d is outside [0, 4]", c.Distractors)
	}
	if c.TestPermille < 1 || c.TestPermille > 999 {
		bad("test_permille", "%d is outside [1, 999]", c.TestPermille)
	}
	if len(errs) > 0 {
		return fmt.Errorf("world config: %w", errors.Join(errs...))
	}
	return nil
}

// The compact vocabulary of the templates.
var (
	names      = []string{"Ann", "Bob", "Cy", "Dot", "Eve", "Gus", "Ivy", "Max"}
	items      = []string{"pens", "cups", "eggs", "nails", "beads", "seeds", "cards", "coins"}
	containers = []string{"bags", "boxes", "jars", "packs", "trays", "crates"}
)

// Generator draws problems of one split. It is deterministic: the same
// config, seed and split give the same problems in the same order. A
// Generator is not safe for concurrent use; make one per goroutine.
type Generator struct {
	cfg   Config
	split Split
	rng   *rand.Rand
}

// NewGenerator returns a generator of problems of the given split.
func NewGenerator(cfg Config, seed uint64, split Split) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Generator{cfg: cfg, split: split, rng: rand.New(rand.NewPCG(seed, uint64(split)+0x9e3779b97f4a7c15))}, nil
}

// maxDraws bounds the draws Next makes to find a problem of its split. A
// split of one thousandth of the space needs about a thousand.
const maxDraws = 100_000

// Next returns the next problem of the generator's split.
func (g *Generator) Next() (*Problem, error) {
	for range maxDraws {
		p := g.draw()
		if SplitOf(p.Text, g.cfg.TestPermille) == g.split {
			p.Split = g.split
			p.ID = fmt.Sprintf("%016x", hashText(p.Text))
			return p, nil
		}
	}
	return nil, fmt.Errorf("generate %s problem: none in %d draws", g.split, maxDraws)
}

// Generate returns n distinct problems of a split, deterministic from the
// seed.
func Generate(cfg Config, seed uint64, split Split, n int) ([]*Problem, error) {
	g, err := NewGenerator(cfg, seed, split)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, n)
	out := make([]*Problem, 0, n)
	for misses := 0; len(out) < n; {
		p, err := g.Next()
		if err != nil {
			return nil, err
		}
		if seen[p.ID] {
			if misses++; misses > 20*n+1000 {
				return nil, fmt.Errorf("generate %d %s problems: only %d distinct ones found", n, split, len(out))
			}
			continue
		}
		seen[p.ID] = true
		out = append(out, p)
	}
	return out, nil
}

// part is one independent quantity under construction.
type part struct {
	name, item string
	sentences  []string
	value      int64
	ref        int // the step holding value, or Literal
}

// draw builds one problem, of either split.
func (g *Generator) draw() *Problem {
	c := g.cfg
	r := g.rng
	n := c.MinSteps + r.IntN(c.MaxSteps-c.MinSteps+1)
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	item := pick(items)
	p := &Problem{}
	nameIdx := r.Perm(len(names))

	var parts []*part
	var counts []int
	if n >= 3 && r.Float64() < c.Parallel {
		k := 1 + r.IntN(n-2) // steps of part 0; n-1-k of part 1
		counts = []int{k, n - 1 - k}
	} else {
		counts = []int{n}
	}
	for pi, k := range counts {
		pt := &part{name: names[nameIdx[pi]], item: item, ref: Literal}
		g.buildPart(p, pt, pi, k)
		parts = append(parts, pt)
	}
	var sentences []string
	for _, pt := range parts {
		sentences = append(sentences, pt.sentences...)
	}
	var question string
	if len(parts) == 1 {
		question = fmt.Sprintf("How many %s does %s have?", item, parts[0].name)
	} else {
		a, b := parts[0], parts[1]
		if a.value != b.value && r.IntN(2) == 0 {
			if a.value < b.value {
				a, b = b, a
			}
			p.addStep(Sub, a, b.value, b.ref, -1)
			question = fmt.Sprintf("How many more %s does %s have than %s?", item, a.name, b.name)
		} else {
			p.addStep(Add, a, b.value, b.ref, -1)
			question = fmt.Sprintf("How many %s do they have in all?", item)
		}
	}
	for range r.IntN(c.Distractors + 1) {
		d := g.distractor(item, names[nameIdx[r.IntN(len(counts)+1)]])
		at := r.IntN(len(sentences) + 1)
		sentences = append(sentences[:at], append([]string{d}, sentences[at:]...)...)
	}
	p.Text = strings.Join(append(sentences, question), " ")
	p.Answer = p.Steps[len(p.Steps)-1].Result
	return p
}

// buildPart writes the sentences and steps of part pi with k steps.
func (g *Generator) buildPart(p *Problem, pt *part, pi, k int) {
	c := g.cfg
	r := g.rng
	if r.Float64() < c.MulStart {
		m := g.mulSize()
		x, y := g.number(m.X), g.number(m.Y)
		for x*y >= maxQuantity {
			x, y = g.number(m.X), g.number(m.Y)
		}
		pt.sentences = append(pt.sentences, fmt.Sprintf("%s has %d %s of %d %s.", pt.name, x, containers[r.IntN(len(containers))], y, pt.item))
		pt.value, pt.ref = x, Literal
		p.addStep(Mul, pt, y, Literal, pi)
		k--
	} else {
		pt.value = g.number(c.AddDigits[0] + r.IntN(c.AddDigits[1]-c.AddDigits[0]+1))
		pt.sentences = append(pt.sentences, fmt.Sprintf("%s has %d %s.", pt.name, pt.value, pt.item))
	}
	for ; k > 0; k-- {
		y := g.number(c.AddDigits[0] + r.IntN(c.AddDigits[1]-c.AddDigits[0]+1))
		times := int64(2 + r.IntN(8))
		switch {
		case r.Float64() < c.Times && pt.value*times < maxQuantity:
			pt.sentences = append(pt.sentences, fmt.Sprintf("%s then has %d times as many.", pt.name, times))
			p.addStep(Mul, pt, times, Literal, pi)
		case pt.value > 1 && (r.IntN(2) == 0 || pt.value+y >= maxQuantity):
			y = min(y, pt.value-1)
			pt.sentences = append(pt.sentences, fmt.Sprintf("%s gives away %d.", pt.name, y))
			p.addStep(Sub, pt, y, Literal, pi)
		default:
			pt.sentences = append(pt.sentences, fmt.Sprintf("%s gets %d more.", pt.name, y))
			p.addStep(Add, pt, y, Literal, pi)
		}
	}
}

// addStep appends the step pt.value op y and makes its result the part's
// value. y comes from step yRef or the text.
func (p *Problem) addStep(op Op, pt *part, y int64, yRef, partIdx int) {
	s := Step{Op: op, X: Operand{Ref: pt.ref, Value: pt.value}, Y: Operand{Ref: yRef, Value: y}, Part: partIdx}
	s.Result = op.Apply(s.X.Value, s.Y.Value)
	p.Steps = append(p.Steps, s)
	pt.value, pt.ref = s.Result, len(p.Steps)-1
}

// mulSize draws a product size class by weight.
func (g *Generator) mulSize() MulSize {
	var total float64
	for _, m := range g.cfg.MulSizes {
		total += m.Weight
	}
	u := g.rng.Float64() * total
	for _, m := range g.cfg.MulSizes {
		if u -= m.Weight; u < 0 {
			return m
		}
	}
	return g.cfg.MulSizes[len(g.cfg.MulSizes)-1]
}

// number draws a number of exactly d digits. A one-digit number is 2..9,
// since 0 and 1 make trivial steps.
func (g *Generator) number(d int) int64 {
	if d <= 1 {
		return int64(2 + g.rng.IntN(8))
	}
	lo := pow10(d - 1)
	return lo + g.rng.Int64N(9*lo)
}

// distractor is a sentence with a number the question does not need.
func (g *Generator) distractor(item, name string) string {
	r := g.rng
	if r.IntN(2) == 0 {
		return fmt.Sprintf("%s is %d years old.", name, 5+r.IntN(80))
	}
	other := items[r.IntN(len(items))]
	for other == item {
		other = items[r.IntN(len(items))]
	}
	return name + " has " + strconv.Itoa(2+r.IntN(98)) + " " + other + "."
}

// Distinct estimates how many distinct problems a config can generate. It
// uses capture-recapture over two independent samples of n: with m problems
// in both, about n*n/m exist. With no overlap it returns a lower bound, n*n,
// and ok false.
func Distinct(cfg Config, seed uint64, n int) (estimate float64, ok bool, err error) {
	sample := func(s uint64) (map[string]bool, error) {
		g, err := NewGenerator(cfg, s, Train)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for range n {
			p, err := g.Next()
			if err != nil {
				return nil, err
			}
			seen[p.ID] = true
		}
		return seen, nil
	}
	a, err := sample(seed)
	if err != nil {
		return 0, false, err
	}
	b, err := sample(seed + 1)
	if err != nil {
		return 0, false, err
	}
	m := 0
	for id := range b {
		if a[id] {
			m++
		}
	}
	if m == 0 {
		return float64(len(a)) * float64(len(b)), false, nil
	}
	return float64(len(a)) * float64(len(b)) / float64(m), true, nil
}
