package tokenizer

import (
	"fmt"
	"slices"

	"github.com/delegatelab/delegate"
)

// IDFiller gives token ids, from the policy's own tokenizer, to responses that lack them.
// Such responses come from an API without vLLM's extensions; a trainer needs
// the ids. The prompt gets the ids of the request as the chat template
// renders it, with add_generation_prompt. Each generated token with a
// reported logprob gets the id the re-tokenized reply has at that place.
// An id is given only where the re-tokenized reply decodes, token by token,
// to exactly the pieces the backend reported. Where the two disagree, the
// sampler took a split the tokenizer would not. Then every logprob of that
// choice keeps id -1, and the trace says its sequence has no tokens, rather
// than train on ids the policy never sampled. Ids a backend did return are
// kept. Its Fill is the openai client's FillIDs. It is safe for concurrent
// use.
func IDFiller(t *HF, f ChatFormat) func(req *delegate.Request, resp *delegate.Response) error {
	w := withIDs{t: t, f: f}
	return w.Fill
}

type withIDs struct {
	t *HF
	f ChatFormat
}

// Fill gives resp, the answer to req, the ids it lacks.
func (w withIDs) Fill(req *delegate.Request, resp *delegate.Response) error {
	prompt := resp.PromptTokenIDs
	if len(prompt) == 0 {
		var err error
		if prompt, err = w.t.EncodeChat(w.f, req.Messages, req.Tools, ChatOptions{AddGenerationPrompt: true}); err != nil {
			return fmt.Errorf("tokenize the prompt with %s: %w", w.f, err)
		}
		resp.PromptTokenIDs = prompt
	}
	for i := range resp.Choices {
		w.fill(&resp.Choices[i], req, prompt)
	}
	return nil
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
