package strategy_test

import (
	"context"
	"fmt"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/strategy"
)

func ExampleNew() {
	// A strong model that delegates one question, then answers.
	strong := modeltest.New("strong", modeltest.Script(
		modeltest.ToolCalls(modeltest.Call("call_1", "delegate", `{"question": "What is 17 * 3?"}`)),
		modeltest.Text("The assistant says 51.\nFinal answer: 51"),
	))
	weak := modeltest.New("weak", modeltest.Reply(`17 * 3 = \boxed{51}`))
	price := delegate.Price{Input: 2.5, Output: 10} // dollars per million tokens
	s, err := strategy.New(strategy.NameRoute, strategy.Roles{
		Strong: delegate.Agent{Model: strong, Price: price},
		Weak:   delegate.Agent{Model: weak},
	}, strategy.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	tr, err := s.Run(context.Background(), "What is 17 * 3?", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("answer:", tr.Answer)
	for _, n := range tr.Root.Children {
		fmt.Println(n.Name, len(n.Children), "nodes")
	}
	fmt.Println("strong calls:", tr.Roles[strategy.RoleStrong].Calls, "weak calls:", tr.Roles[strategy.RoleWeak].Calls)
	// Output:
	// answer: 51
	// turn 1 2 nodes
	// turn 2 1 nodes
	// strong calls: 2 weak calls: 1
}
