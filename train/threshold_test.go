package train

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/world"
)

// TestAcceptanceThreshold: a table with the threshold rule fitted on
// training items checks the trained reward against it, paired.
func TestAcceptanceThreshold(t *testing.T) {
	row := func(arm string, mean float64) Row {
		r := Row{Arm: arm, N: 50, Correct: 50, Accuracy: 1}
		for i := range 50 {
			rew := mean + 0.05*float64(i%3-1)
			r.Items = append(r.Items, Item{Correct: true, Reward: rew, Cost: 1e-3})
			r.Reward += rew / 50
		}
		return r
	}
	threshold := thresholdName(50)
	name := "RL-trained reward beats the threshold rule fitted on training items" + paired
	for _, c := range []struct {
		name    string
		trained float64
		want    bool
	}{
		{"trained above the rule", 0.70, true},
		{"trained at the rule", 0.67, false},
		{"trained below the rule", 0.60, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tab := &Table{BestThreshold: threshold, Rows: []Row{row(threshold, 0.67), row(ArmTrained+" (step 100)", c.trained)}}
			var got *Check
			for _, ch := range Acceptance(tab, ModeRoute) {
				if ch.Name == name {
					got = &ch
				}
			}
			if got == nil {
				t.Fatalf("no check %q", name)
			}
			if got.Pass != c.want || !strings.Contains(got.Detail, "("+threshold+")") {
				t.Errorf("pass %v (%s), want %v, naming %q", got.Pass, got.Detail, c.want, threshold)
			}
		})
	}
	for _, ch := range Acceptance(&Table{}, ModeRoute) {
		if ch.Name == name {
			t.Errorf("a table without the threshold rule has its check: %+v", ch)
		}
	}
}

// TestRunThresholdArm runs route where the solver's coverage narrows the
// products. The run fits the threshold rule on training items. It adds the
// rule to the table after the keyword rule, with its check. The default
// world's table has neither.
func TestRunThresholdArm(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Coverage = world.DigitsCoverage()
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Table.BestThreshold, ArmThreshold+": ") {
		t.Fatalf("best threshold %q, want a threshold rule", res.Table.BestThreshold)
	}
	var names []string
	for _, r := range res.Table.Rows {
		names = append(names, r.Arm)
	}
	want := routeArms(cfg, cfg.RL.Steps, res.Table.BestKeyword)
	at := slices.Index(want, res.Table.BestKeyword) + 1
	want = slices.Insert(want, at, res.Table.BestThreshold)
	if len(names) < len(want) || strings.Join(names[:len(want)], "|") != strings.Join(want, "|") {
		t.Errorf("arms %q, want %q first", names, want)
	}
	var checked bool
	for _, c := range res.Table.Checks {
		checked = checked || strings.Contains(c.Name, "threshold rule")
	}
	if !checked {
		t.Errorf("checks %+v, want one against the threshold rule", res.Table.Checks)
	}
}

// TestDesignCutFollowsCoverage checks that the design cut is the
// coverage's selective policy's. It is smaller where the solver covers
// fewer products, and the default world's with the zero coverage.
func TestDesignCutFollowsCoverage(t *testing.T) {
	cut := func(cov world.Coverage) float64 {
		t.Helper()
		cfg := tinyConfig(t)
		cfg.EvalItems, cfg.Coverage = 200, cov
		r, err := newRunner(cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.close()
		return r.designCut()
	}
	def, digits := cut(world.Coverage{}), cut(world.DigitsCoverage())
	if !(digits > 0 && digits < def) {
		t.Errorf("design cut %.3f under the digits coverage, %.3f under the default one: want 0 < digits < default", digits, def)
	}
}

// TestThresholdStakes checks what the threshold fit counts for a product:
// a wrong one loses the item but keeps the tokens it saved.
func TestThresholdStakes(t *testing.T) {
	for _, tt := range []struct {
		world      string
		gain, loss float64
	}{
		{"digits", 0.11, 0.89},
		{"band", 0.37, 0.63},
	} {
		gain, loss := thresholdStakes(world.NamedReward(tt.world))
		if math.Abs(gain-tt.gain) > 1e-9 || math.Abs(loss-tt.loss) > 1e-9 {
			t.Errorf("%s: gain %v, loss %v, want %v, %v", tt.world, gain, loss, tt.gain, tt.loss)
		}
	}
	// Gated, a wrong product saves nothing: it loses the item, at least 1.
	gated, err := world.WorldReward(world.NamedReward("band"), world.RewardGated)
	if err != nil {
		t.Fatal(err)
	}
	if gain, loss := thresholdStakes(gated); math.Abs(gain-0.37) > 1e-9 || loss != 1 {
		t.Errorf("band, gated: gain %v, loss %v, want 0.37, 1", gain, loss)
	}
}
