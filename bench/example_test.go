package bench_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/score"
	"github.com/delegatelab/delegate/strategy"
)

// Two arms run the same strategy on two tasks whose answers are 4 and 5.
// One arm's model always answers 4, the other's always 5.
func ExampleRun() {
	dir, err := os.MkdirTemp("", "eval-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	arm := func(name, reply string) bench.Arm {
		m := modeltest.New(name, modeltest.Reply(`Final answer: \boxed{`+reply+`}`))
		s, err := strategy.New(strategy.NameSingle, strategy.Roles{Single: delegate.Agent{Model: m}}, strategy.DefaultConfig())
		if err != nil {
			log.Fatal(err)
		}
		return bench.Arm{Name: name, Strategy: s}
	}
	tasks := []delegate.Task{
		{ID: "1", Dataset: "gsm8k", Prompt: "What is 2+2?", Answer: "4"},
		{ID: "2", Dataset: "gsm8k", Prompt: "What is 2+3?", Answer: "5"},
	}
	cfg := bench.DefaultConfig()
	cfg.Results = filepath.Join(dir, "results.jsonl")
	rep, err := bench.Run(context.Background(), cfg, tasks, []bench.Arm{arm("fours", "4"), arm("fives", "5")}, score.Verify, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rep.Rows {
		fmt.Printf("%s: %d/%d correct, Wilson [%.3f, %.3f]\n", r.Arm, r.Correct, r.N, r.CI.Lo, r.CI.Hi)
	}
	// Output:
	// fours: 1/2 correct, Wilson [0.095, 0.905]
	// fives: 1/2 correct, Wilson [0.095, 0.905]
}
