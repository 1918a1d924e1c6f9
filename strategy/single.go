package strategy

import (
	"context"

	"github.com/delegatelab/delegate"
)

// single is the baseline: one call, the reply's final answer.
type single struct {
	agent delegate.Agent
	cfg   Config
	p     prompts
}

func (s *single) Name() string { return NameSingle }

// Run asks the single agent once. Events go to events (nil: none) by
// non-blocking sends; the caller owns and closes the channel.
func (s *single) Run(ctx context.Context, request string, events chan<- delegate.Event) (*delegate.Trace, error) {
	rec := delegate.NewRecorder(NameSingle, request, events)
	msgs, err := s.p.messages("single_system", "single_user", PromptData{Request: request})
	if err != nil {
		return finishRun(ctx, rec, NameSingle, "", delegate.Failed(delegate.FailurePrompt, "%v", err))
	}
	resp, err := chat(ctx, rec, nil, NodeAnswer, s.agent, s.cfg.Single.request(0, msgs))
	if err != nil {
		return finishRun(ctx, rec, NameSingle, "", delegate.Failed(delegate.FailureCall, "%v", err))
	}
	answer, fail := finalAnswer(resp, NodeAnswer)
	return finishRun(ctx, rec, NameSingle, answer, fail)
}

// finalAnswer extracts the answer of a single or route reply.
// The answer is boxed or after "Final answer:". It also says what was wrong
// with the reply, if anything.
func finalAnswer(resp *delegate.Response, name string) (answer string, fail delegate.Failure) {
	answer, ok := delegate.ExtractAnswer(resp.Text())
	switch {
	case resp.Choices[0].FinishReason == delegate.FinishLength:
		fail = delegate.Failed(delegate.FailureTruncated, "%s stopped at max_tokens", name)
	case !ok:
		fail = delegate.Failed(delegate.FailureAnswerFormat, "%s gave no \\boxed{} and no %q; the whole reply is the answer", name, delegate.FinalAnswerMarker)
	}
	return answer, fail
}
