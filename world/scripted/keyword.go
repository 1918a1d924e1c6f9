package scripted

import (
	"context"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/delegatelab/delegate/world"
)

// Cue is the wording of the sentence a step comes from: what a keyword
// rule reads.
type Cue uint8

// The cues, each a keyword of the world's templates.
const (
	CueNone      Cue = iota // no sentence with a keyword states the step
	CueOf                   // "Ann has 12 bags of 34 pens."
	CueTimes                // "Ann then has 3 times as many."
	CueGets                 // "Ann gets 12 more."
	CueGivesAway            // "Ann gives away 12."
	CueInAll                // the question "How many pens do they have in all?"
	CueMoreThan             // the question "How many more pens does Ann have than Bob?"
	numCues
)

// String is the cue's keyword.
func (c Cue) String() string {
	if c >= numCues {
		return "cue(" + strconv.Itoa(int(c)) + ")"
	}
	return [...]string{"no keyword", `"of"`, `"times"`, `"gets"`, `"gives away"`, `"in all"`, `"more … than"`}[c]
}

// sentenceCue is the cue of one sentence of a problem's text; question
// says it is the question.
func sentenceCue(s string, question bool) Cue {
	switch {
	case question && strings.Contains(s, " in all"):
		return CueInAll
	case question && strings.Contains(s, " more ") && strings.Contains(s, " than "):
		return CueMoreThan
	case question:
		return CueNone
	case strings.Contains(s, " times as many"):
		return CueTimes
	case strings.Contains(s, " gives away "):
		return CueGivesAway
	case strings.Contains(s, " gets "):
		return CueGets
	case strings.Contains(s, " of "):
		return CueOf
	}
	return CueNone
}

// StepCues returns the cue of each step of p, read from its text. The
// sentences with a keyword, in order, state the steps of the parts in
// order. A part's first sentence without a product has none, and neither
// has a distractor. The question states the step that combines the parts.
func StepCues(p *world.Problem) []Cue {
	text := strings.TrimSpace(p.Text)
	var stated []Cue
	question := CueNone
	for s := range strings.SplitSeq(text, ". ") {
		last := strings.HasSuffix(s, "?")
		c := sentenceCue(s, last)
		switch {
		case last:
			question = c
		case c != CueNone:
			stated = append(stated, c)
		}
	}
	out := make([]Cue, len(p.Steps))
	k := 0
	for i, s := range p.Steps {
		switch {
		case s.Part < 0:
			out[i] = question
		case k < len(stated):
			out[i] = stated[k]
			k++
		}
	}
	return out
}

// KeywordRule delegates a step when its sentence has one of the rule's
// keywords. Both operands, as the policy holds them, must also be at least
// MinOperand.
type KeywordRule struct {
	Cues       uint  // bit c set: delegate steps of Cue c
	MinOperand int64 // 0: no threshold
}

// Thresholds are the values of KeywordRule.MinOperand the search tries.
var Thresholds = []int64{0, 10, 100, 1000}

// Decider is the rule as a Decider.
func (k KeywordRule) Decider() Decider {
	return func(_ context.Context, p *world.Problem, i int, x, y int64) (bool, error) {
		return k.decide(StepCues(p)[i], x, y), nil
	}
}

func (k KeywordRule) decide(c Cue, x, y int64) bool {
	return k.Cues>>uint(c)&1 == 1 && min(x, y) >= k.MinOperand
}

// Name describes the rule: "delegate steps stated with "of" when both
// operands ≥ 100", "never delegate".
func (k KeywordRule) Name() string {
	if k.Cues == 0 {
		return "never delegate"
	}
	var cs []string
	for c := range numCues {
		if k.Cues>>uint(c)&1 == 1 {
			cs = append(cs, c.String())
		}
	}
	name := "delegate steps stated with " + strings.Join(cs, ", ")
	if k.MinOperand > 0 {
		name += fmt.Sprintf(" when both operands ≥ %d", k.MinOperand)
	}
	return name
}

// KeywordRules is the search space: every set of keywords with every
// threshold of Thresholds. Simplest come first: fewer keywords, then a
// lower threshold. The empty set, never delegating, comes once.
func KeywordRules() []KeywordRule {
	out := []KeywordRule{{}}
	for n := 1; n < int(numCues); n++ {
		for mask := uint(2); mask < 1<<numCues; mask += 2 { // bit 0, CueNone, never set
			if bits.OnesCount(mask) != n {
				continue
			}
			for _, t := range Thresholds {
				out = append(out, KeywordRule{Cues: mask, MinOperand: t})
			}
		}
	}
	return out
}

// Distinct returns the rules that decide differently on the steps of
// problems, taken with their true operands. Of rules that decide alike, it
// keeps the first. Those the search need not run twice. A solver's
// wrong answer can change a later operand, so rules merged here may
// differ on a run; the first of them is the one run.
func Distinct(rules []KeywordRule, problems []*world.Problem) []KeywordRule {
	cues := make([][]Cue, len(problems))
	for i, p := range problems {
		cues[i] = StepCues(p)
	}
	seen := map[string]bool{}
	var out []KeywordRule
	var sig []byte
	for _, k := range rules {
		sig = sig[:0]
		for i, p := range problems {
			for j, s := range p.Steps {
				b := byte('0')
				if k.decide(cues[i][j], s.X.Value, s.Y.Value) {
					b = '1'
				}
				sig = append(sig, b)
			}
		}
		if !seen[string(sig)] {
			seen[string(sig)] = true
			out = append(out, k)
		}
	}
	return out
}

// Best returns the rule of rules with the highest reward, the first of
// them on a tie; rewards[i] is rules[i]'s. ok is false with no rule or
// when the lengths differ.
func Best(rules []KeywordRule, rewards []float64) (best KeywordRule, reward float64, ok bool) {
	if len(rules) == 0 || len(rules) != len(rewards) {
		return KeywordRule{}, 0, false
	}
	b := 0
	for i := range rules {
		if rewards[i] > rewards[b] {
			b = i
		}
	}
	return rules[b], rewards[b], true
}
