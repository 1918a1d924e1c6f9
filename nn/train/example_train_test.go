package train_test

import (
	"context"
	"fmt"
	"log"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/train"
)

// A training loop: a tiny model learns sequences that count up by one
// modulo 8. Position 0 of each sequence is masked with weight 0.
func ExampleTrainer() {
	c := nn.Config{Vocab: 8, Dim: 16, Layers: 1, Heads: 2, Hidden: 32, Context: 8}.WithDefaults()
	p, err := nn.Alloc(c)
	if err != nil {
		log.Fatal(err)
	}
	p.Init(1)
	tr, err := train.NewTrainer(p, train.Config{
		AdamW:    train.DefaultAdamW(),
		Schedule: train.Schedule{Warmup: 5, Total: 40, MaxLR: 3e-2, MinLR: 3e-3},
		ClipNorm: 1,
	})
	if err != nil {
		log.Fatal(err)
	}
	b := train.Batch{B: 8, T: 8}
	for s := 0; s < b.B; s++ {
		for t := 0; t < b.T; t++ {
			b.Inputs = append(b.Inputs, (s+t)%8)
			b.Targets = append(b.Targets, (s+t+1)%8)
			w := float32(1)
			if t == 0 {
				w = 0
			}
			b.Weights = append(b.Weights, w)
		}
	}
	var first, last train.StepStats
	for i := 0; i < 40; i++ {
		st, err := tr.Step(context.Background(), []train.Batch{b})
		if err != nil {
			log.Fatal(err)
		}
		if i == 0 {
			first = st
		}
		last = st
	}
	fmt.Printf("tokens per step %d, loss fell below a tenth: %v\n", last.Tokens, last.Loss < first.Loss/10)
	// Output: tokens per step 56, loss fell below a tenth: true
}
