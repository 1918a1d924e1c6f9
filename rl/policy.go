package rl

import (
	"context"

	"github.com/delegatelab/delegate"
)

// WrapPolicy returns m with every request adjusted for training: logprobs
// with token ids requested (the strategies do not ask for them, and an
// episode needs them), the temperature set to cfg.Temperature, and
// max_tokens capped at cfg.MaxNewTokens. The caller's request is not
// modified. The result is safe for concurrent use when m is.
func WrapPolicy(m delegate.Model, cfg Config) delegate.Model {
	return &policyModel{m: m, temp: cfg.Temperature, maxNew: cfg.MaxNewTokens}
}

type policyModel struct {
	m      delegate.Model
	temp   float64
	maxNew int
}

func (p *policyModel) Name() string { return p.m.Name() }

func (p *policyModel) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	r := *req
	r.Logprobs = true
	t := p.temp
	r.Temperature = &t
	if r.MaxTokens <= 0 || r.MaxTokens > p.maxNew {
		r.MaxTokens = p.maxNew
	}
	return p.m.Chat(ctx, &r)
}
