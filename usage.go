package delegate

// Usage is the token account of one call, as the backend reported it.
// Remote APIs report their usage block; local models count with our tokenizer.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// CachedTokens is the part of PromptTokens served from a prompt cache.
	CachedTokens int `json:"cached_tokens,omitempty"`
}

// Add returns the sum of two usages.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + v.PromptTokens,
		CompletionTokens: u.CompletionTokens + v.CompletionTokens,
		CachedTokens:     u.CachedTokens + v.CachedTokens,
	}
}

// Total is prompt plus completion tokens.
func (u Usage) Total() int { return u.PromptTokens + u.CompletionTokens }

// Price is what a model costs, in dollars per million tokens.
type Price struct {
	Input       float64 `json:"input" yaml:"input"`
	CachedInput float64 `json:"cached_input" yaml:"cached_input"`
	Output      float64 `json:"output" yaml:"output"`
}

// Cost turns a usage into dollars. Cached prompt tokens are charged at
// CachedInput, the rest of the prompt at Input.
func (p Price) Cost(u Usage) float64 {
	cached := u.CachedTokens
	if cached > u.PromptTokens {
		cached = u.PromptTokens
	}
	fresh := u.PromptTokens - cached
	return (float64(fresh)*p.Input + float64(cached)*p.CachedInput + float64(u.CompletionTokens)*p.Output) / 1e6
}
