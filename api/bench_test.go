package api

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// benchGroup is a group of n sequences of tokens, with inference_logprobs,
// as Python's json.dumps writes it.
func benchGroup(n, tokens int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	list := func(key string, f func() string) {
		b.WriteString(`"` + key + `": [`)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('[')
			for j := range tokens {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString(f())
			}
			b.WriteByte(']')
		}
		b.WriteString("], ")
	}
	b.WriteByte('{')
	list("tokens", func() string { return fmt.Sprint(rng.IntN(150000)) })
	list("masks", func() string { return fmt.Sprint(rng.IntN(150000)) })
	list("inference_logprobs", func() string { return fmt.Sprint(-rng.ExpFloat64()) })
	b.WriteString(`"scores": [` + strings.TrimSuffix(strings.Repeat("1.0, ", n), ", ") + `]}`)
	return []byte(b.String())
}

func BenchmarkParseGroup(b *testing.B) {
	hashed := benchGroup(16, 4096)
	named := append(bytes.TrimSuffix(slices.Clone(hashed), []byte("}")), `, "group_overrides": {"group_id": "g1"}}`...)
	for _, bc := range []struct {
		name string
		data []byte
	}{
		{"hashed", hashed}, // no group_id: the id is a hash of the body
		{"group_id", named},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.data)))
			for b.Loop() {
				if _, err := parseGroup(bc.data, "body"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
