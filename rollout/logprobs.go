package rollout

import (
	"context"

	"github.com/delegatelab/delegate"
)

// RequestLogprobs wraps the policy's model so that every request asks for
// the logprob (and, where the backend can, the token id) of each generated
// token. Strategies do not ask for them; groups.jsonl has tokens, masks and
// inference_logprobs only for calls whose backend returned prompt token ids
// and per-token ids (the local backend, vLLM with token ids on). The
// wrapper copies the request; it is safe for concurrent use when m is.
func RequestLogprobs(m delegate.Model) delegate.Model { return logprobModel{m} }

type logprobModel struct{ delegate.Model }

func (m logprobModel) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	if req == nil || req.Logprobs {
		return m.Model.Chat(ctx, req)
	}
	r := *req
	r.Logprobs = true
	return m.Model.Chat(ctx, &r)
}
