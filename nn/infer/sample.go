package infer

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/delegatelab/delegate/nn/kernel"
)

// This file turns one row of logits into a token. The distribution a token
// is drawn from is defined in steps, each optional:
//
//  1. temperature: p_i ∝ exp(logit_i / T); T = 0 means greedy (argmax,
//     lowest id on ties) and ignores the steps below;
//  2. top-k: keep the K likeliest tokens (lowest id first on ties);
//  3. top-p (nucleus): of what is left, sorted by probability, keep the
//     shortest prefix whose renormalized mass reaches P;
//  4. draw one token from the kept ones, renormalized, with exactly one
//     Float64 from the request's own generator.
//
// The logprob reported for a sampled token is NOT from that distribution.
// It is log softmax(logits)[token] at temperature 1 with no filtering, the
// model's own probability of the token. That is what a policy-gradient
// importance ratio π_new(a)/π_old(a) needs, since the trainer recomputes
// exactly this quantity from the same weights. With T=1 and no filter the
// two coincide.

// TokenLogprob is one candidate token and its logprob under the model's
// own distribution (log-softmax of the logits at temperature 1).
type TokenLogprob struct {
	Token   int     `json:"token"`
	Logprob float32 `json:"logprob"`
}

// sampler holds scratch space for picking tokens from a vocabulary of a
// fixed size. Not safe for concurrent use.
type sampler struct {
	probs []float32 // (V) weights at the request's temperature
	idx   []int32   // (V) candidate ids
	keys  []uint64  // (V) sort keys
	adj   []float32 // (V) adjusted logits, made on first use
}

func newSampler(vocab int) *sampler {
	return &sampler{probs: make([]float32, vocab), idx: make([]int32, vocab), keys: make([]uint64, vocab)}
}

// sampleParams are the knobs of one request, checked by GenRequest's
// validation.
type sampleParams struct {
	temperature float64
	topK        int
	topP        float64
}

// pick returns the next token from logits (V), its logprob at temperature
// 1, and log Σ exp(logits) for sampleTop. rng is used only when sp is not
// greedy, for exactly one draw.
func (s *sampler) pick(logits []float32, sp sampleParams, rng *rand.Rand) (tok int, logprob, lse float32) {
	mx, arg := logits[0], 0
	for i, v := range logits {
		if v > mx {
			mx, arg = v, i
		}
	}
	probs := s.probs[:len(logits)]
	if sp.temperature == 0 || sp.topK == 1 {
		lse = s.logSumExp(logits, mx)
		return arg, logits[arg] - lse, lse
	}
	// Tempered weights; at temperature 1 their sum is exactly the one
	// logSumExp would compute, so it is reused.
	invT := float32(1 / sp.temperature)
	var total float64
	if invT == 1 {
		kernel.ExpSum(probs, logits, 1, mx) // e^0 = 1 exactly at the maximum
		for _, e := range probs {
			total += float64(e)
		}
		lse = mx + float32(math.Log(total))
	} else {
		lse = s.logSumExp(logits, mx) // uses probs as scratch: first
		for i, l := range logits {
			e := float32(1) // the maximum, also when 1/T overflows to +Inf
			if l != mx {
				e = kernel.Exp((l - mx) * invT)
			}
			probs[i] = e
			total += float64(e)
		}
	}
	if !(total >= 1) { // NaN logits (diverged weights): nothing to draw from
		rng.Float64() // keep to one draw per token
		return arg, logits[arg] - lse, lse
	}
	tok = s.draw(probs, total, sp, rng)
	return tok, logits[tok] - lse, lse
}

// logSumExp is log Σ exp(logits) given their maximum mx: the
// exponentials vectorized (kernel.ExpSum, into s.probs), their sum in
// float64.
func (s *sampler) logSumExp(logits []float32, mx float32) float32 {
	e := s.probs[:len(logits)]
	kernel.ExpSum(e, logits, 1, mx)
	var sum float64
	for _, v := range e {
		sum += float64(v)
	}
	return mx + float32(math.Log(sum))
}

// draw samples from the tempered weights probs (summing to total) after
// the top-k and top-p filters.
func (s *sampler) draw(probs []float32, total float64, sp sampleParams, rng *rand.Rand) int {
	v := len(probs)
	topK := sp.topK
	if topK <= 0 || topK > v {
		topK = v
	}
	topP := sp.topP
	if topP <= 0 || topP > 1 {
		topP = 1
	}
	if topK == v && topP == 1 { // plain temperature sampling, in id order
		r := rng.Float64() * total
		var cum float64
		for i, p := range probs {
			cum += float64(p)
			if r < cum {
				return i
			}
		}
		return sampleLastPositive(probs)
	}

	// Candidates, best first. Top-k selects the k highest. With top-p alone,
	// a token below (1-P)/(V-1) of the mass can never be inside the nucleus,
	// so only the rest need sorting.
	cand := s.idx[:0]
	if topK < v {
		cand = sampleTopK(cand, probs, topK)
	} else {
		// Sort by a key that orders probability descending, then id ascending.
		// The bits of a non-negative float32 order like its value, so no
		// comparison function is needed.
		cut := float32(0)
		if v > 1 && topP*float64(v) >= 1 { // else the bound can exceed the largest weight
			cut = float32((1 - topP) / float64(v-1) * total)
		}
		keys := s.keys[:0]
		for i, p := range probs {
			if p >= cut {
				keys = append(keys, uint64(^math.Float32bits(p))<<32|uint64(i))
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			cand = append(cand, int32(uint32(k)))
		}
	}
	var mass float64
	for _, i := range cand {
		mass += float64(probs[i])
	}
	if topP < 1 {
		var cum float64
		for j, i := range cand {
			cum += float64(probs[i])
			if cum >= topP*mass {
				cand = cand[:j+1]
				break
			}
		}
		mass = cum
	}
	r := rng.Float64() * mass
	var cum float64
	for _, i := range cand {
		cum += float64(probs[i])
		if r < cum {
			return int(i)
		}
	}
	return int(cand[0]) // r reached the rounded total: any kept token is valid; take the likeliest
}

// sampleTopK appends to dst the ids of the k highest weights, highest
// first (lowest id first on ties).
func sampleTopK(dst []int32, probs []float32, k int) []int32 {
	better := func(a, b int32) bool { // a ranks above b
		return probs[a] > probs[b] || (probs[a] == probs[b] && a < b)
	}
	// Keep the best k so far in dst, sorted best first; insert when a
	// token beats the worst kept. k is small in practice.
	for i := range probs {
		id := int32(i)
		if len(dst) == k && !better(id, dst[k-1]) {
			continue
		}
		if len(dst) < k {
			dst = append(dst, id)
		} else {
			dst[k-1] = id
		}
		for j := len(dst) - 1; j > 0 && better(dst[j], dst[j-1]); j-- {
			dst[j], dst[j-1] = dst[j-1], dst[j]
		}
	}
	return dst
}

// sampleLastPositive returns the last id with a positive weight: the
// fallback when a draw lands on the rounded total.
func sampleLastPositive(probs []float32) int {
	for i := len(probs) - 1; i >= 0; i-- {
		if probs[i] > 0 {
			return i
		}
	}
	return 0
}

// sampleTop appends to dst the n tokens with the highest logits, highest first.
// Each carries its logprob at temperature 1; lse is log Σ exp(logits).
func sampleTop(dst []TokenLogprob, logits []float32, lse float32, n int) []TokenLogprob {
	start := len(dst)
	for i, l := range logits {
		k := len(dst) - start
		if k == n && l-lse <= dst[len(dst)-1].Logprob {
			continue
		}
		e := TokenLogprob{Token: i, Logprob: l - lse}
		if k < n {
			dst = append(dst, e)
		} else {
			dst[len(dst)-1] = e
		}
		for j := len(dst) - 1; j > start && dst[j].Logprob > dst[j-1].Logprob; j-- {
			dst[j], dst[j-1] = dst[j-1], dst[j]
		}
	}
	return dst
}

// maskedLogit is the logit of a token a constraint refuses.
// It is finite, so every exp and subtraction stays defined, and far enough
// below any real logit that its weight is 0.
const maskedLogit = -1e30

// greedyTries bounds the tokens greedy decoding checks one by one, best
// first, before it masks the whole vocabulary.
const greedyTries = 64

// adjusted reports whether j's logits are changed before a token is drawn.
func (j *genJob) adjusted() bool {
	r := &j.req
	return r.Constraint != nil || len(r.LogitBias) > 0 || r.FrequencyPenalty != 0 || r.PresencePenalty != 0
}

// accept records tok, just generated, for the constraint and penalties.
func (j *genJob) accept(tok int) {
	if c := j.req.Constraint; c != nil {
		c.Accept(tok)
	}
	if j.req.FrequencyPenalty != 0 || j.req.PresencePenalty != 0 {
		if j.counts == nil {
			j.counts = make(map[int]int32)
		}
		j.counts[tok]++
	}
}

// pickAdjusted is pick for a request whose logits are biased, penalized or constrained.
// The token is drawn from the adjusted logits, while the logprob and
// log Σ exp stay the model's own. When the constraint allows no token at
// all, the request's first stop token ends it; with none, the model's
// likeliest token is taken.
func (s *sampler) pickAdjusted(logits []float32, j *genJob) (tok int, logprob, lse float32) {
	if len(s.adj) < len(logits) {
		s.adj = make([]float32, len(logits))
	}
	adj := s.adj[:len(logits)]
	copy(adj, logits)
	for _, b := range j.req.LogitBias {
		adj[b.Token] += b.Bias
	}
	for t, c := range j.counts {
		adj[t] -= float32(float64(c)*j.req.FrequencyPenalty + j.req.PresencePenalty)
	}
	greedy := j.sp.temperature == 0 || j.sp.topK == 1
	c := j.req.Constraint
	switch {
	case c == nil:
		tok, _, _ = s.pick(adj, j.sp, j.rng)
	case greedy:
		tok = greedyAllowed(adj, c)
	default:
		if mask(adj, c) {
			tok, _, _ = s.pick(adj, j.sp, j.rng)
		} else {
			tok = -1
			j.rng.Float64() // keep to one draw per token
		}
	}
	mx := logits[0]
	for _, v := range logits {
		mx = max(mx, v)
	}
	lse = s.logSumExp(logits, mx)
	if tok < 0 {
		tok = dead(logits, j.req.StopTokens)
	}
	return tok, logits[tok] - lse, lse
}

// greedyAllowed returns the allowed token with the highest adjusted logit
// (lowest id on ties), or -1 when c allows none.
func greedyAllowed(adj []float32, c Constraint) int {
	for range greedyTries {
		arg := argmax(adj)
		if adj[arg] == maskedLogit {
			return -1
		}
		if c.Allows(arg) {
			return arg
		}
		adj[arg] = maskedLogit
	}
	if !mask(adj, c) {
		return -1
	}
	return argmax(adj)
}

// mask sets the logits of the tokens c refuses to maskedLogit and
// reports whether any token is left.
func mask(adj []float32, c Constraint) bool {
	any := false
	for i, v := range adj {
		if v == maskedLogit {
			continue
		}
		if c.Allows(i) {
			any = true
		} else {
			adj[i] = maskedLogit
		}
	}
	return any
}

func argmax(x []float32) int {
	mx, arg := x[0], 0
	for i, v := range x {
		if v > mx {
			mx, arg = v, i
		}
	}
	return arg
}

// dead is the token taken when a constraint allows none.
// It is the first stop token, which ends the request, or the likeliest
// token.
func dead(logits []float32, stops []int) int {
	if len(stops) > 0 {
		return stops[0]
	}
	return argmax(logits)
}
