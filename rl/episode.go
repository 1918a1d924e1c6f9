package rl

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/nn/train"
)

// Episode is one policy call of a rollout as a training sequence.
// It holds the prompt as the backend tokenized it,
// then the tokens the policy generated with the sampler's logprobs.
// Only Completion is trained.
// The prompt is context: system text, the request, earlier turns, tool results and sub-agent outputs.
//
// A merged episode holds several calls of one conversation.
// Its Completion runs from the first call's generated tokens to the last's.
// Tokens in between that the policy did not generate are Masked:
// tool results, the next user turn and role markers.
type Episode struct {
	Node       string    // "name#id" of the trace node (joined by "+" when merged), for errors
	Calls      int       // policy calls merged into it
	IDs        []int     // the trace node IDs of its calls
	Prompt     []int     // prompt token ids
	Completion []int     // generated token ids
	Behaviour  []float32 // (len(Completion)) sampler logprobs at temperature 1
	// Masked, when not nil, marks the tokens of Completion that are context, not generated.
	// Their Behaviour is NaN, and they carry no loss.
	Masked []bool
}

// trained reports whether completion token j carries a loss.
func (e *Episode) trained(j int) bool { return e.Masked == nil || !e.Masked[j] }

// Generated is the number of tokens the policy generated.
func (e *Episode) Generated() int {
	n := 0
	for j := range e.Completion {
		if e.trained(j) {
			n++
		}
	}
	return n
}

// Len is the length of the training sequence: inputs and targets are the
// full token sequence shifted by one.
func (e *Episode) Len() int { return len(e.Prompt) + len(e.Completion) - 1 }

// Episodes returns the training sequences of role's calls in tr, in call order.
// It reads the trace with delegate.Sequences, as the rollout pipeline does.
// A multi-turn conversation whose every prompt extends the previous prompt and output is one sequence.
// That gives the same gradient as its calls trained apart, but the shared prefix runs once.
// A call that generated nothing, such as a failed call, yields nothing.
//
// A call of role that generated tokens is an error, naming the node, when it
// lacks prompt token ids, lacks a token id or finite logprob for a generated token,
// or reports more completion tokens than logprobs.
// A sequence longer than context tokens is an error too; sequences are never silently cut.
// Remote models that return no token ids therefore cannot be trained here.
func Episodes(tr *delegate.Trace, role string, context int) ([]Episode, error) {
	if tr == nil {
		return nil, fmt.Errorf("episodes: nil trace")
	}
	nodes := map[int]*delegate.Node{}
	for _, n := range tr.Calls() {
		nodes[n.ID] = n
	}
	var out []Episode
	for _, s := range delegate.Sequences(tr, role) {
		var names []string
		generated := 0
		for _, id := range s.Calls {
			n := nodes[id]
			names = append(names, fmt.Sprintf("%s#%d", n.Name, n.ID))
			generated += n.Usage.CompletionTokens
			if c := n.Usage.CompletionTokens; len(n.Logprobs) > 0 && c > len(n.Logprobs) {
				return nil, fmt.Errorf("episodes: node %s#%d: %d completion tokens but %d logprobs", n.Name, n.ID, c, len(n.Logprobs))
			}
		}
		name := strings.Join(names, "+")
		if s.NoTokens != "" {
			if generated == 0 {
				continue // failed calls: nothing generated, nothing to train
			}
			n := nodes[s.Calls[0]]
			return nil, fmt.Errorf("episodes: node %s (model %s): %s; only backends that return prompt token ids and logprobs with token ids can be trained (see delegate.Sampling.Logprobs)", name, n.Model, s.NoTokens)
		}
		e, err := FromTokens(s.Tokens, s.Masks, s.Logprobs)
		if err != nil {
			return nil, fmt.Errorf("episodes: node %s: %w", name, err)
		}
		if len(e.Completion) == 0 {
			continue // nothing generated
		}
		e.Node, e.Calls, e.IDs = name, len(s.Calls), s.Calls
		if l := len(e.Prompt) + len(e.Completion); l > context {
			return nil, fmt.Errorf("episodes: node %s: %d prompt + %d later tokens exceed the context of %d",
				name, len(e.Prompt), len(e.Completion), context)
		}
		out = append(out, e)
	}
	return out, nil
}

// FromTokens makes an episode of a sequence in the layout of trajectory groups.
// That layout is delegate.Sequence's and Atropos's ScoredData: tokens, masks and logprobs.
// Masks hold delegate.MaskIgnore at untrained positions and the token id at trained ones.
// Logprobs are the sampler's; untrained positions may hold any value.
// The prompt runs up to the first trained token; later untrained tokens are Masked.
// It fails, naming the position, when the lengths differ,
// a mask is neither MaskIgnore nor its token, or a trained token's logprob is not a log-probability.
// A sequence with no trained token gives an episode with no Completion.
func FromTokens(tokens, masks []int, logprobs []float64) (Episode, error) {
	if len(masks) != len(tokens) || len(logprobs) != len(tokens) {
		return Episode{}, fmt.Errorf("%d tokens, %d masks and %d logprobs: want the same number", len(tokens), len(masks), len(logprobs))
	}
	first := slices.IndexFunc(masks, func(m int) bool { return m != delegate.MaskIgnore })
	if first < 0 {
		return Episode{Prompt: tokens}, nil
	}
	e := Episode{
		Prompt:     tokens[:first],
		Completion: tokens[first:],
		Behaviour:  make([]float32, len(tokens)-first),
	}
	for j := range e.Completion {
		switch m := masks[first+j]; {
		case m == delegate.MaskIgnore:
			if e.Masked == nil {
				e.Masked = make([]bool, len(e.Completion))
			}
			e.Masked[j] = true
			e.Behaviour[j] = float32(math.NaN())
			continue
		case m != e.Completion[j]:
			return Episode{}, fmt.Errorf("mask %d at position %d: want %d (untrained) or the token %d", m, first+j, delegate.MaskIgnore, e.Completion[j])
		}
		lp := logprobs[first+j]
		if math.IsNaN(lp) || math.IsInf(lp, 0) || lp > 1e-3 { // a log-probability; allow rounding above 0
			return Episode{}, fmt.Errorf("generated token %d (position %d) has logprob %v", j, first+j, lp)
		}
		e.Behaviour[j] = float32(lp)
	}
	return e, nil
}

// seqRef places one episode in a micro-batch.
type seqRef struct {
	ep  *Episode
	idx int // index of the episode in the step's list
	row int // row of the micro-batch
}

// microBatch is a (B, T) batch of episodes, right-padded with token 0 and
// weight 0. Completion token j of the episode in row r is predicted at
// position r·T + len(Prompt) − 1 + j.
type microBatch struct {
	batch train.Batch
	seqs  []seqRef
}

// at returns the flat index of completion token j of s.
func (m *microBatch) at(s seqRef, j int) int {
	return s.row*m.batch.T + len(s.ep.Prompt) - 1 + j
}

// pack groups episodes into micro-batches of at most maxTokens = B×T positions.
// A longer episode gets a batch of its own.
// Episodes go longest first, so rows of similar length share a batch and padding stays small.
// Weights are allocated and left zero.
func pack(eps []Episode, maxTokens int) []*microBatch {
	order := make([]int, len(eps))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return eps[order[a]].Len() > eps[order[b]].Len() })
	var out []*microBatch
	for lo := 0; lo < len(order); {
		t := eps[order[lo]].Len()
		hi := lo + 1
		for hi < len(order) && (hi-lo+1)*t <= maxTokens {
			hi++
		}
		b := hi - lo
		m := &microBatch{batch: train.Batch{
			B: b, T: t,
			Inputs:  make([]int, b*t),
			Targets: make([]int, b*t),
			Weights: make([]float32, b*t),
		}}
		for r, i := range order[lo:hi] {
			e := &eps[i]
			row := m.batch.Inputs[r*t : (r+1)*t]
			tgt := m.batch.Targets[r*t : (r+1)*t]
			seq := append(append(make([]int, 0, e.Len()+1), e.Prompt...), e.Completion...)
			copy(row, seq[:len(seq)-1])
			copy(tgt, seq[1:])
			m.seqs = append(m.seqs, seqRef{ep: e, idx: i, row: r})
		}
		out = append(out, m)
		lo = hi
	}
	return out
}
