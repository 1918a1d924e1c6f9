package local

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/constrain"
	"github.com/delegatelab/delegate/models"
)

// BenchmarkMaskHFScale measures one sampling step's mask over a vocabulary of Qwen's size.
// The vocabulary is 151,646 tokens of 1 to 10 random bytes, mostly
// printable ASCII. It measures three states of a JSON reply: inside a
// string, before an object's key, and after a key. Inside a string nearly
// every token is allowed; after a key, one byte is.
func BenchmarkMaskHFScale(b *testing.B) {
	const vocab = 151646
	rng := rand.New(rand.NewPCG(1, 1))
	v := &vocabSyms{syms: make([][]int, vocab), stop: make([]bool, vocab)}
	for id := range vocab {
		n := 1 + rng.IntN(10)
		s := make([]int, n)
		for i := range s {
			s[i] = 0x20 + rng.IntN(0x5f)
			if rng.IntN(20) == 0 {
				s[i] = 0x80 + rng.IntN(0x80)
			}
		}
		v.syms[id] = s
	}
	v.stop[0] = true
	v.markPlain()
	schema, err := constrain.Compile([]byte(`{"type":"object","properties":{"answer":{"type":"string"},"n":{"type":"integer"}},"required":["answer"],"additionalProperties":false}`))
	if err != nil {
		b.Fatal(err)
	}
	spec := &constrain.Spec{JSON: true, Content: schema, NoCalls: true}
	for _, st := range []struct{ name, prefix string }{
		{"in a string", `{"answer":"the a`},
		{"before a key", `{`},
		{"after a key", `{"answer"`},
	} {
		b.Run(st.name, func(b *testing.B) {
			c := &replyConstraint{r: constrain.NewReply(spec), try: constrain.NewReply(spec), v: v}
			for i := 0; i < len(st.prefix); i++ {
				if !c.r.Feed(int(st.prefix[i])) {
					b.Fatalf("prefix %q refused", st.prefix)
				}
			}
			allowed := 0
			for b.Loop() {
				allowed = 0
				for id := range vocab {
					if c.Allows(id) {
						allowed++
					}
				}
			}
			b.ReportMetric(float64(allowed), "allowed")
		})
	}
}

// BenchmarkConstrainedBatch measures a batch of 8 replies of the shipped solver.
// Each is 48 tokens at temperature 1. The batch runs free, with one row
// under response_format json_object and the others free, and with every row
// constrained. Compare the ns/token, since constrained replies are shorter.
func BenchmarkConstrainedBatch(b *testing.B) {
	p, _, err := models.Load("solver")
	if err != nil {
		b.Fatal(err)
	}
	m, err := New(p, Config{Name: "solver", MaxBatch: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	temp := 1.0
	format := &delegate.ResponseFormat{Type: delegate.FormatJSONObject}
	for _, bc := range []struct {
		name        string
		constrained int
	}{{"free", 0}, {"one constrained", 1}, {"all constrained", 8}} {
		b.Run(bc.name, func(b *testing.B) {
			seed := int64(0)
			var tokens atomic.Int64
			for b.Loop() {
				var g errgroup.Group
				for i := range 8 {
					seed++
					req := &delegate.Request{Messages: []delegate.Message{delegate.User("What is 47*28?")}, Temperature: &temp, MaxTokens: 48, Seed: new(seed)}
					if i < bc.constrained {
						req.ResponseFormat = format
					}
					g.Go(func() error {
						resp, err := m.Chat(context.Background(), req)
						if err == nil {
							tokens.Add(int64(resp.Usage.CompletionTokens))
						}
						return err
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tokens.Load()), "ns/token")
		})
	}
}
