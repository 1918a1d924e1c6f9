package train

import (
	"math"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/world"
)

func TestReprice(t *testing.T) {
	it := Item{
		Delegator: delegate.Usage{PromptTokens: 1000, CachedTokens: 400, CompletionTokens: 100},
		Subagent:  delegate.Usage{PromptTokens: 50, CompletionTokens: 60},
	}
	cases := PriceCases(world.DefaultPrices())
	// By hand, in µ$: delegator 600·1 + 400·0.1 + 100·5 = 1140, solver
	// 50·0.2 + 60·1 = 70; output as input: 600 + 40 + 100 + 10 + 12; the
	// solver as the delegator: 1140 + 50 + 300; no cache discount: 1000 +
	// 500 + 70.
	want := []float64{1210, 762, 1490, 1570}
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if got := it.Reprice(c.Prices) * 1e6; math.Abs(got-want[i]) > 1e-9 {
				t.Errorf("got %.3f µ$, want %.3f", got, want[i])
			}
		})
	}
}

func TestPriceSensitivity(t *testing.T) {
	// row has n items, right of them correct, each with the delegator's
	// generated tokens gen and the solver's sub.
	row := func(arm string, n, right, gen, sub int) Row {
		r := Row{Arm: arm}
		for i := range n {
			r.Items = append(r.Items, Item{Correct: i < right,
				Delegator: delegate.Usage{PromptTokens: 100, CompletionTokens: gen},
				Subagent:  delegate.Usage{PromptTokens: sub, CompletionTokens: sub}})
		}
		return r
	}
	tab := &Table{Rows: []Row{
		row(ArmAlone, 10, 10, 400, 0),
		row(ruleName(1, 2), 10, 10, 300, 50),
		row(ArmTrained+" (step 9)", 10, 10, 150, 100),
	}}
	got := tab.PriceSensitivity(PriceCases(world.DefaultPrices()), []string{ArmAlone, ruleName(1, 2), ArmTrained, "absent"},
		ArmTrained, []string{ArmAlone, ruleName(1, 2)})
	// Default prices, µ$: alone 100 + 2000 = 2100; rule 100 + 1500 + 10 +
	// 50 = 1660; trained 100 + 750 + 20 + 100 = 970, 41.6% below the rule.
	// The solver as the delegator: rule 1600 + 50 + 250 = 1900, trained
	// 850 + 100 + 500 = 1450, 23.7% below it.
	for _, want := range []string{
		"| delegator alone (no delegation) | 2100 |",
		"| fixed rule: delegate step 1 | 1660 |",
		"| RL-trained delegator (step 9) | 970 |",
		"| 41.6% (delegate step 1) |",
		"| 23.7% (delegate step 1) |",
		"against delegator alone (no delegation)** | 53.8% (delegator alone (no delegation)) |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "absent") {
		t.Errorf("an arm without a row is written:\n%s", got)
	}
	if got := (&Table{}).PriceSensitivity(PriceCases(world.DefaultPrices()), []string{ArmAlone}, ArmTrained, nil); got != "" {
		t.Errorf("without the trained row: %q, want nothing", got)
	}
}
