package rl

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/nn"
)

// Episode is one policy call of a rollout as a training sequence: the
// prompt as the backend tokenized it, then the tokens the policy generated
// with the logprobs the sampler reported for them. Only Completion is
// trained; the prompt (system text, the request, earlier turns, tool
// results, sub-agent outputs) is context.
//
// A merged episode (Merge) holds several calls of one conversation: its
// Completion runs from the first call's generated tokens to the last's,
// and the tokens in between that the policy did not generate (tool
// results, the next user turn, role markers) are Masked.
type Episode struct {
	Node       string    // "name#id" of the trace node, for errors
	Prompt     []int     // prompt token ids
	Completion []int     // generated token ids
	Behaviour  []float32 // (len(Completion)) sampler logprobs at temperature 1
	// Masked, when not nil, marks the tokens of Completion that are
	// context, not generated (their Behaviour is NaN): they carry no loss.
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

// Merge joins consecutive episodes of one conversation into one training
// sequence: when an episode's prompt starts with the previous one's whole
// sequence (prompt and completion, as a multi-turn conversation's next
// call does), the rest of its prompt is appended, masked, then its
// completion. Every generated token keeps exactly the context it had, so
// the gradient is the same, but the shared prefix is run through the model
// once instead of once per call: a conversation of k turns costs about its
// final length rather than k prompts. eps is in call order; those that do
// not continue the previous one start a new sequence. eps is not modified.
func Merge(eps []Episode) []Episode {
	var out []Episode
	for _, e := range eps {
		if n := len(out); n > 0 {
			last := &out[n-1]
			seq := len(last.Prompt) + len(last.Completion)
			if len(e.Prompt) >= seq && continues(e.Prompt, last) {
				if last.Masked == nil {
					last.Masked = make([]bool, len(last.Completion))
				}
				gap := e.Prompt[seq:]
				last.Completion = append(last.Completion, gap...)
				for range gap {
					last.Behaviour = append(last.Behaviour, float32(math.NaN()))
					last.Masked = append(last.Masked, true)
				}
				last.Completion = append(last.Completion, e.Completion...)
				last.Behaviour = append(last.Behaviour, e.Behaviour...)
				last.Masked = append(last.Masked, make([]bool, len(e.Completion))...)
				last.Node += "+" + e.Node
				continue
			}
		}
		out = append(out, Episode{
			Node:       e.Node,
			Prompt:     e.Prompt,
			Completion: slices.Clone(e.Completion),
			Behaviour:  slices.Clone(e.Behaviour),
			Masked:     slices.Clone(e.Masked),
		})
	}
	return out
}

// continues reports whether prompt starts with e's prompt and completion.
func continues(prompt []int, e *Episode) bool {
	p := len(e.Prompt)
	return slices.Equal(prompt[:p], e.Prompt) && slices.Equal(prompt[p:p+len(e.Completion)], e.Completion)
}

// Len is the length of the training sequence: inputs and targets are the
// full token sequence shifted by one.
func (e *Episode) Len() int { return len(e.Prompt) + len(e.Completion) - 1 }

// Episodes returns one episode per call node of role in tr, in node id
// order. A call that generated nothing (a failed call) yields none. It is
// an error, naming the node, when a call of role lacks prompt token ids,
// lacks a token id or a finite logprob for a generated token, reports more
// completion tokens than logprobs, or when prompt and completion together
// exceed context tokens (they are never silently cut). Remote models that
// return no token ids therefore cannot be trained here.
func Episodes(tr *delegate.Trace, role string, context int) ([]Episode, error) {
	if tr == nil {
		return nil, fmt.Errorf("episodes: nil trace")
	}
	var out []Episode
	for _, n := range tr.Calls() {
		if n.Role != role {
			continue
		}
		name := fmt.Sprintf("%s#%d", n.Name, n.ID)
		if len(n.Logprobs) == 0 {
			if n.Usage.CompletionTokens > 0 {
				return nil, fmt.Errorf("episodes: node %s (model %s): %d completion tokens but no logprobs; the policy must be called with logprobs (see WrapPolicy)",
					name, n.Model, n.Usage.CompletionTokens)
			}
			continue // a failed call: nothing generated, nothing to train
		}
		if len(n.PromptTokenIDs) == 0 {
			return nil, fmt.Errorf("episodes: node %s (model %s): no prompt token ids; only backends that return them can be trained", name, n.Model)
		}
		if c := n.Usage.CompletionTokens; c > len(n.Logprobs) {
			return nil, fmt.Errorf("episodes: node %s: %d completion tokens but %d logprobs", name, c, len(n.Logprobs))
		}
		e := Episode{
			Node:       name,
			Prompt:     n.PromptTokenIDs,
			Completion: make([]int, len(n.Logprobs)),
			Behaviour:  make([]float32, len(n.Logprobs)),
		}
		for i, lp := range n.Logprobs {
			if lp.TokenID < 0 {
				return nil, fmt.Errorf("episodes: node %s: generated token %d (%q) has no token id; only backends that return ids can be trained", name, i, lp.Token)
			}
			if math.IsNaN(lp.Logprob) || math.IsInf(lp.Logprob, 0) || lp.Logprob > 1e-3 { // a log-probability; allow rounding above 0
				return nil, fmt.Errorf("episodes: node %s: generated token %d has logprob %v", name, i, lp.Logprob)
			}
			e.Completion[i] = lp.TokenID
			e.Behaviour[i] = float32(lp.Logprob)
		}
		if l := len(e.Prompt) + len(e.Completion); l > context {
			return nil, fmt.Errorf("episodes: node %s: %d prompt + %d generated tokens exceed the context of %d",
				name, len(e.Prompt), len(e.Completion), context)
		}
		out = append(out, e)
	}
	return out, nil
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
	batch nn.Batch
	seqs  []seqRef
}

// at returns the flat index of completion token j of s.
func (m *microBatch) at(s seqRef, j int) int {
	return s.row*m.batch.T + len(s.ep.Prompt) - 1 + j
}

// pack groups episodes into micro-batches of at most maxTokens = B×T
// positions (a longer episode gets a batch of its own), longest first so
// that rows of similar length share a batch and padding stays small.
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
		m := &microBatch{batch: nn.Batch{
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
