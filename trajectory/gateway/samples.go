package gateway

import (
	"slices"

	"github.com/delegatelab/delegate"
)

// Sample is one training sequence of a role: a delegate.Sequence whose
// Calls are indexes of the session's calls.
type Sample struct {
	Role string `json:"role"`
	delegate.Sequence
	// TemplateHash is the chat-template hash every call of it shares.
	TemplateHash string `json:"chat_template_hash,omitempty"`
	// TokenizedBy is TokenizedByGateway when the gateway tokenized any of
	// its calls.
	TokenizedBy string `json:"tokenized_by,omitempty"`
}

// Samples turns a session's calls into samples, per trained role, in
// call order. A call whose prompt ids start with a sample's ids (its
// prompts and generations so far), rendered by the same chat template,
// extends that sample, the longest such; any other call starts a new
// one. So two calls that share a prefix and diverge are two samples:
// the second's copy of the shared part is prompt, not trained. Calls
// without ids are matched the same way on their messages, and their
// samples say why they have no tokens. Failed calls make none.
func Samples(calls []Call) []Sample {
	var out []Sample
	for i := range calls {
		c := &calls[i]
		if !c.Trained || c.Failed {
			continue
		}
		best := -1
		for j := range out {
			s := &out[j]
			if s.Role != c.Role || s.TemplateHash != c.TemplateHash || (s.NoTokens == "") != (c.NoTokens == "") {
				continue
			}
			var ext bool
			if c.NoTokens == "" {
				ext = len(c.PromptTokenIDs) >= len(s.Tokens) && slices.Equal(c.PromptTokenIDs[:len(s.Tokens)], s.Tokens)
			} else {
				ext = extends(s.Messages, c.Request.Messages)
			}
			if ext && (best < 0 || len(s.Tokens)+len(s.Messages) >= len(out[best].Tokens)+len(out[best].Messages)) {
				best = j
			}
		}
		if best < 0 {
			out = append(out, Sample{Role: c.Role, TemplateHash: c.TemplateHash, Sequence: delegate.Sequence{NoTokens: c.NoTokens}})
			best = len(out) - 1
		}
		s := &out[best]
		s.Calls = append(s.Calls, c.Index)
		// The messages the call adds. Token ids decide the match; when
		// the messages disagree with them (a client that rewrote its
		// history but not its rendering), the call's own are kept whole.
		if extends(s.Messages, c.Request.Messages) || len(s.Messages) == 0 {
			for _, m := range c.Request.Messages[len(s.Messages):] {
				s.Messages = append(s.Messages, delegate.Turn{Message: m})
			}
		} else {
			s.Messages = s.Messages[:0]
			for _, m := range c.Request.Messages {
				s.Messages = append(s.Messages, delegate.Turn{Message: m})
			}
		}
		s.Messages = append(s.Messages, delegate.Turn{Message: c.Output, Trained: true})
		s.Truncated = s.Truncated || c.FinishReason == delegate.FinishLength
		if c.TokenizedBy != "" {
			s.TokenizedBy = c.TokenizedBy
		}
		if v := c.PolicyVersion; v != nil && (s.PolicyVersion == nil || *v < *s.PolicyVersion) {
			x := *v
			s.PolicyVersion = &x
		}
		if c.NoTokens != "" {
			continue
		}
		// Each slice grows once a call: growing a token at a time was
		// most of the work of ending a session's samples.
		prompt := c.PromptTokenIDs[len(s.Tokens):]
		n := len(prompt) + len(c.CompletionTokenIDs)
		s.Tokens = append(append(slices.Grow(s.Tokens, n), prompt...), c.CompletionTokenIDs...)
		s.Masks = slices.Grow(s.Masks, n)
		s.Logprobs = slices.Grow(s.Logprobs, n)
		for range prompt {
			s.Masks = append(s.Masks, delegate.MaskIgnore)
			s.Logprobs = append(s.Logprobs, 1.0)
		}
		s.Masks = append(s.Masks, c.CompletionTokenIDs...)
		s.Logprobs = append(s.Logprobs, c.Logprobs...)
	}
	return out
}

// extends reports whether msgs begins with the conversation conv and adds
// at least one message.
func extends(conv []delegate.Turn, msgs []delegate.Message) bool {
	if len(msgs) <= len(conv) {
		return false
	}
	for i, t := range conv {
		a, b := t.Message, msgs[i]
		if a.Role != b.Role || a.Content != b.Content || a.Name != b.Name || a.ToolCallID != b.ToolCallID || !slices.Equal(a.ToolCalls, b.ToolCalls) {
			return false
		}
	}
	return true
}
