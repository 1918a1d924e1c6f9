package transcript

import (
	"fmt"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/world"
)

// TestDesignFigures computes the figures docs/world.md gives from the
// design (expected reward and cost of every policy on 2000 validation
// problems of the default world, and the pretraining corpus's lengths)
// and checks what the documentation says of them: the selective policy
// is ahead of every input-independent rule and of random delegation,
// and the oracle is ahead of it. Print them with
//
//	go test ./world -run TestDesignFigures -v
func TestDesignFigures(t *testing.T) {
	ps, err := world.Generate(world.DefaultConfig(), 1, world.Validation, 2000)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Report(&b, ps, 1, world.DefaultPrices(), world.DefaultReward(), DesignAccuracy()); err != nil {
		t.Fatal(err)
	}
	t.Logf("default world, design accuracies %+v:\n%s", DesignAccuracy(), b.String())
	reward, costNone := map[string]float64{}, map[string]float64{}
	var ruleNames []string
	for line := range strings.SplitSeq(b.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 13 || f[0] == "protocol" {
			continue
		}
		name := strings.Join(f[:len(f)-12], " ")
		var v float64
		if _, err := fmt.Sscan(f[len(f)-1], &v); err != nil {
			continue
		}
		reward[name] = v
		if _, err := fmt.Sscan(f[len(f)-5], &v); err == nil {
			costNone[name] = v
		}
		if strings.HasPrefix(name, "route ") && (strings.Contains(name, "delegate") || strings.Contains(name, "never")) {
			ruleNames = append(ruleNames, name)
		}
	}
	if want := 1 << world.DefaultConfig().MaxSteps; len(ruleNames) != want {
		t.Fatalf("%d position rules in the report, want %d:\n%s", len(ruleNames), want, b.String())
	}
	sel := reward["route selective"]
	for _, r := range append(ruleNames, "route random 0.5", "single (alone)") {
		if !(sel > reward[r]+0.05) {
			t.Errorf("selective %.3f is not ahead of %s %.3f by 0.05", sel, r, reward[r])
		}
	}
	// The headline's bar: with nothing priced as cached, the selective
	// policy costs at least 40% less than solving alone, by design.
	if sc, alone := costNone["route selective"], costNone["single (alone)"]; !(sc <= 0.6*alone) {
		t.Errorf("selective costs %.0f against %.0f alone with nothing cached: %.1f%% less, want at least 40%%", sc, alone, 100*(1-sc/alone))
	}
	if !(reward["route oracle"] >= sel) {
		t.Errorf("oracle %.3f below selective %.3f", reward["route oracle"], sel)
	}
}
