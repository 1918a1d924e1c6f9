package world

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/tokenizer"
)

// TestSolverProbe is the learnability probe of the solver's format: it
// trains a tiny model from scratch on SolverCorpus for WORLD_PROBE_SECONDS
// (default 120) and prints its greedy exact-match accuracy per operation
// and size, inside and outside the solver's coverage. Not in the default
// run (WORLD_PROBE_OPS="+" trains on sums only, a diagnostic):
//
//	WORLD_PROBE=1 go test ./world -run TestSolverProbe -v -timeout 30m
func TestSolverProbe(t *testing.T) {
	if os.Getenv("WORLD_PROBE") == "" {
		t.Skip("set WORLD_PROBE=1 to train and grade a tiny solver")
	}
	budget := 120 * time.Second
	if s := os.Getenv("WORLD_PROBE_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("WORLD_PROBE_SECONDS=%q: %v", s, err)
		}
		budget = time.Duration(n) * time.Second
	}
	ctx := context.Background()
	problems, err := Generate(DefaultConfig(), 1, Train, 2000)
	if err != nil {
		t.Fatal(err)
	}
	corpus := SolverCorpus(problems, 2, 40_000)
	if ops := os.Getenv("WORLD_PROBE_OPS"); ops != "" { // a diagnostic: train on these operations only
		kept := corpus[:0]
		for _, tr := range corpus {
			op, _, _, err := ParseExpr(tr.Messages[1].Content)
			if err == nil && strings.ContainsRune(ops, rune(op)) {
				kept = append(kept, tr)
			}
		}
		corpus = kept
	}
	seqs := make([][]int, len(corpus))
	weights := make([][]float32, len(corpus))
	maxLen := 0
	for i, tr := range corpus {
		ids, spans := tr.Tokens()
		w := make([]float32, len(ids))
		for _, sp := range spans {
			if sp.Role == delegate.RoleAssistant {
				for j := sp.Body; j < sp.End; j++ {
					w[j] = 1
				}
			}
		}
		seqs[i], weights[i] = ids, w
		maxLen = max(maxLen, len(ids))
	}
	cfg := nn.Config{Vocab: tokenizer.VocabSize, Dim: 64, Layers: 2, Heads: 4, Hidden: 192, Context: 96}.WithDefaults()
	if maxLen > cfg.Context {
		t.Fatalf("longest solver transcript %d tokens exceeds context %d", maxLen, cfg.Context)
	}
	p, err := nn.Alloc(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Init(1)
	const B = 32
	T := maxLen - 1
	batch := func(k int) nn.Batch {
		b := nn.Batch{B: B, T: T}
		for s := range B {
			ids, w := seqs[(k*B+s)%len(seqs)], weights[(k*B+s)%len(seqs)]
			for j := range T {
				in, tg, wt := 0, 0, float32(0)
				if j+1 < len(ids) {
					in, tg, wt = ids[j], ids[j+1], w[j+1]
				}
				b.Inputs, b.Targets, b.Weights = append(b.Inputs, in), append(b.Targets, tg), append(b.Weights, wt)
			}
		}
		return b
	}
	tc := nn.TrainConfig{AdamW: nn.DefaultAdamW(), Schedule: nn.Schedule{Warmup: 30, Total: 100_000, MaxLR: 3e-3, MinLR: 3e-4}, ClipNorm: 1}
	tr, err := nn.NewTrainer(p, tc)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	step := 0
	var last nn.StepStats
	for ; step < 10; step++ { // calibrate the schedule's length on the first steps
		if last, err = tr.Step(ctx, []nn.Batch{batch(step)}); err != nil {
			t.Fatal(err)
		}
	}
	per := time.Since(start) / time.Duration(step)
	tc.Schedule.Total = max(int(budget/per), 40)
	tr2, err := nn.NewTrainer(p, tc)
	if err != nil {
		t.Fatal(err)
	}
	tr2.Opt = tr.Opt
	for ; time.Since(start) < budget; step++ {
		if last, err = tr2.Step(ctx, []nn.Batch{batch(step)}); err != nil {
			t.Fatal(err)
		}
		if step%100 == 0 {
			t.Logf("step %d loss %.4f lr %.5f", step, last.Loss, last.LR)
		}
	}
	trained := time.Since(start)

	eng, err := nn.NewEngine(p, nn.EngineConfig{MaxBatch: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	rng := rand.New(rand.NewPCG(77, 78))
	type row struct {
		size    SolverSize
		right   int
		n       int
		covered bool
	}
	var rows []row
	const perSize = 40
	for _, covered := range []bool{true, false} {
		for _, sz := range SolverSizes(covered) {
			var reqs []nn.GenRequest
			var want []int64
			for range perSize {
				x, y := sz.Question(rng)
				st := SolverTranscript(sz.Op, x, y)
				reqs = append(reqs, nn.GenRequest{
					Prompt: tokenizer.Render(st.Messages[:2], nil, true), MaxNew: cfg.Context, StopTokens: []int{tokenizer.End},
				})
				want = append(want, sz.Op.apply(x, y))
			}
			res, err := eng.GenerateAll(ctx, reqs)
			if err != nil {
				t.Fatal(err)
			}
			r := row{size: sz, n: perSize, covered: covered}
			for i, g := range res {
				msg, _ := tokenizer.ParseAssistant(g.Tokens)
				if Correct(msg.Content, want[i]) {
					r.right++
				}
				if i == 0 {
					t.Logf("%s: %s -> %q (want %d)", sz, tokenizer.Decode(reqs[i].Prompt[len(reqs[i].Prompt)-12:]), msg.Content, want[i])
				}
			}
			rows = append(rows, r)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].size.Op < rows[j].size.Op })
	fmt.Printf("solver probe: %d params, %d steps of %dx%d in %v (loss %.4f), greedy exact match on %d questions per size\n",
		len(p.Data), step, B, T, trained.Round(time.Second), last.Loss, perSize)
	for _, r := range rows {
		fmt.Printf("  %-8s covered=%-5v %3d/%d\n", r.size, r.covered, r.right, r.n)
	}
}
