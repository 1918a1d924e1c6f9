package transcript

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/world"
)

// TestDesignFigures computes the design figures of docs/world.md. They are
// every policy's expected reward and cost on 2000 validation problems of
// the default world, and the corpus's lengths. It checks what the docs say
// of them. The selective policy beats every input-independent rule and
// random delegation, and the oracle beats it. Print them with
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

// TestDigitsDesignFigures computes the digits world's design figures, as
// docs/world.md gives them. That world is DefaultConfig's problems with a
// solver that covers only products whose first factor is below 50. On 2000
// validation problems it measures the selective policy, the oracle, the
// threshold rule at 50, every position rule and random delegation; on the
// first 500, to keep the test short, every keyword rule and other
// thresholds. It checks that the oracle and the selective policy beat
// every position rule and every keyword rule by a clear margin, and that
// the threshold rule at 50 matches the selective policy and beats the
// other thresholds. Print them with
//
//	go test ./world/transcript -run TestDigitsDesignFigures -v
func TestDigitsDesignFigures(t *testing.T) {
	all, err := world.Generate(world.DefaultConfig(), 1, world.Validation, 2000)
	if err != nil {
		t.Fatal(err)
	}
	acc := DesignAccuracy()
	acc.Coverage = world.DigitsCoverage()
	prices, rew := world.DefaultPrices(), world.DefaultReward()
	route := func(pol world.Policy) func(*world.Problem) Episode {
		return func(p *world.Problem) Episode { return Route(p, pol) }
	}
	oracleAcc := acc
	oracleAcc.Covered = 1
	measure := func(ps []*world.Problem) (oracle, sel, threshold Stats) {
		return Measure("route oracle", ps, route(acc.Coverage.Selective), prices, rew, oracleAcc),
			Measure("route selective", ps, route(acc.Coverage.Selective), prices, rew, acc),
			Measure("route first factor below 50", ps, route(world.FirstFactorBelow(50)), prices, rew, acc)
	}

	var covered, products int
	for _, p := range all {
		for _, s := range p.Steps {
			if s.Op == world.Mul {
				products++
				if acc.Coverage.Covers(s.Op, s.X.Value, s.Y.Value) {
					covered++
				}
			}
		}
	}
	t.Logf("products covered: %d of %d (%.3f)", covered, products, float64(covered)/float64(products))
	if share := float64(covered) / float64(products); share < 0.3 || share > 0.7 {
		t.Errorf("covered share of products %.3f: want a real decision, between 0.3 and 0.7", share)
	}

	best := func(rows []Stats) Stats {
		b := rows[0]
		for _, r := range rows[1:] {
			if r.Reward > b.Reward {
				b = r
			}
		}
		return b
	}
	steps := world.DefaultConfig().MaxSteps
	positions := func(ps []*world.Problem) []Stats {
		var rows []Stats
		for mask := range uint(1) << steps {
			rows = append(rows, Measure("route "+world.PositionRuleName(mask, steps), ps, route(world.PositionRule(mask)), prices, rew, acc))
		}
		return rows
	}
	check := func(what string, oracle, sel, threshold Stats, rules map[string]Stats) {
		for kind, rule := range rules {
			if !(sel.Reward > rule.Reward+0.05) {
				t.Errorf("%s: selective %.3f is not ahead of the best %s rule (%s) %.3f by 0.05", what, sel.Reward, kind, rule.Name, rule.Reward)
			}
			if !(oracle.Reward > rule.Reward+0.05) {
				t.Errorf("%s: oracle %.3f is not ahead of the best %s rule (%s) %.3f by 0.05", what, oracle.Reward, kind, rule.Name, rule.Reward)
			}
		}
		if math.Abs(threshold.Reward-sel.Reward) > 1e-9 {
			t.Errorf("%s: threshold rule at 50: reward %.4f, want the selective policy's %.4f", what, threshold.Reward, sel.Reward)
		}
	}

	oracle, sel, threshold := measure(all)
	rows := append(positions(all), sel, oracle, threshold,
		Measure("route random 0.5", all, route(world.Random(0.5, rand.New(rand.NewPCG(1, 1)))), prices, rew, acc))
	var b strings.Builder
	if err := writeTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("digits world, 2000 problems, design accuracies %+v:\n%s", acc, b.String())
	check("2000 problems", oracle, sel, threshold, map[string]Stats{"position": best(rows[:1<<steps])})

	ps := all[:500]
	oracle, sel, threshold = measure(ps)
	var kinds []Stats
	for mask := range uint(1) << world.NumStepKinds {
		if mask>>uint(world.TimesAsMany)&1 == 1 {
			continue // no "times as many" in this world: the same rule as without the bit
		}
		kinds = append(kinds, Measure(world.KindRuleName(mask), ps, route(world.KindRule(mask)), prices, rew, acc))
	}
	thresholds := []Stats{threshold}
	for _, th := range []int64{10, 20, 30, 40, 45, 55, 60, 70, 80, 90, 100} {
		thresholds = append(thresholds, Measure(fmt.Sprintf("route first factor below %d", th), ps, route(world.FirstFactorBelow(th)), prices, rew, acc))
	}
	bp, bk, bt := best(positions(ps)), best(kinds), best(thresholds)
	for _, r := range []Stats{oracle, sel, bp, bk, bt, kinds[3]} {
		t.Logf("first 500: %-40s delegated %.2f  P(correct) %.3f  reward %.3f", r.Name, r.Delegated, r.PCorrect, r.Reward)
	}
	check("first 500 problems", oracle, sel, threshold, map[string]Stats{"position": bp, "keyword": bk})
	if bt.Name != threshold.Name {
		t.Errorf("best threshold rule %q (%.4f), want %q (%.4f)", bt.Name, bt.Reward, threshold.Name, threshold.Reward)
	}
}

// TestCorpusHasNoDigitsPolicy checks that the delegator's corpus shows no
// digits-world policy to undo. Route transcripts delegate a product as
// often whatever its first factor, so a rule on the digits must come from
// reward.
func TestCorpusHasNoDigitsPolicy(t *testing.T) {
	ps, err := world.Generate(world.DefaultConfig(), 5, world.Train, 3000)
	if err != nil {
		t.Fatal(err)
	}
	c, err := BuildCorpus(ps, DefaultMix(), 5)
	if err != nil {
		t.Fatal(err)
	}
	var routes []Transcript
	for _, tr := range c.Delegator {
		if tr.Kind == KindRoute {
			routes = append(routes, tr)
		}
	}
	if len(routes) != len(ps) {
		t.Fatalf("%d route transcripts for %d problems", len(routes), len(ps))
	}
	cov := world.DigitsCoverage()
	var n, delegated [2]int // by covered (1) or not (0)
	for i, p := range ps {
		var calls strings.Builder
		for _, m := range routes[i].Messages {
			for _, tc := range m.ToolCalls {
				calls.WriteString(tc.Arguments)
			}
		}
		for _, s := range p.Steps {
			if s.Op != world.Mul {
				continue
			}
			in := 0
			if cov.Covers(s.Op, s.X.Value, s.Y.Value) {
				in = 1
			}
			n[in]++
			if strings.Contains(calls.String(), `"`+s.Expr()+`"`) {
				delegated[in]++
			}
		}
	}
	rate := func(in int) float64 { return float64(delegated[in]) / float64(n[in]) }
	t.Logf("products delegated in the corpus: first factor below 50 %d/%d (%.3f), 50 or more %d/%d (%.3f)",
		delegated[1], n[1], rate(1), delegated[0], n[0], rate(0))
	if n[0] == 0 || n[1] == 0 || delegated[1] == 0 {
		t.Fatalf("products by coverage %v, delegated %v: nothing to compare", n, delegated)
	}
	// Never and always decide both products of a problem at once. So the
	// rates' noise is about 0.02 here: seeds 2 to 5 differ by 0.004 to
	// 0.036, both signs. A selective policy would differ by about 1.
	if d := math.Abs(rate(1) - rate(0)); d > 0.06 {
		t.Errorf("the corpus delegates products below 50 at %.3f and the others at %.3f: a selective policy (difference %.3f > 0.06)", rate(1), rate(0), d)
	}
}

// TestBandDesignFigures checks the band world's design before any RL, on
// training problems. At BandLambda the best threshold and keyword rules
// sit clearly below the oracle and clearly above never delegating.
func TestBandDesignFigures(t *testing.T) {
	ps, err := world.Generate(world.DefaultConfig(), 1, world.Train, 300)
	if err != nil {
		t.Fatal(err)
	}
	acc := DesignAccuracy()
	acc.Coverage = world.BandCoverage()
	oracleAcc := acc
	oracleAcc.Covered = 1
	prices, rew := world.DefaultPrices(), world.NamedReward("band")
	route := func(pol world.Policy) func(*world.Problem) Episode {
		return func(p *world.Problem) Episode { return Route(p, pol) }
	}
	best := func(rows []Stats) Stats {
		b := rows[0]
		for _, r := range rows[1:] {
			if r.Reward > b.Reward {
				b = r
			}
		}
		return b
	}
	oracle := Measure("route oracle", ps, route(acc.Coverage.Selective), prices, rew, oracleAcc)
	never := Measure("never delegate", ps, route(world.PositionRule(0)), prices, rew, acc)
	var kinds, thresholds []Stats
	for mask := range uint(1) << world.NumStepKinds {
		if mask>>uint(world.TimesAsMany)&1 == 1 {
			continue // no "times as many" in this world
		}
		kinds = append(kinds, Measure(world.KindRuleName(mask), ps, route(world.KindRule(mask)), prices, rew, acc))
	}
	for th := int64(10); th <= 100; th += 10 {
		thresholds = append(thresholds, Measure(fmt.Sprintf("first factor below %d", th), ps, route(world.FirstFactorBelow(th)), prices, rew, acc))
	}
	bk, bt := best(kinds), best(thresholds)
	for _, r := range []Stats{oracle, bt, bk, never} {
		t.Logf("%-50s delegated %.2f  P(correct) %.3f  reward %.3f", r.Name, r.Delegated, r.PCorrect, r.Reward)
	}
	for _, r := range []Stats{bk, bt} {
		if !(oracle.Reward > r.Reward+0.1) {
			t.Errorf("oracle %.3f is not ahead of %s %.3f by 0.1", oracle.Reward, r.Name, r.Reward)
		}
	}
	if b := best([]Stats{bk, bt}); !(b.Reward > never.Reward+0.05) {
		t.Errorf("best rule %s %.3f is not ahead of never delegating %.3f by 0.05", b.Name, b.Reward, never.Reward)
	}
}

// TestBandGatedReward checks the band world's gated reward on its
// transcripts. A right answer computed inline beats a broken answer after
// a call, which the graded reward gets the other way round. On every kind
// of item (both products in the band, both outside, one each) the
// oracle's choice earns the most of any set of products delegated.
func TestBandGatedReward(t *testing.T) {
	graded := world.NamedReward("band")
	gated, err := world.WorldReward(graded, world.RewardGated)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := world.Generate(world.DefaultConfig(), 1, world.Train, 300)
	if err != nil {
		t.Fatal(err)
	}
	cov := world.BandCoverage()

	// The broken answer of a greedy band run: a call, then 69 tokens.
	broken := world.Account{Delegator: delegate.Usage{CompletionTokens: 69}, SubagentCalls: 1}
	inline := Route(ps[0], world.Never).Bill(false)
	for _, tt := range []struct {
		name      string
		g         reward.Graded
		rightWins bool
	}{{"graded", graded, false}, {"gated", gated, true}} {
		right, wrong := world.RewardOf(tt.g, true, inline), world.RewardOf(tt.g, false, broken)
		if got := right > wrong; got != tt.rightWins {
			t.Errorf("%s: right inline %.3f > broken %.3f is %v, want %v", tt.name, right, wrong, got, tt.rightWins)
		}
	}

	kinds := map[string]int{}
	for _, p := range ps {
		var products []int
		inBand := 0
		for i, s := range p.Steps {
			if world.WorthDelegating(s) {
				products = append(products, i)
				if cov.Covers(s.Op, s.X.Value, s.Y.Value) {
					inBand++
				}
			}
		}
		kind := map[int]string{0: "both outside", 1: "mixed"}[inBand]
		if inBand == len(products) {
			kind = "both inside"
		}
		kinds[kind]++
		// Each set of products delegated: right only when the solver
		// covers every one it is handed.
		best, bestMask := math.Inf(-1), -1
		oracle := 0
		for mask := range 1 << len(products) {
			right := true
			for b, i := range products {
				s := p.Steps[i]
				if mask>>b&1 == 1 && !cov.Covers(s.Op, s.X.Value, s.Y.Value) {
					right = false
				}
				if cov.Covers(s.Op, s.X.Value, s.Y.Value) {
					oracle |= 1 << b
				}
			}
			pol := func(_ *world.Problem, i int) bool {
				for b, j := range products {
					if j == i {
						return mask>>b&1 == 1
					}
				}
				return false
			}
			r := world.RewardOf(gated, right, Route(p, pol).Bill(false))
			if r > best {
				best, bestMask = r, mask
			}
		}
		oracle &= 1<<len(products) - 1
		if bestMask != oracle {
			t.Fatalf("%s item %q: best set %b, the oracle's %b", kind, p.Text, bestMask, oracle)
		}
	}
	for _, k := range []string{"both inside", "both outside", "mixed"} {
		if kinds[k] == 0 {
			t.Errorf("no %s item among %d problems", k, len(ps))
		}
	}
	t.Logf("items by kind: %v", kinds)
}
