package local

import (
	"math/rand/v2"
	"testing"

	"github.com/delegatelab/delegate/constrain"
)

// BenchmarkMaskHFScale measures one sampling step's mask over a
// vocabulary of Qwen's size (151,646 tokens of 1 to 10 random bytes,
// printable ASCII mostly) in three states of a JSON reply: inside a
// string (nearly every token allowed), before an object's key, and after
// a key (one byte allowed).
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
