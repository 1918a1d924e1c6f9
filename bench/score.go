package bench

import (
	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/score"
)

// Score is the Verifier of package score: score.Verify picks the checker
// by the task's dataset (gsm8k, math, mmlu, bbh) and extracts the answer
// from the response itself. A task of another dataset (open-ended
// requests, which need a judge) is an error, so its items are recorded as
// failed rather than silently scored.
func Score(task delegate.Task, response string) (correct bool, extracted string, err error) {
	r, err := score.Verify(task, response)
	if err != nil {
		return false, "", err
	}
	return r.Correct, r.Extracted, nil
}

var _ Verifier = Score
