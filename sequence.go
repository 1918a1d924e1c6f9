package delegate

import "slices"

// Turn is one message of a Sequence, marked trained when the policy
// generated it.
type Turn struct {
	Message
	Trained bool `json:"trained"`
}

// Sequence is one conversation of the policy, with the policy's turns marked trained.
// Each call extends the previous one's conversation.
// Tokens, Masks and Logprobs are set when the backend returned token ids and logprobs for every call.
// They then have the same length.
// Masks is -100 at untrained positions and the token id at trained ones.
// Logprobs is 1.0 at untrained positions.
type Sequence struct {
	Calls    []int     `json:"calls"` // trace node IDs
	Messages []Turn    `json:"messages"`
	Tokens   []int     `json:"tokens,omitempty"`
	Masks    []int     `json:"masks,omitempty"`
	Logprobs []float64 `json:"inference_logprobs,omitempty"`
	// NoTokens says why Tokens is empty.
	NoTokens string `json:"no_tokens,omitempty"`
	// Truncated is set when a call of it stopped at max_tokens.
	Truncated bool `json:"truncated,omitempty"`
	// Split is set when the sequence continues the previous conversation but starts a new sample.
	// That happens when its prompt ids did not extend the previous ids: a discontinuous trajectory.
	Split bool `json:"split,omitempty"`
	// PolicyVersion is the oldest version of the weights that generated
	// its turns, when the backend said (Response.PolicyVersion).
	PolicyVersion *int `json:"policy_version,omitempty"`
}

// oldest keeps the older of the sequence's version and v.
func (s *Sequence) oldest(v *int) {
	if v != nil && (s.PolicyVersion == nil || *v < *s.PolicyVersion) {
		x := *v
		s.PolicyVersion = &x
	}
}

// MaskIgnore is the label of a position that is not trained.
const MaskIgnore = -100

// Sequences builds the policy's conversations from a trace's calls of roles.
// The sequences come in the order of their first calls. A call whose
// messages are its role's previous sequence's conversation plus new
// messages extends that sequence; any other call starts a new one. The
// next turn of route's strong model, after the weak model's answers, is
// such a call. So each role's sequences are those Sequences gives for that
// role alone. Failed calls, those without output, are left out: nothing
// was generated to train.
//
// Token ids come from the backend: the call's PromptTokenIDs followed by the
// token ids of its logprobs. An extending call must have a prompt whose ids
// start with the sequence's tokens so far. That is prefix-stable rendering,
// as the local chat template and vLLM give. Where they do not, as when a
// chat template re-rendered earlier turns differently, the call starts a
// new sequence with its own prompt ids instead of gluing mismatched ids.
// Split is set on that sequence: a discontinuous trajectory. A call
// without ids leaves its sequence without tokens, and NoTokens says why.
func Sequences(t *Trace, roles ...string) []Sequence {
	var out []Sequence
	last := map[string]int{} // each role's latest sequence in out
	for _, n := range t.Calls() {
		if !slices.Contains(roles, n.Role) || n.Output == nil {
			continue
		}
		ids, lps, why := callTokens(n)
		split := false
		if k, ok := last[n.Role]; ok && extends(out[k].Messages, n.Messages) {
			s := &out[k]
			switch {
			case s.NoTokens != "" || why != "":
			case len(n.PromptTokenIDs) < len(s.Tokens) || !slices.Equal(n.PromptTokenIDs[:len(s.Tokens)], s.Tokens):
				split = true
			}
			if !split {
				for _, m := range n.Messages[len(s.Messages):] {
					s.Messages = append(s.Messages, Turn{Message: m})
				}
				s.Messages = append(s.Messages, Turn{Message: *n.Output, Trained: true})
				s.Calls = append(s.Calls, n.ID)
				s.Truncated = s.Truncated || n.FinishReason == FinishLength
				s.oldest(n.PolicyVersion)
				switch {
				case s.NoTokens != "":
				case why != "":
					s.dropTokens(why)
				default:
					s.appendTokens(n.PromptTokenIDs[len(s.Tokens):], ids, lps)
				}
				continue
			}
		}
		s := Sequence{Calls: []int{n.ID}, Truncated: n.FinishReason == FinishLength, Split: split}
		s.oldest(n.PolicyVersion)
		for _, m := range n.Messages {
			s.Messages = append(s.Messages, Turn{Message: m})
		}
		s.Messages = append(s.Messages, Turn{Message: *n.Output, Trained: true})
		if why != "" {
			s.NoTokens = why
		} else {
			s.appendTokens(n.PromptTokenIDs, ids, lps)
		}
		last[n.Role] = len(out)
		out = append(out, s)
	}
	return out
}

// callTokens returns the generated ids and logprobs of a call, or why they
// are not available.
func callTokens(n *Node) (ids []int, lps []float64, why string) {
	if len(n.PromptTokenIDs) == 0 {
		return nil, nil, "the backend returned no prompt token ids"
	}
	if len(n.Logprobs) == 0 {
		return nil, nil, "the backend returned no logprobs"
	}
	for _, lp := range n.Logprobs {
		if lp.TokenID < 0 {
			return nil, nil, "the backend returned logprobs without token ids"
		}
		ids = append(ids, lp.TokenID)
		lps = append(lps, lp.Logprob)
	}
	return ids, lps, ""
}

// appendTokens adds untrained prompt ids and trained generated ids.
func (s *Sequence) appendTokens(prompt, gen []int, lps []float64) {
	for _, id := range prompt {
		s.Tokens = append(s.Tokens, id)
		s.Masks = append(s.Masks, MaskIgnore)
		s.Logprobs = append(s.Logprobs, 1.0)
	}
	s.Tokens = append(s.Tokens, gen...)
	s.Masks = append(s.Masks, gen...)
	s.Logprobs = append(s.Logprobs, lps...)
}

func (s *Sequence) dropTokens(why string) {
	s.Tokens, s.Masks, s.Logprobs = nil, nil, nil
	s.NoTokens = why
}

// extends reports whether msgs begins with the conversation conv and adds
// at least one message.
func extends(conv []Turn, msgs []Message) bool {
	if len(msgs) <= len(conv) {
		return false
	}
	for i, t := range conv {
		if !sameMessage(t.Message, msgs[i]) {
			return false
		}
	}
	return true
}

func sameMessage(a, b Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.Name == b.Name &&
		a.ToolCallID == b.ToolCallID && slices.Equal(a.ToolCalls, b.ToolCalls)
}
