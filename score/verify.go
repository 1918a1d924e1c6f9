package score

import (
	"fmt"

	"github.com/delegatelab/delegate"
)

// Verify checks response against the reference answer of t.
// It chooses the verifier by t.Dataset: "gsm8k" Numeric, "math" Math, "mmlu"
// Choice, "bbh" BBH with t.Subject as the task. A dataset without reference
// answers, such as "open", is an error: it needs a judge.
//
// Verify is a delegate.Verifier.
func Verify(t delegate.Task, response string) (delegate.Verdict, error) {
	switch t.Dataset {
	case "gsm8k":
		return Numeric(response, t.Answer), nil
	case "math":
		return Math(response, t.Answer), nil
	case "mmlu":
		return Choice(response, t.Answer), nil
	case "bbh":
		return BBH(t.Subject, response, t.Answer), nil
	}
	return delegate.Verdict{}, fmt.Errorf("verify task %q: no verifier for dataset %q", t.ID, t.Dataset)
}

var _ delegate.Verifier = Verify
