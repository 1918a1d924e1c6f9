package tokenizer

import (
	"slices"
	"testing"

	"github.com/delegatelab/delegate"
)

// idless is an answer like one from an API that returns logprobs without token ids.
// It holds content and pieces with TokenID -1 that put together are the
// reply with its end token.
func idless(content string, pieces []string) *delegate.Response {
	c := delegate.Choice{Message: delegate.Assistant(content), FinishReason: "stop"}
	for _, p := range pieces {
		c.Logprobs = append(c.Logprobs, delegate.TokenLogprob{Token: p, TokenID: -1, Logprob: -0.1})
	}
	return &delegate.Response{Model: "remote", Choices: []delegate.Choice{c}}
}

func TestIDFiller(t *testing.T) {
	tok := hfTokenizer(t, "qwen2.5")
	req := &delegate.Request{Messages: []delegate.Message{delegate.System("Be brief."), delegate.User("Capital of France?")}}
	const reply = "The capital of France is Paris."
	prompt, err := tok.EncodeChat(ChatQwen25, req.Messages, nil, ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	full, err := tok.EncodeChat(ChatQwen25, append(slices.Clone(req.Messages), delegate.Assistant(reply)), nil, ChatOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gen := full[len(prompt):]
	// What the sampler generated: the reply's tokens and <|im_end|>.
	sampled := gen[:len(tok.EncodePlain(reply))+1]
	var pieces []string
	for _, id := range sampled {
		p, err := tok.Decode([]int{id})
		if err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, p)
	}

	fill := IDFiller(tok, ChatQwen25)
	resp := idless(reply, pieces)
	if err := fill(req, resp); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.PromptTokenIDs, prompt) {
		t.Errorf("prompt ids %v, want the template's %v", resp.PromptTokenIDs, prompt)
	}
	var got []int
	for _, lp := range resp.Choices[0].Logprobs {
		got = append(got, lp.TokenID)
	}
	if !slices.Equal(got, sampled) {
		t.Errorf("completion ids %v, want %v", got, sampled)
	}

	// The sampler split "Paris" in two where the tokenizer would not: the
	// ids would not be what was sampled, so none are given.
	split := slices.Clone(pieces)
	for i, p := range split {
		if p == " Paris" {
			split = slices.Concat(split[:i], []string{" Par", "is"}, split[i+1:])
			break
		}
	}
	if len(split) != len(pieces)+1 {
		t.Fatalf("no piece %q in %q", " Paris", pieces)
	}
	resp = idless(reply, split)
	if err := fill(req, resp); err != nil {
		t.Fatal(err)
	}
	for j, lp := range resp.Choices[0].Logprobs {
		if lp.TokenID != -1 {
			t.Fatalf("logprob %d got id %d from a re-tokenization that disagrees with the sampler", j, lp.TokenID)
		}
	}
}
