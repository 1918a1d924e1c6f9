// Package pretrain trains an nn model on rendered chat transcripts, supervised.
// The loss counts only the tokens an assistant generated, which
// tokenizer.RenderSpans locates. So a model learns to write its replies and
// never to predict prompts, tool results or other models' words.
// Training is deterministic from a seed and keeps a resumable state on
// disk. Run is the recipe of the shipped models; GradeSolver and
// GradeDelegator grade them on held-out items.
package pretrain

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/train"
	"github.com/delegatelab/delegate/tokenizer"
)

// Example is one training sequence. Weights[i] scales the loss of
// predicting Tokens[i] from Tokens[:i]; Weights[0] is unused (nothing
// predicts the first token).
type Example struct {
	Tokens  []int
	Weights []float32
}

// FromMessages renders a conversation and weighs only the assistant's tokens.
// It renders with the chat template and weighs with 1 every token an
// assistant message generated, from the token after <|assistant|> to its
// closing <|end|> included. Everything else weighs 0.
func FromMessages(msgs []delegate.Message, tools []delegate.Tool) Example {
	ids, spans := tokenizer.RenderSpans(msgs, tools, false)
	w := make([]float32, len(ids))
	for _, sp := range spans {
		if sp.Role == delegate.RoleAssistant {
			for i := sp.Body; i < sp.End; i++ {
				w[i] = 1
			}
		}
	}
	return Example{Tokens: ids, Weights: w}
}

// Config sets a training run. DefaultConfig holds the defaults; a zero
// field means zero, except Warmup.
type Config struct {
	// Steps is the number of optimizer steps, the schedule's length.
	Steps int
	// Duration, when positive and Steps is 0, sets Steps from the first 20 steps' speed.
	// Training then ends after about Duration. The result then depends on
	// the machine's speed; Steps does not.
	Duration time.Duration
	// Batch is the sequences per step, at least 1.
	Batch int
	// MaxLR and MinLR bound the cosine schedule; MaxLR is positive.
	MaxLR, MinLR float64
	// Warmup is the schedule's warmup in steps. 0 takes a twentieth of
	// the run's steps: a timed run knows them only once calibrated.
	Warmup int
	// WeightDecay is AdamW's decay; 0 decays nothing.
	WeightDecay float64
	// ClipNorm caps the gradient's global norm; 0 clips nothing.
	ClipNorm float64
	// Seed fixes the order of the batches, and the initial weights when
	// starting from scratch.
	Seed uint64
	// EvalEvery runs Train's eval function every so many steps and after the
	// last. 0 runs it only after the last.
	EvalEvery int
	// SaveEvery saves the resumable state every so many steps and after the
	// last, when StateDir is set. 0 saves only after the last.
	SaveEvery int
	// StateDir holds the resumable state; "" keeps none. A directory that
	// already holds a state of the same model resumes from it.
	StateDir string
}

// DefaultConfig returns the defaults; Steps or Duration is left to set.
// Batches are of 16, the learning rate goes from 3e-3 down to 3e-4, decay
// is 0.01, the gradient is clipped at norm 1, and the state is saved every
// 100 steps.
func DefaultConfig() Config {
	return Config{Batch: 16, MaxLR: 3e-3, MinLR: 3e-4, WeightDecay: 0.01, ClipNorm: 1, SaveEvery: 100}
}

// Validate checks the ranges of the fields.
func (c Config) Validate() error {
	switch {
	case c.Steps < 0 || (c.Steps == 0 && c.Duration <= 0):
		return fmt.Errorf("sft config: steps %d: want a positive number of steps or a positive duration", c.Steps)
	case c.Batch < 1:
		return fmt.Errorf("sft config: batch %d: want at least 1", c.Batch)
	case c.Warmup < 0, c.EvalEvery < 0, c.SaveEvery < 0:
		return fmt.Errorf("sft config: warmup %d, eval every %d and save every %d must not be negative", c.Warmup, c.EvalEvery, c.SaveEvery)
	case !(c.MaxLR > 0) || math.IsInf(c.MaxLR, 0) || !(c.MinLR >= 0) || c.MinLR > c.MaxLR:
		return fmt.Errorf("sft config: learning rates %v..%v: want 0 <= min <= max, max positive and finite", c.MinLR, c.MaxLR)
	case !(c.WeightDecay >= 0) || !(c.ClipNorm >= 0):
		return fmt.Errorf("sft config: weight decay %v and clip norm %v must not be negative", c.WeightDecay, c.ClipNorm)
	}
	return nil
}

// Eval scores the current parameters on held-out data. It must not modify p.
// Its score is the figure a run reports, such as an accuracy; its detail is
// a one-line summary.
type Eval func(ctx context.Context, p *nn.Params) (score float64, detail string, err error)

// Progress is one report of a run: after every step, with Eval filled
// after an evaluation.
type Progress struct {
	Step, Steps int
	Loss        float64 // the step's mean loss per weighted token
	LR          float64
	Tokens      int // weighted tokens of the step
	Elapsed     time.Duration
	Evaluated   bool
	Score       float64
	Detail      string
}

// Result sums up a finished run.
type Result struct {
	Steps     int
	Resumed   int // the step the run resumed from; 0 for a fresh start
	Loss      float64
	Score     float64
	Detail    string
	Trained   time.Duration // wall time of the steps this call ran
	Sequences int           // sequences seen by this call
}

// Train trains p in place on examples and returns a summary. A non-nil eval
// scores the model every cfg.EvalEvery steps and after the last. A non-nil
// progress receives every step's report, on the calling goroutine. With
// cfg.StateDir set, the state is saved every cfg.SaveEvery steps and after
// the last. A state found there at the start is resumed: p is overwritten
// with its weights, and the run goes on with the batches it would have
// drawn uninterrupted. A cancelled ctx saves the state of the last finished
// step and returns ctx's error. Examples longer than the model's context
// are an error naming the first.
func Train(ctx context.Context, p *nn.Params, examples []Example, cfg Config, eval Eval, progress func(Progress)) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if err := checkExamples(p.Config.Context, examples); err != nil {
		return Result{}, err
	}
	b := newBatcher(examples, cfg.Batch, cfg.Seed)

	opt, err := resume(p, &cfg)
	if err != nil {
		return Result{}, err
	}
	start := 0
	if opt != nil {
		start = opt.Steps
	}
	res := Result{Resumed: start, Steps: start}
	t0 := time.Now()
	steps := cfg.Steps
	// fixed is the schedule's length once known, 0 while a timed run calibrates.
	// A state saved then resumes calibrating, rather than as a run of
	// calibrationSteps.
	fixed := cfg.Steps
	if steps == 0 {
		steps = calibrationSteps
	}
	tr, err := newTrainer(p, cfg, steps, opt)
	if err != nil {
		return res, err
	}
	save := func() error {
		if cfg.StateDir == "" {
			return nil
		}
		return saveState(cfg.StateDir, tr, fixed)
	}
	for step := start; step < steps; step++ {
		st, err := tr.Step(ctx, []train.Batch{b.batch(step)})
		if err != nil {
			if ctx.Err() != nil && step > start {
				if serr := save(); serr != nil {
					return res, errors.Join(err, serr)
				}
			}
			return res, fmt.Errorf("sft: %w", err)
		}
		res.Steps, res.Loss = st.Step, st.Loss
		res.Sequences += cfg.Batch
		if cfg.Steps == 0 && step+1 == calibrationSteps {
			// Timed run: fix the schedule's length from the speed of the
			// steps this call ran.
			per := time.Since(t0) / time.Duration(calibrationSteps-start)
			steps = max(int(cfg.Duration/per), calibrationSteps+1)
			fixed = steps
			if tr, err = newTrainer(p, cfg, steps, tr.Opt); err != nil {
				return res, err
			}
		}
		pr := Progress{Step: st.Step, Steps: steps, Loss: st.Loss, LR: st.LR, Tokens: st.Tokens, Elapsed: time.Since(t0)}
		last := step+1 == steps
		if eval != nil && (last || cfg.EvalEvery > 0 && st.Step%cfg.EvalEvery == 0) {
			score, detail, err := eval(ctx, p)
			if err != nil {
				return res, fmt.Errorf("sft: eval at step %d: %w", st.Step, err)
			}
			pr.Evaluated, pr.Score, pr.Detail = true, score, detail
			res.Score, res.Detail = score, detail
		}
		if last || cfg.SaveEvery > 0 && st.Step%cfg.SaveEvery == 0 {
			if err := save(); err != nil {
				return res, err
			}
		}
		if progress != nil {
			progress(pr)
		}
	}
	res.Trained = time.Since(t0)
	return res, nil
}

// checkExamples checks that every example fits a model of context tokens.
// Each must also have a weight per token and at least 2 tokens.
func checkExamples(context int, examples []Example) error {
	if len(examples) == 0 {
		return errors.New("sft: no examples")
	}
	for i, e := range examples {
		switch {
		case len(e.Tokens) < 2 || len(e.Tokens) != len(e.Weights):
			return fmt.Errorf("sft: example %d: %d tokens and %d weights, want the same number, at least 2", i, len(e.Tokens), len(e.Weights))
		case len(e.Tokens)-1 > context:
			return fmt.Errorf("sft: example %d: %d tokens exceed the model's context %d", i, len(e.Tokens), context+1)
		}
	}
	return nil
}

// resume loads cfg.StateDir's saved state into p, when there is one.
// It returns the state's optimizer state, or nil to start afresh. A timed
// run resumes with the length it calibrated, set in cfg.Steps.
func resume(p *nn.Params, cfg *Config) (*train.AdamState, error) {
	if cfg.StateDir == "" {
		return nil, nil
	}
	st, err := train.LoadState(cfg.StateDir, p.Config)
	if err != nil {
		return nil, fmt.Errorf("sft: resume: %w", err)
	}
	if st == nil {
		return nil, nil
	}
	copy(p.Data, st.Params.Data)
	if st.Total > 0 && cfg.Steps == 0 {
		cfg.Steps = st.Total
	}
	return st.Opt, nil
}

// calibrationSteps are the steps a timed run measures its speed on.
const calibrationSteps = 20

func newTrainer(p *nn.Params, cfg Config, steps int, opt *train.AdamState) (*train.Trainer, error) {
	warm := cfg.Warmup
	if warm == 0 {
		warm = max(steps/20, 1)
	}
	warm = min(warm, steps)
	aw := train.DefaultAdamW()
	aw.WeightDecay = cfg.WeightDecay
	tc := train.Config{
		AdamW:    aw,
		Schedule: train.Schedule{Warmup: warm, Total: steps, MaxLR: cfg.MaxLR, MinLR: cfg.MinLR},
		ClipNorm: cfg.ClipNorm,
	}
	tr, err := train.NewTrainer(p, tc)
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	if opt != nil {
		tr.Opt = opt
	}
	return tr, nil
}

// batcher draws the batches of a run, step k's from only the seed and k.
// So a resumed run draws what the uninterrupted one would. A batch holds
// sequences of similar lengths, neighbours in length order around a random
// example, so little of it is padding.
type batcher struct {
	ex     []Example
	byLen  []int // example indices in length order
	b      int
	seed   uint64
	window int
}

func newBatcher(ex []Example, b int, seed uint64) *batcher {
	byLen := make([]int, len(ex))
	for i := range byLen {
		byLen[i] = i
	}
	slices.SortStableFunc(byLen, func(i, j int) int { return len(ex[i].Tokens) - len(ex[j].Tokens) })
	return &batcher{ex: ex, byLen: byLen, b: b, seed: seed, window: min(len(ex), 4*b)}
}

func (bt *batcher) batch(step int) train.Batch {
	rng := rand.New(rand.NewPCG(bt.seed, uint64(step)+0xba7c4))
	lo := rng.IntN(len(bt.byLen) - bt.window + 1)
	pick := make([]int, bt.b)
	T := 1
	for s := range pick {
		pick[s] = bt.byLen[lo+rng.IntN(bt.window)]
		T = max(T, len(bt.ex[pick[s]].Tokens)-1)
	}
	nb := train.Batch{B: bt.b, T: T, Inputs: make([]int, bt.b*T), Targets: make([]int, bt.b*T), Weights: make([]float32, bt.b*T)}
	for s, i := range pick {
		e := bt.ex[i]
		row := s * T
		for j := 0; j+1 < len(e.Tokens); j++ {
			nb.Inputs[row+j], nb.Targets[row+j], nb.Weights[row+j] = e.Tokens[j], e.Tokens[j+1], e.Weights[j+1]
		}
	}
	return nb
}

// saveState writes the run's training state to dir with train.SaveState.
// Its Total is the schedule's length, 0 while a timed run calibrates.
func saveState(dir string, tr *train.Trainer, steps int) error {
	st := train.State{Params: tr.Params, Opt: tr.Opt, Step: tr.Opt.Steps, Total: steps}
	if err := train.SaveState(dir, st); err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	return nil
}
