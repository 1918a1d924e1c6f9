package infer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/delegatelab/delegate/nn"
)

// Finish reasons of a GenResult.
const (
	FinishStop   = "stop"   // a stop token or stop sequence was generated
	FinishLength = "length" // MaxNew tokens were generated, or the context is full
)

// ErrEngineClosed is returned by Generate and GenerateAll once Close has
// been called, and for requests still waiting when it was.
var ErrEngineClosed = errors.New("nn engine closed")

// GenRequest asks for a continuation of Prompt. The zero values of the
// sampling fields mean greedy decoding with no filter.
type GenRequest struct {
	Prompt []int // token ids, at least one, at most the model's context
	// MaxNew caps the generated tokens; 0 means up to the end of the
	// context. Generation also ends when prompt and output fill the context.
	MaxNew      int
	Temperature float64 // 0: greedy (argmax); otherwise softmax(logits/T)
	TopP        float64 // nucleus mass in (0, 1]; 0 or 1 disables
	TopK        int     // keep the K likeliest tokens; 0 disables
	// Seed seeds this request's own PCG generator.
	// The same request with the same seed gives the same tokens, alone or
	// batched with others.
	Seed       uint64
	StopTokens []int   // generation stops after any of these ids
	StopSeqs   [][]int // or after any of these id sequences (each non-empty)
	// TopLogprobs asks for this many likeliest alternatives at each step.
	TopLogprobs int
	// LogitBias is added to the logits of its tokens.
	// The penalties are subtracted as OpenAI defines them:
	// logit[t] -= c[t]·Frequency + (c[t] > 0)·Presence, where c[t] counts t
	// among the tokens generated so far. Constraint, when set, masks the
	// tokens that may not come next. All three act on the distribution
	// tokens are drawn from, greedy included; the logprobs reported stay the
	// model's own.
	LogitBias        []TokenBias
	FrequencyPenalty float64
	PresencePenalty  float64
	Constraint       Constraint
	// OnToken, when set, is called with each token as it is sampled, in order.
	// The engine's scheduler goroutine calls it, so a streaming server can
	// send the token before the generation ends. It must return at once and
	// must not call the engine.
	OnToken func(token int)
}

// TokenBias is a bias added to one token's logit.
type TokenBias struct {
	Token int
	Bias  float32
}

// Constraint restricts what a request may generate, token by token. The
// engine calls it from its scheduler goroutine only, so an implementation
// needs no lock, but each request needs its own.
type Constraint interface {
	// Allows reports whether token may come next.
	Allows(token int) bool
	// Accept advances past token, which was just generated.
	Accept(token int)
}

// GenResult is a finished generation.
type GenResult struct {
	// Tokens are the generated ids. When Finish is FinishStop they end with
	// the stop token or stop sequence that matched, StopLen ids long. So a
	// trainer sees and scores the end-of-turn token it sampled; a server
	// drops the last StopLen ids.
	Tokens []int
	// Logprobs[i] is the model's own log-probability of Tokens[i].
	// It is log softmax(logits)[Tokens[i]] at temperature 1 with no top-k or
	// top-p filter, the quantity a policy-gradient ratio needs.
	Logprobs []float32
	// Top[i] holds the TopLogprobs likeliest tokens at step i, best first.
	// Their logprobs are of the same kind. Top is nil when TopLogprobs is 0.
	Top          [][]TokenLogprob
	Finish       string // FinishStop or FinishLength
	StopLen      int    // ids at the end of Tokens that matched a stop; 0 unless FinishStop
	PromptTokens int
}

// EngineConfig sizes an Engine. Zero fields take the defaults noted.
type EngineConfig struct {
	// parallelWork overrides parallelWork and parallelStep when
	// positive; tests set it to 1 to split every step across cores.
	parallelWork int

	// MaxBatch is the number of sequences decoded together, the KV cache's
	// slots; at least 1. NewEngine allocates the cache's
	// 8·MaxBatch·Context·KVDim·Layers bytes: 21 MB for the stories260K shape
	// at 32.
	MaxBatch int
	// PrefillChunk caps the prompt tokens pushed through one forward step.
	// A long prompt is prefilled over several steps, so it does not stall
	// the sequences already decoding. At least 1.
	PrefillChunk int
}

// DefaultEngineConfig is the engine of the shipped commands: 32 sequences,
// prompts prefilled 256 tokens a step.
func DefaultEngineConfig() EngineConfig {
	return EngineConfig{MaxBatch: 32, PrefillChunk: 256}
}

// Validate reports the first invalid field, naming it.
func (ec EngineConfig) Validate() error {
	switch {
	case ec.MaxBatch < 1:
		return fmt.Errorf("engine config: max batch %d: want at least 1", ec.MaxBatch)
	case ec.PrefillChunk < 1:
		return fmt.Errorf("engine config: prefill chunk %d: want at least 1", ec.PrefillChunk)
	}
	return nil
}

// EngineStats count an Engine's work since it was made.
type EngineStats struct {
	Steps           int64 // batched forward passes
	Admitted        int64 // requests given a slot
	Refills         int64 // admissions into a slot an earlier request had used
	Completed       int64 // requests finished with a result
	Canceled        int64 // requests dropped because their context ended
	PromptTokens    int64 // prompt tokens computed by prefill
	PrefixReused    int64 // prompt tokens whose keys and values were copied from a concurrent sequence
	GeneratedTokens int64 // tokens sampled
	MaxActive       int   // most slots busy in one step
	Active          int   // slots busy after the last step
	Queued          int   // requests waiting for a slot after the last step's admissions
	// Refreshes counts the copies of the nn.Params into the engine's packed
	// weights after the first (see Engine).
	Refreshes int64
}

// Engine generates continuations of many requests at once by continuous batching.
// Up to MaxBatch sequences advance one token per forward step, and new
// requests are prefilled in the same steps. A finished sequence's slot goes
// to the next waiting request before the next step.
//
// All methods are safe for concurrent use. One scheduler goroutine, started
// by NewEngine and ended by Close, runs every forward pass; Generate calls
// from many goroutines are batched together.
//
// The engine samples from its own copy of the nn.Params it was given, laid
// out for the matrix kernels. It copies them again when a request arrives
// while no other call is in flight, before the next forward pass. No call
// is in flight when every earlier one has returned, finished or canceled.
// So the caller may change the nn.Params between calls, as a trainer does
// between batches of rollouts. The next call samples from the new values.
// The caller must not change them while any Generate or GenerateAll call is
// in flight.
// EngineStats.Refreshes counts the copies.
type Engine struct {
	cfg    nn.Config
	ecfg   EngineConfig
	submit chan []*genJob
	quit   chan struct{} // closed by Close
	done   chan struct{} // closed when the scheduler has returned
	once   sync.Once

	mem EngineMemory

	mu    sync.Mutex
	stats EngineStats
	fatal error // set when the scheduler died of a panic
}

// genJob is one request inside the engine.
type genJob struct {
	ctx   context.Context
	req   GenRequest
	sp    sampleParams
	rng   *rand.Rand
	reply chan jobReply // buffered: the scheduler never blocks on it
	limit int           // tokens that may be generated

	seq       int64         // admission order
	shared    bool          // prefix sharing was settled
	waiting   bool          // not settled: waits this step for a shared prefix
	prefilled int           // prompt tokens already in the cache
	pos       int           // position of next in the sequence
	next      int           // last sampled token, to be fed at pos
	counts    map[int]int32 // generated tokens' counts, for the penalties
	res       GenResult
}

type jobReply struct {
	res GenResult
	err error
}

// NewEngine starts an engine over p. Call Close to stop its goroutine.
func NewEngine(p *nn.Params, ec EngineConfig) (*Engine, error) {
	if p == nil {
		return nil, errors.New("new engine: nil params")
	}
	if err := checkParams(p); err != nil {
		return nil, fmt.Errorf("new engine: %w", err)
	}
	return newEngine(p.Config, ec, func(cache *KVCache) *decoder { return newDecoder(p, cache) })
}

// NewEngineWeights starts an engine over w, an imported checkpoint from LoadHF.
// It reads w in place and never changes it, so engines may share one
// Weights. Call Close to stop its goroutine.
func NewEngineWeights(w *Weights, ec EngineConfig) (*Engine, error) {
	if w == nil {
		return nil, errors.New("new engine: nil weights")
	}
	if err := w.cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new engine: %w", err)
	}
	return newEngine(w.cfg, ec, func(cache *KVCache) *decoder { return newDecoderWeights(w.cfg, cache, w.w) })
}

func newEngine(c nn.Config, ec EngineConfig, model func(*KVCache) *decoder) (*Engine, error) {
	if err := ec.Validate(); err != nil {
		return nil, fmt.Errorf("new engine: %w", err)
	}
	cache, err := NewKVCache(c, ec.MaxBatch)
	if err != nil {
		return nil, fmt.Errorf("new engine: %w", err)
	}
	e := &Engine{
		cfg:    c,
		ecfg:   ec,
		submit: make(chan []*genJob),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	m := model(cache)
	e.mem = EngineMemory{Weights: m.w.bytes(), KVCache: cache.bytes(), Slots: ec.MaxBatch, Context: c.Context}
	if ec.parallelWork > 0 {
		m.parWork, m.parStep = ec.parallelWork, ec.parallelWork
	}
	s := &scheduler{
		e:      e,
		model:  m,
		smp:    newSampler(c.Vocab),
		slots:  make([]*genJob, ec.MaxBatch),
		used:   make([]bool, ec.MaxBatch),
		cached: make([][]int, ec.MaxBatch),
	}
	for i := range s.cached {
		s.cached[i] = make([]int, 0, c.Context)
	}
	go e.run(s)
	return e, nil
}

// checkParams checks that every view of p has the size its config implies.
// A hand-built nn.Params then fails here and not mid-generation.
func checkParams(p *nn.Params) error {
	c := p.Config
	if err := c.Validate(); err != nil {
		return err
	}
	d, kv, h := c.Dim, c.KVDim(), c.Hidden
	check := func(name string, s []float32, want int) error {
		if len(s) != want {
			return fmt.Errorf("params %s has %d values, config needs %d", name, len(s), want)
		}
		return nil
	}
	if len(p.Layers) != c.Layers {
		return fmt.Errorf("params have %d layers, config needs %d", len(p.Layers), c.Layers)
	}
	errs := []error{
		check("token_emb", p.TokenEmb, c.Vocab*d),
		check("final_norm", p.FinalNorm, d),
		check("output", p.Output, c.Vocab*d),
	}
	for i, l := range p.Layers {
		for _, v := range []struct {
			name string
			s    []float32
			n    int
		}{
			{"attn_norm", l.AttnNorm, d}, {"wq", l.Wq, d * d}, {"wk", l.Wk, kv * d}, {"wv", l.Wv, kv * d},
			{"wo", l.Wo, d * d}, {"ffn_norm", l.FFNNorm, d}, {"w1", l.W1, h * d}, {"w2", l.W2, d * h}, {"w3", l.W3, h * d},
		} {
			errs = append(errs, check(fmt.Sprintf("layer %d %s", i, v.name), v.s, v.n))
		}
	}
	return errors.Join(errs...)
}

// Close stops the scheduler and waits for it to return. Requests in flight
// or waiting fail with ErrEngineClosed. Close may be called more than once
// and concurrently with Generate.
func (e *Engine) Close() error {
	e.once.Do(func() { close(e.quit) })
	<-e.done
	return nil
}

// EngineMemory is what an Engine holds for its whole life, allocated by NewEngine.
// That is one copy of the weights that every sequence reads, and a KV cache
// of Slots sequences of Context positions.
type EngineMemory struct {
	Weights int64 // bytes of the engine's packed copy of the weights
	KVCache int64 // bytes of the KV cache: 8·Slots·Context·KVDim·Layers
	Slots   int   // sequences decoded together (EngineConfig.MaxBatch)
	Context int   // positions per sequence
}

// String reads like "weights 60.8 MB, KV cache 113.2 MB (32 sequences × 256
// positions)".
func (m EngineMemory) String() string {
	return fmt.Sprintf("weights %.1f MB, KV cache %.1f MB (%d sequences × %d positions)", float64(m.Weights)/1e6, float64(m.KVCache)/1e6, m.Slots, m.Context)
}

// Vocab is the size of the model's vocabulary.
func (e *Engine) Vocab() int { return e.cfg.Vocab }

// Memory reports what the engine holds in memory.
func (e *Engine) Memory() EngineMemory { return e.mem }

// Stats returns the engine's counters.
func (e *Engine) Stats() EngineStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// Generate runs one request to completion. It blocks until the result is
// ready, ctx ends, or the engine is closed. When ctx ends, the request's
// slot is freed at the next step without disturbing the others, and
// ctx.Err() is returned. A bad request is an error naming the problem.
func (e *Engine) Generate(ctx context.Context, req GenRequest) (GenResult, error) {
	job, err := e.newJob(ctx, req)
	if err != nil {
		return GenResult{}, fmt.Errorf("generate: %w", err)
	}
	if err := e.send(ctx, []*genJob{job}); err != nil {
		return GenResult{}, fmt.Errorf("generate: %w", err)
	}
	r, err := e.wait(ctx, job)
	if err != nil {
		return GenResult{}, fmt.Errorf("generate: %w", err)
	}
	return r, nil
}

// GenerateAll runs reqs together and returns their results in order. All
// requests are checked before any runs; the first bad one is an error
// naming its index. If ctx ends, the unfinished requests are dropped and
// ctx.Err() is returned.
func (e *Engine) GenerateAll(ctx context.Context, reqs []GenRequest) ([]GenResult, error) {
	jobs := make([]*genJob, len(reqs))
	for i, req := range reqs {
		j, err := e.newJob(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("generate request %d: %w", i, err)
		}
		jobs[i] = j
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	if err := e.send(ctx, jobs); err != nil {
		return nil, fmt.Errorf("generate all: %w", err)
	}
	out := make([]GenResult, len(jobs))
	for i, j := range jobs {
		r, err := e.wait(ctx, j)
		if err != nil {
			return nil, fmt.Errorf("generate request %d: %w", i, err)
		}
		out[i] = r
	}
	return out, nil
}

func (e *Engine) send(ctx context.Context, jobs []*genJob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case e.submit <- jobs:
		return nil
	case <-e.done:
		return e.closedErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *Engine) wait(ctx context.Context, j *genJob) (GenResult, error) {
	select {
	case r := <-j.reply:
		return r.res, r.err
	case <-ctx.Done():
		return GenResult{}, ctx.Err()
	case <-e.done:
		select { // the scheduler answers every job it took before it returns
		case r := <-j.reply:
			return r.res, r.err
		default:
			return GenResult{}, e.closedErr()
		}
	}
}

func (e *Engine) closedErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fatal != nil {
		return e.fatal
	}
	return ErrEngineClosed
}

// newJob validates req against the model and prepares its state.
func (e *Engine) newJob(ctx context.Context, req GenRequest) (*genJob, error) {
	c := e.cfg
	inRange := func(what string, i, tok int) error {
		if tok < 0 || tok >= c.Vocab {
			return fmt.Errorf("%s token %d at index %d out of range [0, %d)", what, tok, i, c.Vocab)
		}
		return nil
	}
	switch {
	case len(req.Prompt) == 0:
		return nil, errors.New("empty prompt")
	case len(req.Prompt) > c.Context:
		return nil, fmt.Errorf("prompt of %d tokens is longer than the context of %d", len(req.Prompt), c.Context)
	case req.MaxNew < 0:
		return nil, fmt.Errorf("max new tokens must not be negative, got %d", req.MaxNew)
	case req.Temperature < 0 || math.IsNaN(req.Temperature) || math.IsInf(req.Temperature, 0):
		return nil, fmt.Errorf("temperature must be finite and not negative, got %v", req.Temperature)
	case !(req.TopP >= 0 && req.TopP <= 1):
		return nil, fmt.Errorf("top_p must be in [0, 1], got %v", req.TopP)
	case req.TopK < 0:
		return nil, fmt.Errorf("top_k must not be negative, got %d", req.TopK)
	case req.TopLogprobs < 0 || req.TopLogprobs > c.Vocab:
		return nil, fmt.Errorf("top logprobs must be in [0, %d], got %d", c.Vocab, req.TopLogprobs)
	}
	for i, b := range req.LogitBias {
		if err := inRange("logit bias", i, b.Token); err != nil {
			return nil, err
		}
		if math.IsNaN(float64(b.Bias)) || math.IsInf(float64(b.Bias), 0) {
			return nil, fmt.Errorf("logit bias %d of token %d is not finite", i, b.Token)
		}
	}
	for _, p := range []float64{req.FrequencyPenalty, req.PresencePenalty} {
		if math.IsNaN(p) || math.IsInf(p, 0) {
			return nil, fmt.Errorf("penalty %v is not finite", p)
		}
	}
	for i, t := range req.Prompt {
		if err := inRange("prompt", i, t); err != nil {
			return nil, err
		}
	}
	for i, t := range req.StopTokens {
		if err := inRange("stop", i, t); err != nil {
			return nil, err
		}
	}
	for i, seq := range req.StopSeqs {
		if len(seq) == 0 {
			return nil, fmt.Errorf("stop sequence %d is empty", i)
		}
		for k, t := range seq {
			if err := inRange(fmt.Sprintf("stop sequence %d", i), k, t); err != nil {
				return nil, err
			}
		}
	}
	limit := c.Context - len(req.Prompt)
	if req.MaxNew > 0 && req.MaxNew < limit {
		limit = req.MaxNew
	}
	return &genJob{
		ctx:   ctx,
		req:   req,
		sp:    sampleParams{temperature: req.Temperature, topK: req.TopK, topP: req.TopP},
		rng:   rand.New(rand.NewPCG(req.Seed, 0x6e6e2d73616d706c)),
		reply: make(chan jobReply, 1),
		limit: limit,
		res: GenResult{
			Tokens:       make([]int, 0, limit),
			Logprobs:     make([]float32, 0, limit),
			PromptTokens: len(req.Prompt),
		},
	}, nil
}

// scheduler is the scheduler goroutine's state; only that goroutine
// touches it.
type scheduler struct {
	e     *Engine
	model *decoder
	smp   *sampler
	slots []*genJob // nil when free
	used  []bool    // the slot has held a request before
	queue []*genJob // waiting for a slot, oldest first
	rows  []tokenRow
	owner []*genJob // the job of each row that asked for logits
	ready []*genJob // finished, to be answered once the stats count them
	// cached[i] are the tokens whose keys and values slot i holds at positions [0, len).
	// They are the prompt and fed tokens of its current job.
	cached [][]int
	seq    int64 // admissions so far
}

func (e *Engine) run(s *scheduler) {
	defer close(e.done)
	defer s.model.close()
	defer func() {
		if r := recover(); r != nil {
			err := fmt.Errorf("nn engine scheduler panic: %v\n%s", r, debug.Stack())
			e.mu.Lock()
			e.fatal = err
			e.mu.Unlock()
			s.failAll(err)
		}
	}()
	for {
		if s.idle() {
			select {
			case jobs := <-e.submit:
				s.model.stale = s.model.p != nil // see Engine: the nn.Params may have changed
				s.queue = append(s.queue, jobs...)
			case <-e.quit:
				s.failAll(ErrEngineClosed)
				return
			}
		}
	drain:
		for {
			select {
			case jobs := <-e.submit:
				if s.unheld() && s.model.p != nil {
					s.model.stale = true
				}
				s.queue = append(s.queue, jobs...)
			case <-e.quit:
				s.failAll(ErrEngineClosed)
				return
			default:
				break drain
			}
		}
		s.dropCanceled()
		s.admit()
		s.step()
	}
}

// unheld reports whether no caller can be waiting on a job the scheduler holds.
// Every such job has had its context end, so its Generate call has
// returned, and the caller may have changed the nn.Params since.
func (s *scheduler) unheld() bool {
	for _, j := range s.slots {
		if j != nil && j.ctx.Err() == nil {
			return false
		}
	}
	for _, j := range s.queue {
		if j.ctx.Err() == nil {
			return false
		}
	}
	return true
}

func (s *scheduler) idle() bool {
	return len(s.queue) == 0 && !slices.ContainsFunc(s.slots, func(j *genJob) bool { return j != nil })
}

// failAll answers every job the scheduler holds with err, except those
// already finished, which get their results.
func (s *scheduler) failAll(err error) {
	s.answer()
	for i, j := range s.slots {
		if j != nil {
			j.reply <- jobReply{err: err}
			s.slots[i] = nil
		}
	}
	for _, j := range s.queue {
		j.reply <- jobReply{err: err}
	}
	s.queue = nil
}

// dropCanceled frees the slots and queue places of requests whose context
// has ended.
func (s *scheduler) dropCanceled() {
	var gone []*genJob // rare: allocating here costs nothing per token
	for i, j := range s.slots {
		if j != nil && j.ctx.Err() != nil {
			gone = append(gone, j)
			s.slots[i] = nil
		}
	}
	q := s.queue[:0]
	for _, j := range s.queue {
		if j.ctx.Err() != nil {
			gone = append(gone, j)
			continue
		}
		q = append(q, j)
	}
	clear(s.queue[len(q):])
	s.queue = q
	if len(gone) == 0 {
		return
	}
	s.e.mu.Lock()
	s.e.stats.Canceled += int64(len(gone))
	s.e.mu.Unlock()
	for _, j := range gone {
		j.reply <- jobReply{err: j.ctx.Err()}
	}
}

// admit gives free slots to waiting requests, oldest first. A request with
// no room to generate finishes at once without a slot.
func (s *scheduler) admit() {
	var admitted, refills, completed int64
	taken := 0
	for i := range s.slots {
		if s.slots[i] != nil {
			continue
		}
		for taken < len(s.queue) {
			j := s.queue[taken]
			taken++
			if j.limit == 0 {
				j.res.Finish = FinishLength
				s.ready = append(s.ready, j)
				completed++
				continue
			}
			s.slots[i] = j
			s.cached[i] = s.cached[i][:0]
			s.seq++
			j.seq = s.seq
			admitted++
			if s.used[i] {
				refills++
			}
			s.used[i] = true
			break
		}
	}
	// A request with no room also finishes when every slot is busy.
	rest := s.queue[taken:]
	q := s.queue[:0]
	for _, j := range rest {
		if j.limit == 0 {
			j.res.Finish = FinishLength
			s.ready = append(s.ready, j)
			completed++
			continue
		}
		q = append(q, j)
	}
	clear(s.queue[len(q):])
	s.queue = q
	if admitted+completed > 0 {
		s.e.mu.Lock()
		s.e.stats.Admitted += admitted
		s.e.stats.Refills += refills
		s.e.stats.Completed += completed
		s.e.mu.Unlock()
	}
	s.answer()
}

// answer sends the results in s.ready. It runs after the stats are
// updated, so a caller that has its result sees them counted.
func (s *scheduler) answer() {
	for i, j := range s.ready {
		j.reply <- jobReply{res: j.res}
		s.ready[i] = nil
	}
	s.ready = s.ready[:0]
}

// step runs one forward pass over every busy slot and samples the tokens due.
// A slot gives one decode row or the next chunk of its prompt. A token is
// sampled for each row that ends a prompt or decodes.
func (s *scheduler) step() {
	prompt, active := s.gatherRows()
	if len(s.rows) == 0 {
		return
	}
	refresh := s.model.stale
	logits := s.model.forward(s.rows)
	completed := s.sampleDue(logits)
	s.e.mu.Lock()
	st := &s.e.stats
	st.Steps++
	if refresh {
		st.Refreshes++
	}
	st.Completed += completed
	st.PromptTokens += prompt
	st.GeneratedTokens += int64(len(s.owner))
	st.MaxActive = max(st.MaxActive, active)
	st.Active = active - int(completed)
	st.Queued = len(s.queue)
	s.e.mu.Unlock()
	s.answer()
}

// gatherRows fills s.rows with this step's rows and s.owner with the jobs
// due a token. The jobs are in the row order of their logits. It returns
// the prompt tokens the rows hold and the number of busy slots.
func (s *scheduler) gatherRows() (prompt int64, active int) {
	// Settle prefix sharing first, while every slot's cache holds exactly
	// its cached tokens (no rows of this step are pending).
	for slot, j := range s.slots {
		if j != nil && !j.shared {
			j.waiting = s.share(slot, j)
		}
	}
	rows, owner := s.rows[:0], s.owner[:0]
	budget := s.e.ecfg.PrefillChunk
	for slot, j := range s.slots {
		if j == nil {
			continue
		}
		active++
		p := len(j.req.Prompt)
		if j.prefilled < p {
			if j.waiting {
				continue // an earlier request is computing a prefix this one shares
			}
			if budget <= 0 {
				continue
			}
			n := min(p-j.prefilled, budget)
			budget -= n
			for t := j.prefilled; t < j.prefilled+n; t++ {
				rows = append(rows, tokenRow{slot: slot, pos: t, token: j.req.Prompt[t], logits: t == p-1})
			}
			s.cached[slot] = append(s.cached[slot], j.req.Prompt[j.prefilled:j.prefilled+n]...)
			j.prefilled += n
			prompt += int64(n)
			if j.prefilled == p {
				owner = append(owner, j)
				j.pos = p
			}
			continue
		}
		rows = append(rows, tokenRow{slot: slot, pos: j.pos, token: j.next, logits: true})
		s.cached[slot] = append(s.cached[slot], j.next)
		owner = append(owner, j)
	}
	s.rows, s.owner = rows, owner
	return prompt, active
}

// sampleDue samples a token for each job in s.owner from its row of
// logits. A finished job leaves its slot for s.ready; sampleDue returns
// how many finished.
func (s *scheduler) sampleDue(logits []float32) (completed int64) {
	v := s.e.cfg.Vocab
	for k, j := range s.owner {
		lg := logits[k*v : (k+1)*v]
		var tok int
		var lp, lse float32
		if j.adjusted() {
			tok, lp, lse = s.smp.pickAdjusted(lg, j)
		} else {
			tok, lp, lse = s.smp.pick(lg, j.sp, j.rng)
		}
		j.res.Tokens = append(j.res.Tokens, tok)
		j.accept(tok)
		if j.req.OnToken != nil {
			j.req.OnToken(tok)
		}
		j.res.Logprobs = append(j.res.Logprobs, lp)
		if n := j.req.TopLogprobs; n > 0 {
			j.res.Top = append(j.res.Top, sampleTop(make([]TokenLogprob, 0, n), lg, lse, n))
		}
		if j.finished() {
			for i := range s.slots {
				if s.slots[i] == j {
					s.slots[i] = nil
				}
			}
			s.ready = append(s.ready, j)
			completed++
			continue
		}
		j.next = tok
		if len(j.res.Tokens) > 1 {
			j.pos++
		}
	}
	return completed
}

// share settles prefix sharing for job j, just admitted to slot i.
// The keys and values of the longest prompt prefix a concurrent sequence
// already holds are copied instead of computed. The prefix leaves out the
// last token, whose logits are needed. Position t's keys and values depend
// only on tokens [0, t] and are computed identically in any batch, so the
// copy is bitwise what prefill would produce. It reports true, leaving j
// unsettled, when an earlier request still prefilling will hold a longer
// shared prefix than any available now. j then waits a step rather than
// compute it twice, so a group of samples of one prompt prefills once. Only
// live sequences are sources, never a finished one's leftovers, which may
// predate a weight update.
func (s *scheduler) share(i int, j *genJob) (wait bool) {
	want := j.req.Prompt[:len(j.req.Prompt)-1]
	best, from, later := 0, -1, 0
	for k, o := range s.slots {
		if o == nil || k == i {
			continue
		}
		if n := commonPrefix(s.cached[k], want); n > best {
			best, from = n, k
		}
		if o.seq < j.seq && o.prefilled < len(o.req.Prompt) {
			later = max(later, commonPrefix(o.req.Prompt, want))
		}
	}
	if later > best {
		return true
	}
	j.shared = true
	if best == 0 {
		return false
	}
	kc := s.model.cache
	for l := range kc.K {
		copy(kc.Keys(l, i, best), kc.Keys(l, from, best))
		copy(kc.Values(l, i, best), kc.Values(l, from, best))
	}
	s.cached[i] = append(s.cached[i][:0], want[:best]...)
	j.prefilled = best
	s.e.mu.Lock()
	s.e.stats.PrefixReused += int64(best)
	s.e.mu.Unlock()
	return false
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// finished reports whether the last sampled token ends the request, and
// sets Finish and StopLen when it does.
func (j *genJob) finished() bool {
	toks := j.res.Tokens
	last := toks[len(toks)-1]
	if slices.Contains(j.req.StopTokens, last) {
		j.res.Finish, j.res.StopLen = FinishStop, 1
		return true
	}
	for _, seq := range j.req.StopSeqs {
		if len(seq) <= len(toks) && slices.Equal(toks[len(toks)-len(seq):], seq) {
			j.res.Finish, j.res.StopLen = FinishStop, len(seq)
			return true
		}
	}
	if len(toks) >= j.limit {
		j.res.Finish = FinishLength
		return true
	}
	return false
}
