package tokenizer

import (
	"context"
	"fmt"
	"slices"

	"github.com/delegatelab/delegate"
)

// WithIDs wraps a model whose backend returns no token ids (an API without
// vLLM's extensions) so that its responses carry the ids of the policy's
// own tokenizer, as a trainer needs them: the prompt as the chat template
// renders the request (add_generation_prompt), and, for each generated
// token the backend reported a logprob of, the id that the re-tokenized
// reply has at that place. An id is given only where the re-tokenized
// reply decodes, token by token, to exactly the pieces the backend
// reported: where the two disagree (the sampler took a split of the text
// that the tokenizer would not), every logprob of that choice keeps id -1
// and the trace says its sequence has no tokens, rather than train on ids
// the policy never sampled. Ids a backend did return are kept. Safe for
// concurrent use when m is.
func WithIDs(m delegate.Model, t *HF, f ChatFormat) delegate.Model {
	return withIDs{Model: m, t: t, f: f}
}

type withIDs struct {
	delegate.Model
	t *HF
	f ChatFormat
}

func (w withIDs) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	resp, err := w.Model.Chat(ctx, req)
	if err != nil || resp == nil {
		return resp, err
	}
	prompt := resp.PromptTokenIDs
	if len(prompt) == 0 {
		if prompt, err = w.t.EncodeChat(w.f, req.Messages, req.Tools, ChatOptions{AddGenerationPrompt: true}); err != nil {
			return resp, fmt.Errorf("tokenize the prompt with %s: %w", w.f, err)
		}
		resp.PromptTokenIDs = prompt
	}
	for i := range resp.Choices {
		w.fill(&resp.Choices[i], req, prompt)
	}
	return resp, nil
}

// fill gives c's logprobs their ids from the re-tokenized conversation,
// when they agree piece by piece.
func (w withIDs) fill(c *delegate.Choice, req *delegate.Request, prompt []int) {
	missing := false
	for _, lp := range c.Logprobs {
		missing = missing || lp.TokenID < 0
	}
	if !missing {
		return
	}
	msgs := append(append([]delegate.Message(nil), req.Messages...), c.Message)
	full, err := w.t.EncodeChat(w.f, msgs, req.Tools, ChatOptions{})
	if err != nil || len(full) < len(prompt)+len(c.Logprobs) || !slices.Equal(full[:len(prompt)], prompt) {
		return // the template does not extend the prompt: no ids
	}
	gen := full[len(prompt):]
	for j, lp := range c.Logprobs {
		piece, err := w.t.Decode(gen[j : j+1])
		if err != nil || piece != lp.Token {
			return
		}
	}
	for j := range c.Logprobs {
		c.Logprobs[j].TokenID = gen[j]
	}
}
