//go:build !race

package train

import (
	"context"
	"strings"
	"testing"
)

// TestShippedTraining trains the shipped delegator briefly on the default
// world and checks, on held-out validation items, that its reward rose
// against the pretrained policy's on a paired test (the acceptance check
// delegate train prints). Too slow under the race detector, it runs in the
// README's second test command:
//
//	go test -count=1 -run Shipped ./train
func TestShippedTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the shipped delegator for a minute")
	}
	cfg := DefaultConfig()
	cfg.OutDir = t.TempDir()
	cfg.EvalSplit = "validation"
	cfg.RL.Steps, cfg.RL.Schedule.Total = shippedSteps, shippedSteps
	cfg.EvalItems = 100
	cfg.RuleItems = 50
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := res.Table.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("after %d steps:\n%s", res.Steps, b.String())
	for _, c := range res.Table.Checks {
		if strings.HasPrefix(c.Name, "RL-trained reward beats the pretrained delegator") && !c.Pass {
			t.Errorf("%s: not met: %s", c.Name, c.Detail)
		}
	}
}

// shippedSteps is the length of TestShippedTraining's run.
const shippedSteps = 60
