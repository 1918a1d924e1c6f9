package world

import (
	"fmt"
	"os"
	"testing"
)

// TestReport prints the figures of the package doc. WORLD_REPORT=1 runs it:
//
//	WORLD_REPORT=1 go test ./world -run TestReport -v
func TestReport(t *testing.T) {
	if os.Getenv("WORLD_REPORT") == "" {
		t.Skip("set WORLD_REPORT=1 to print the design figures")
	}
	for _, lvl := range []int{3, TrainLevel} {
		ps, err := Generate(Levels()[lvl], 1, Test, 2000)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			e := Route(ps[i], Selective)
			for _, m := range e.Delegator[0].Messages {
				fmt.Printf("[%s] %s %v\n", m.Role, m.Content, m.ToolCalls)
			}
			fmt.Println("----")
		}
		fmt.Printf("level %d:\n", lvl)
		if err := Report(os.Stdout, ps, 1, DefaultPrices(), DefaultReward(), DesignAccuracy()); err != nil {
			t.Fatal(err)
		}
	}
	for lvl := 1; lvl <= 4; lvl++ {
		est, ok, err := Distinct(Levels()[lvl], 7, 20000)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("level %d: distinct ~%s (estimate %v)\n", lvl, sigFigs(est), ok)
	}
}
