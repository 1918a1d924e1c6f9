package rl

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
)

// handGroups builds a step of groups by hand.
// It takes each rollout's reward and number of policy calls and tokens.
// A negative reward marks a failed rollout. The advantages are left to the trainer.
func handGroups(t *testing.T, rewards [][]float64) []Group {
	t.Helper()
	var groups []Group
	id := 1
	for _, grp := range rewards {
		var g Group
		for k, r := range grp {
			if r < 0 {
				g.Failed++
				g.FirstFailure = "deadline"
				continue
			}
			// k+1 tokens in a first call, and a second call for odd k.
			nodes := []*delegate.Node{callNode(id, toyRole, []int{1, 2}, slices.Repeat([]int{4}, k+1))}
			id++
			if k%2 == 1 {
				nodes = append(nodes, callNode(id, toyRole, []int{1, 2, 3}, []int{5, 6}))
				id++
			}
			nodes = append(nodes, callNode(id, "sub", []int{1}, []int{7, 7, 7}))
			id++
			eps, err := Episodes(traceOf(nodes...), toyRole, 32)
			if err != nil {
				t.Fatal(err)
			}
			g.Rollouts = append(g.Rollouts, ScoredRollout{Episodes: eps, Reward: r, Correct: r > 0.5, Scalars: map[string]float64{"r": r}})
		}
		groups = append(groups, g)
	}
	return groups
}

func TestScoreAdvantagesAndNormalisation(t *testing.T) {
	rewards := [][]float64{{1, 0, 0.5, 0}, {1, 1, 1, -1}, {0, 1, -1, 0.25}}
	for _, est := range []reward.Estimator{reward.GRPO, reward.DrGRPO, reward.RLOO} {
		for _, norm := range []Norm{NormSeqMean, NormTokenSum, NormTokenMean} {
			t.Run(string(est)+"/"+string(norm), func(t *testing.T) {
				cfg := toyConfig(t.TempDir())
				cfg.GroupSize, cfg.ItemsPerStep = 4, 3
				cfg.Estimator, cfg.Norm = est, norm
				p := tinyParams(t, 32, 1)
				tr, err := New(cfg, p, &fixedSource{}, nil)
				if err != nil {
					t.Fatal(err)
				}
				groups := handGroups(t, rewards)
				m, err := tr.describe(1, groups)
				if err != nil {
					t.Fatal(err)
				}
				seqs, err := tr.sequences(1, m, groups)
				if err != nil {
					t.Fatal(err)
				}
				if m.FailedRollouts != 2 || m.DegenerateGroups != 1 || m.Groups != 3 {
					t.Errorf("failed %d, degenerate %d, groups %d; want 2, 1, 3", m.FailedRollouts, m.DegenerateGroups, m.Groups)
				}
				// 10 successful rollouts: 10 first calls, 5 second calls.
				if m.Sequences != 15 {
					t.Errorf("sequences = %d, want 15", m.Sequences)
				}
				if got, want := m.Reward, (1+0+0.5+0+1+1+1+0+1+0.25)/10; math.Abs(got-want) > 1e-12 {
					t.Errorf("mean reward = %v, want %v", got, want)
				}
				// Per group, the advantages of its rollouts sum to zero;
				// every call of a rollout carries the rollout's advantage.
				k := 0
				var coefSum float64
				var tokens int
				for gi, grp := range rewards {
					var sum float64
					for g, r := range grp {
						if r < 0 {
							continue
						}
						a := seqs[k].Adv
						sum += a
						calls := 1 + g%2
						for c := range calls {
							if seqs[k+c].Adv != a {
								t.Errorf("group %d rollout %d: calls have advantages %v and %v", gi, g, a, seqs[k+c].Adv)
							}
							coefSum += seqs[k+c].Coef * float64(len(seqs[k+c].Completion))
							tokens += len(seqs[k+c].Completion)
						}
						k += calls
					}
					if math.Abs(sum) > 1e-12 {
						t.Errorf("group %d: advantages sum to %v, want 0", gi, sum)
					}
				}
				if k != len(seqs) {
					t.Fatalf("%d sequences, walked %d", len(seqs), k)
				}
				if m.PolicyTokens != tokens {
					t.Errorf("policy tokens = %d, want %d", m.PolicyTokens, tokens)
				}
				want := 1.0 // seq-mean and token-mean: coefficients are a mean
				if norm == NormTokenSum {
					want = float64(tokens) / float64(cfg.MaxNewTokens*cfg.GroupSize*cfg.ItemsPerStep)
				}
				if math.Abs(coefSum-want) > 1e-12 {
					t.Errorf("Σ coefficients over tokens = %v, want %v", coefSum, want)
				}
			})
		}
	}
}

// sampledSeqs runs the toy source's rollouts of item 0 and returns their
// episodes with alternating advantages and seq-mean coefficients.
func sampledSeqs(t *testing.T, src *toySource, n int) []trainSeq {
	t.Helper()
	var seqs []trainSeq
	for i := range n {
		tr, _, err := src.rollout(context.Background(), 0, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		eps, err := Episodes(tr, toyRole, 64)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range eps {
			seqs = append(seqs, trainSeq{Episode: e, Adv: float64(2*(i%2) - 1), Coef: 1 / float64(len(e.Completion)*n)})
		}
	}
	return seqs
}

func TestRatioIsOneInTheFirstEpoch(t *testing.T) {
	cfg := toyConfig(t.TempDir())
	tr, env, _ := newToy(t, cfg, nil)
	seqs := sampledSeqs(t, env, 8)
	var want float64
	var tokens int
	for _, s := range seqs {
		want -= s.Coef * s.Adv * float64(len(s.Completion)) // r = 1: pg = −A
		tokens += len(s.Completion)
	}
	st, err := tr.l.update(context.Background(), seqs, 1e-2, true)
	if err != nil {
		t.Fatal(err)
	}
	if st.ClipFrac != 0 {
		t.Errorf("clip fraction = %v, want 0", st.ClipFrac)
	}
	if math.Abs(st.PGLoss-want) > 1e-12 {
		t.Errorf("pg loss = %v, want %v (every ratio 1)", st.PGLoss, want)
	}
	if st.Tokens != tokens || st.Updates != 1 {
		t.Errorf("tokens %d, updates %d; want %d, 1", st.Tokens, st.Updates, tokens)
	}
	if st.LogprobGap > 1e-3 || st.LogprobGap < 0 {
		t.Errorf("sampler and trainer logprobs differ by %v", st.LogprobGap)
	}
	t.Logf("largest sampler/trainer logprob gap %.2g", st.LogprobGap)
}

func TestLaterEpochsClipAndKL(t *testing.T) {
	cfg := toyConfig(t.TempDir())
	cfg.Epochs = 4
	cfg.KLBeta = 0.1
	cfg.ClipEps = 0.05
	tr, env, _ := newToy(t, cfg, nil)
	seqs := sampledSeqs(t, env, 8)
	st, err := tr.l.update(context.Background(), seqs, 5e-2, true)
	if err != nil {
		t.Fatal(err)
	}
	if st.ClipFrac <= 0 || st.KL <= 0 || st.Updates != 4 {
		t.Errorf("clip fraction %v, kl %v, updates %d; want both positive after 4 epochs at a high rate", st.ClipFrac, st.KL, st.Updates)
	}
}

func TestUpdateRejectsForeignLogprobs(t *testing.T) {
	cfg := toyConfig(t.TempDir())
	cfg.Epochs = 2
	tr, env, p := newToy(t, cfg, nil)
	seqs := sampledSeqs(t, env, 4)
	seqs[2].Behaviour = slices.Clone(seqs[2].Behaviour)
	seqs[2].Behaviour[0] -= 0.5
	before := slices.Clone(p.Data)
	_, err := tr.l.update(context.Background(), seqs, 1e-2, true)
	if err == nil || !strings.Contains(err.Error(), seqs[2].Node) {
		t.Fatalf("err = %v, want one naming node %s", err, seqs[2].Node)
	}
	if !slices.Equal(p.Data, before) {
		t.Error("a failed update changed the parameters")
	}

	// A cancelled update leaves the parameters as they were.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.l.update(ctx, sampledSeqs(t, env, 4), 1e-2, true); err == nil {
		t.Fatal("cancelled update: no error")
	}
	if !slices.Equal(p.Data, before) {
		t.Error("a cancelled update changed the parameters")
	}
}

// cancelWhen is a context that reports cancellation once cond holds.
type cancelWhen struct {
	context.Context
	cond func() bool
}

func (c cancelWhen) Err() error {
	if c.cond() {
		return context.Canceled
	}
	return nil
}

func TestCancelledMidUpdateRestoresParameters(t *testing.T) {
	cfg := toyConfig(t.TempDir())
	cfg.Epochs = 3
	tr, env, p := newToy(t, cfg, nil)
	seqs := sampledSeqs(t, env, 4)
	before := slices.Clone(p.Data)
	m, v := slices.Clone(tr.l.opt.M.Data), slices.Clone(tr.l.opt.V.Data)
	ctx := cancelWhen{Context: context.Background(), cond: func() bool { return tr.l.opt.Steps >= 1 }}
	if _, err := tr.l.update(ctx, seqs, 1e-2, true); err == nil {
		t.Fatal("cancelled after the first epoch: no error")
	}
	if !slices.Equal(p.Data, before) || !slices.Equal(tr.l.opt.M.Data, m) || !slices.Equal(tr.l.opt.V.Data, v) || tr.l.opt.Steps != 0 {
		t.Error("an update cancelled after its first epoch left the parameters or moments changed")
	}
}

// An update without the logprob check takes the same step as one with it.
// With one epoch and no KL the check changes nothing but the error.
// With several epochs or a reference it still computes the old logprobs.
func TestUncheckedUpdateMatchesChecked(t *testing.T) {
	tests := []struct {
		name   string
		epochs int
		beta   float64
	}{
		{"one epoch", 1, 0},
		{"two epochs", 2, 0},
		{"kl", 1, 0.1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := toyConfig(t.TempDir())
			cfg.Epochs = tt.epochs
			cfg.KLBeta = tt.beta
			tr, env, p := newToy(t, cfg, nil)
			seqs := sampledSeqs(t, env, 4)
			start := slices.Clone(p.Data)
			want, err := tr.l.update(context.Background(), seqs, 1e-2, true)
			if err != nil {
				t.Fatal(err)
			}
			after := slices.Clone(p.Data)

			tr2, _, p2 := newToy(t, cfg, nil)
			if !slices.Equal(p2.Data, start) {
				t.Fatal("two toys start from different parameters")
			}
			got, err := tr2.l.update(context.Background(), seqs, 1e-2, false)
			if err != nil {
				t.Fatal(err)
			}
			var gap float64
			for i := range after {
				gap = max(gap, math.Abs(float64(after[i]-p2.Data[i])))
			}
			if gap > 1e-6 {
				t.Errorf("parameters differ by up to %v after checked and unchecked updates", gap)
			}
			if math.Abs(got.PGLoss-want.PGLoss) > 1e-6 || got.Updates != want.Updates || got.Tokens != want.Tokens {
				t.Errorf("unchecked: pg loss %v, %d updates, %d tokens; checked: %v, %d, %d",
					got.PGLoss, got.Updates, got.Tokens, want.PGLoss, want.Updates, want.Tokens)
			}
		})
	}
}

// A merged conversation takes the same step as its calls trained apart.
func TestMergedEpisodesTakeTheSameStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	tok := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = 3 + rng.IntN(200)
		}
		return out
	}
	lps := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = -1
		}
		return out
	}
	p1, c1, x, c2 := tok(5), tok(4), tok(3), tok(6)
	e1 := Episode{Node: "strong#1", Prompt: p1, Completion: c1, Behaviour: lps(4)}
	p2 := append(append(append([]int(nil), p1...), c1...), x...)
	e2 := Episode{Node: "strong#3", Prompt: p2, Completion: c2, Behaviour: lps(6)}
	other := Episode{Node: "strong#5", Prompt: tok(7), Completion: tok(2), Behaviour: lps(2)}
	// The conversation as Episodes reads it: e2's prompt continues e1's
	// whole sequence, so the gap x is masked between the two completions.
	nan := float32(math.NaN())
	conv := Episode{Node: "strong#1+strong#3", Calls: 2, Prompt: p1,
		Completion: slices.Concat(c1, x, c2),
		Behaviour:  slices.Concat(lps(4), []float32{nan, nan, nan}, lps(6)),
		Masked:     slices.Concat(make([]bool, 4), []bool{true, true, true}, make([]bool, 6))}
	merged := []Episode{conv, other}
	if got := merged[0].Generated(); got != 10 {
		t.Errorf("merged: %d generated tokens, want 10", got)
	}
	tests := []struct {
		name   string
		epochs int
		beta   float64
	}{{"one epoch", 1, 0}, {"epochs and kl", 2, 0.1}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := toyConfig(t.TempDir())
			cfg.Epochs, cfg.KLBeta = tt.epochs, tt.beta
			step := func(eps []Episode) []float32 {
				tr, _, p := newToy(t, cfg, nil)
				var seqs []trainSeq
				for i, e := range eps {
					seqs = append(seqs, trainSeq{Episode: e, Adv: 0.5 - float64(i%2), Coef: 0.1})
				}
				if _, err := tr.l.update(context.Background(), seqs, 1e-2, false); err != nil {
					t.Fatal(err)
				}
				return slices.Clone(p.Data)
			}
			// Advantages alternate by position: e1 and e2 get the same one
			// as the merged conversation, other the same as itself.
			together := step([]Episode{merged[0], merged[1]})
			sep := step([]Episode{e1, merged[1], e2})
			var gap float64
			for i := range together {
				gap = max(gap, math.Abs(float64(together[i]-sep[i])))
			}
			if gap > 1e-6 {
				t.Errorf("merged and separate calls: parameters differ by up to %v", gap)
			}
		})
	}
}
