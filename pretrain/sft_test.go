package pretrain

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/train"
	"github.com/delegatelab/delegate/tokenizer"
)

var tinyShape = nn.Config{Vocab: tokenizer.VocabSize, Dim: 16, Layers: 1, Heads: 2, Hidden: 32, Context: 40}.WithDefaults()

// tinyConfig is DefaultConfig with the tests' learning rate, 1e-2 down to
// 1e-3, changed by set.
func tinyConfig(set func(*Config)) Config {
	c := DefaultConfig()
	c.MaxLR, c.MinLR = 1e-2, 1e-3
	set(&c)
	return c
}

func tinyParams(t *testing.T) *nn.Params {
	t.Helper()
	p, err := nn.Alloc(tinyShape)
	if err != nil {
		t.Fatal(err)
	}
	p.Init(1)
	return p
}

// tinyExamples are conversations whose replies copy the question's digit.
func tinyExamples() []Example {
	var ex []Example
	for d := range 10 {
		q := string(rune('0' + d))
		ex = append(ex, FromMessages([]delegate.Message{delegate.User("say " + q), delegate.Assistant(q + q)}, nil))
	}
	return ex
}

func TestFromMessagesWeighsAssistantTokensOnly(t *testing.T) {
	msgs := []delegate.Message{delegate.System("s"), delegate.User("ab"), delegate.Assistant("cd"), delegate.User("e"), delegate.Assistant("f")}
	ex := FromMessages(msgs, nil)
	ids, spans := tokenizer.RenderSpans(msgs, nil, false)
	if !slices.Equal(ex.Tokens, ids) {
		t.Fatalf("tokens %v, want the rendering %v", ex.Tokens, ids)
	}
	var want []float32
	for range ids {
		want = append(want, 0)
	}
	for _, sp := range spans {
		if sp.Role == delegate.RoleAssistant {
			for i := sp.Body; i < sp.End; i++ {
				want[i] = 1
			}
		}
	}
	if !slices.Equal(ex.Weights, want) {
		t.Errorf("weights %v, want %v", ex.Weights, want)
	}
	// "cd<|end|>" and "f<|end|>": 5 weighted tokens, the <|end|>s included.
	var n int
	for _, w := range ex.Weights {
		if w != 0 {
			n++
		}
	}
	if n != 5 {
		t.Errorf("%d weighted tokens, want 5", n)
	}
}

func TestBatchesMaskPaddingAndPrompts(t *testing.T) {
	ex := append(tinyExamples(), FromMessages([]delegate.Message{delegate.User("a much longer question"), delegate.Assistant("x")}, nil))
	b := newBatcher(ex, 4, 7)
	for step := range 20 {
		nb := b.batch(step)
		for s := range nb.B {
			for j := range nb.T {
				k := s*nb.T + j
				if nb.Weights[k] != 0 && nb.Targets[k] != tokenizer.End && !tokenizer.IsByte(nb.Targets[k]) {
					t.Fatalf("step %d: weighted target %d is a special token other than <|end|>", step, nb.Targets[k])
				}
			}
		}
		if again := b.batch(step); !slices.Equal(again.Inputs, nb.Inputs) || !slices.Equal(again.Weights, nb.Weights) {
			t.Fatalf("step %d: the batch differs when drawn again", step)
		}
	}
}

func TestTrainLearnsAndEvaluates(t *testing.T) {
	p := tinyParams(t)
	var evals int
	eval := func(context.Context, *nn.Params) (float64, string, error) {
		evals++
		return float64(evals), "ok", nil
	}
	var first, last float64
	res, err := Train(context.Background(), p, tinyExamples(), tinyConfig(func(c *Config) { c.Steps, c.Batch, c.Seed, c.EvalEvery = 60, 8, 3, 20 }), eval, func(pr Progress) {
		if pr.Step == 1 {
			first = pr.Loss
		}
		last = pr.Loss
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 60 || evals != 3 || res.Score != 3 {
		t.Errorf("steps %d, evals %d, score %v; want 60, 3, 3", res.Steps, evals, res.Score)
	}
	if !(last < first/2) {
		t.Errorf("loss went from %.3f to %.3f, want it at least halved", first, last)
	}
}

func TestTrainResumesExactly(t *testing.T) {
	ctx := context.Background()
	cfg := tinyConfig(func(c *Config) { c.Steps, c.Batch, c.Seed, c.SaveEvery = 30, 4, 5, 10 })

	whole := tinyParams(t)
	if _, err := Train(ctx, whole, tinyExamples(), cfg, nil, nil); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "state")
	cfg.StateDir = dir
	part := tinyParams(t)
	cctx, cancel := context.WithCancel(ctx)
	_, err := Train(cctx, part, tinyExamples(), cfg, nil, func(pr Progress) {
		if pr.Step == 17 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v, want context.Canceled", err)
	}
	resumed := tinyParams(t) // fresh weights: the state must overwrite them
	res, err := Train(ctx, resumed, tinyExamples(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 17 || res.Steps != 30 {
		t.Errorf("resumed at %d, ended at %d; want 17, 30", res.Resumed, res.Steps)
	}
	if !slices.Equal(resumed.Data, whole.Data) {
		t.Error("the resumed run's weights differ from the uninterrupted run's")
	}
}

// TestTimedRunInterruptedWhileCalibratingResumesTimed interrupts a timed run before its length is fixed.
// The resumed run calibrates again and trains past calibrationSteps,
// instead of ending as a run of that many.
func TestTimedRunInterruptedWhileCalibratingResumesTimed(t *testing.T) {
	ctx := context.Background()
	cfg := tinyConfig(func(c *Config) {
		c.Duration, c.Batch, c.Seed, c.SaveEvery, c.StateDir = time.Hour, 2, 5, 1000, filepath.Join(t.TempDir(), "state")
	})
	cctx, cancel := context.WithCancel(ctx)
	_, err := Train(cctx, tinyParams(t), tinyExamples(), cfg, nil, func(pr Progress) {
		if pr.Step == 5 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v, want context.Canceled", err)
	}
	// Resume with a short budget; stop it once it is past calibration.
	cfg.Duration = 50 * time.Millisecond
	var past atomic.Bool
	cctx, cancel = context.WithCancel(ctx)
	defer cancel()
	res, err := Train(cctx, tinyParams(t), tinyExamples(), cfg, nil, func(pr Progress) {
		if pr.Step > calibrationSteps {
			past.Store(true)
			cancel()
		}
	})
	if res.Resumed == 0 {
		t.Fatalf("the second run did not resume (%v)", err)
	}
	if !past.Load() && res.Steps <= calibrationSteps {
		t.Errorf("resumed timed run ended at step %d (err %v): it took the calibration's length for the run's", res.Steps, err)
	}
}

func TestTrainRejectsBadInput(t *testing.T) {
	long := Example{Tokens: make([]int, tinyShape.Context+2), Weights: make([]float32, tinyShape.Context+2)}
	tests := []struct {
		name string
		ex   []Example
		cfg  Config
	}{
		{"no examples", nil, tinyConfig(func(c *Config) { c.Steps = 1 })},
		{"no steps", tinyExamples(), DefaultConfig()},
		{"mismatched weights", []Example{{Tokens: []int{1, 2, 3}, Weights: []float32{1}}}, tinyConfig(func(c *Config) { c.Steps = 1 })},
		{"too long", []Example{long}, tinyConfig(func(c *Config) { c.Steps = 1 })},
		{"negative batch", tinyExamples(), tinyConfig(func(c *Config) { c.Steps, c.Batch = 1, -1 })},
		{"zero batch", tinyExamples(), tinyConfig(func(c *Config) { c.Steps, c.Batch = 1, 0 })},
		{"zero learning rate", tinyExamples(), tinyConfig(func(c *Config) { c.Steps, c.MaxLR, c.MinLR = 1, 0, 0 })},
		{"min above max", tinyExamples(), tinyConfig(func(c *Config) { c.Steps, c.MinLR = 1, 1 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Train(context.Background(), tinyParams(t), tt.ex, tt.cfg, nil, nil); err == nil {
				t.Error("nil error, want one")
			}
		})
	}
}

func TestResumeRejectsOtherShape(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	cfg := DefaultConfig()
	cfg.Steps, cfg.Batch, cfg.Seed, cfg.StateDir = 2, 2, 1, dir
	if _, err := Train(context.Background(), tinyParams(t), tinyExamples(), cfg, nil, nil); err != nil {
		t.Fatal(err)
	}
	other := tinyShape
	other.Hidden = 48
	p, err := nn.Alloc(other)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Steps = 4
	if _, err := Train(context.Background(), p, tinyExamples(), cfg, nil, nil); err == nil {
		t.Error("resuming a state of another shape: nil error")
	}
	// A state whose files disagree, as after an interrupted save, is refused too.
	if err := os.RemoveAll(filepath.Join(dir, "adam_m")); err != nil {
		t.Fatal(err)
	}
	if _, err := Train(context.Background(), tinyParams(t), tinyExamples(), cfg, nil, nil); err == nil {
		t.Error("resuming a state with no moments: nil error")
	}
}

// TestSaveEveryZero: 0 means no periodic save, and the state is still
// written after the last step.
func TestSaveEveryZero(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	var saved []int
	cfg := tinyConfig(func(c *Config) { c.Steps, c.Batch, c.SaveEvery, c.StateDir = 3, 2, 0, dir })
	_, err := Train(context.Background(), tinyParams(t), tinyExamples(), cfg, nil, func(pr Progress) {
		if _, err := os.Stat(dir); err == nil {
			saved = append(saved, pr.Step)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(saved) != 1 || saved[0] != 3 {
		t.Errorf("state present after steps %v, want only after 3", saved)
	}
	st, err := train.LoadState(dir, tinyShape)
	if err != nil || st == nil || st.Step != 3 || st.Total != 3 {
		t.Errorf("state %+v, %v; want one at step 3 of 3", st, err)
	}
}
