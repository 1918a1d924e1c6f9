package train

import (
	"fmt"
	"math"
	"strings"

	"github.com/delegatelab/delegate/world"
)

// PriceCase is a price table the table's items are priced again under.
type PriceCase struct {
	Name   string
	Prices world.Prices
}

// PriceCases are the price tables of the sensitivity check, from base. They
// are base itself, each model's output priced as its input, the solver priced
// as the delegator, and no discount for cached input. The cached tokens are
// those the run counted (Config.CacheMinTokens).
func PriceCases(base world.Prices) []PriceCase {
	flat := base
	flat.Delegator.Output, flat.Solver.Output = flat.Delegator.Input, flat.Solver.Input
	same := base
	same.Solver = same.Delegator
	nocache := base
	nocache.Delegator.CachedInput, nocache.Solver.CachedInput = base.Delegator.Input, base.Solver.Input
	return []PriceCase{
		{"the run's prices", base},
		{"output priced as input", flat},
		{"solver priced as the delegator", same},
		{"no discount for cached input", nocache},
	}
}

// Reprice is the item's cost under p, in dollars. Its delegator's tokens
// get the delegator's prices; every other role's get the solver's.
func (it Item) Reprice(p world.Prices) float64 {
	return p.Delegator.Cost(it.Delegator) + p.Solver.Cost(it.Subagent)
}

// repriced is a row's cost per item and cost of pass under p.
func repriced(r *Row, p world.Prices) (cost, perCorrect float64) {
	var right int
	for _, it := range r.Items {
		cost += it.Reprice(p)
		if it.Correct {
			right++
		}
	}
	perCorrect = math.Inf(1)
	if right > 0 {
		perCorrect = cost / float64(right)
	}
	if n := len(r.Items); n > 0 {
		cost /= float64(n)
	}
	return cost, perCorrect
}

// PriceSensitivity writes, per case, the cost per item of the arms, with rows
// matched as by Row. It adds the trained arm's saving in cost of pass against
// the cheapest baseline per correct answer. Then it gives the saving against
// the first baseline alone. Arms without a row are left out. It is computed
// from the stored items alone.
func (t *Table) PriceSensitivity(cases []PriceCase, arms []string, trained string, baselines []string) string {
	var rows []*Row
	for _, a := range arms {
		if r := t.Row(a); r != nil {
			rows = append(rows, r)
		}
	}
	tr := t.Row(trained)
	if tr == nil || len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| arm |")
	for _, c := range cases {
		b.WriteString(" " + c.Name + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(cases)) + "\n")
	for _, r := range rows {
		b.WriteString("| " + r.Arm + " |")
		for _, c := range cases {
			cost, _ := repriced(r, c.Prices)
			fmt.Fprintf(&b, " %.0f |", cost*1e6)
		}
		b.WriteString("\n")
	}
	b.WriteString("| **trained's saving per correct answer against the cheapest baseline per correct answer** |")
	t.writeSavings(&b, cases, tr, baselines)
	if len(baselines) > 0 {
		fmt.Fprintf(&b, "| **trained's saving per correct answer against %s** |", baselines[0])
		t.writeSavings(&b, cases, tr, baselines[:1])
	}
	return b.String()
}

// writeSavings writes tr's saving in cost of pass for each case, and ends
// the line. The saving is against the cheapest baseline per correct
// answer.
func (t *Table) writeSavings(b *strings.Builder, cases []PriceCase, tr *Row, baselines []string) {
	for _, c := range cases {
		_, mine := repriced(tr, c.Prices)
		best, bestArm := math.Inf(1), ""
		for _, a := range baselines {
			r := t.Row(a)
			if r == nil {
				continue
			}
			if _, v := repriced(r, c.Prices); v < best {
				best, bestArm = v, r.Arm
			}
		}
		if math.IsInf(best, 1) || math.IsInf(mine, 1) {
			b.WriteString(" – |")
			continue
		}
		fmt.Fprintf(b, " %.1f%% (%s) |", 100*(1-mine/best), shortArm(bestArm))
	}
	b.WriteString("\n")
}

// shortArm is an arm's name without its kind: "delegate step 1" for
// "fixed rule: delegate step 1".
func shortArm(arm string) string {
	if _, rest, ok := strings.Cut(arm, ": "); ok {
		return rest
	}
	return arm
}
