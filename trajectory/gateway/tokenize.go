package gateway

import (
	"fmt"
	"slices"

	"github.com/delegatelab/delegate"
)

// TokenizedByGateway marks a call whose ids the gateway computed with
// the model's chat template, its backend having returned none.
const TokenizedByGateway = "gateway"

// Tokenizer renders a model's requests with its chat template, as its
// backend does. Its methods may run concurrently.
type Tokenizer interface {
	// Prompt returns the ids of a request's messages and tools, ending
	// with the header of the assistant turn to generate.
	Prompt(msgs []delegate.Message, tools []delegate.Tool) ([]int, error)
	// Completion returns the ids a model generates when it answers out
	// after that prompt, its end-of-turn token included.
	Completion(msgs []delegate.Message, tools []delegate.Tool, out delegate.Message) ([]int, error)
}

// tokenize fills in a call's ids with tok when the backend gave none. It
// checks them against tok when it did. A backend whose prompt ids
// disagree with the template's, or whose logprobs do not line up with
// the template's completion, drifts: the call keeps no ids and says why,
// so that its sample is never trained on.
func tokenize(tok Tokenizer, k *Call, lps []delegate.TokenLogprob) {
	p, err := tok.Prompt(k.Request.Messages, k.Request.Tools)
	if err != nil {
		if k.NoTokens != "" {
			k.NoTokens += "; the chat template failed too: " + err.Error()
		}
		// Backend ids stand unchecked: the template cannot render this
		// request, which says nothing against them.
		return
	}
	if k.NoTokens == "" {
		if !slices.Equal(p, k.PromptTokenIDs) {
			k.NoTokens = "drift: " + firstDiff("the backend's prompt ids", k.PromptTokenIDs, p)
			k.CompletionTokenIDs, k.Logprobs = nil, nil
		}
		return
	}
	why := k.NoTokens
	c, err := tok.Completion(k.Request.Messages, k.Request.Tools, k.Output)
	switch {
	case err != nil:
		k.NoTokens = why + "; the chat template could not render the answer: " + err.Error()
		return
	case len(lps) == 0:
		k.NoTokens = why + "; tokenizing needs the backend's logprobs, and it gave none"
		return
	case len(lps) != len(c):
		k.NoTokens = fmt.Sprintf("drift: the backend gave %d logprobs, the chat template renders the answer in %d tokens", len(lps), len(c))
		return
	}
	k.PromptTokenIDs, k.CompletionTokenIDs, k.Logprobs = p, c, make([]float64, len(lps))
	for i, lp := range lps {
		k.Logprobs[i] = lp.Logprob
	}
	k.NoTokens, k.TokenizedBy = "", TokenizedByGateway
}

// firstDiff says where ids got differ from the template's want.
func firstDiff(what string, got, want []int) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("%s (%d) differ from the chat template's (%d) at position %d", what, len(got), len(want), i)
}
