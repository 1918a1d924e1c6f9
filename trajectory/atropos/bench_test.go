package atropos

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
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
				if _, err := parseGroup(bc.data, noLimits, "body"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPublishBesideReads publishes 2 MB groups while another
// goroutine reads stored ones back, as GET /batch does. "shared" publishes
// on the readers' connection; "separate" on one of its own
// (WithPublishConn). It reports the publish latency's p50
// and p99 beside ns/op.
func BenchmarkPublishBesideReads(b *testing.B) {
	for _, separate := range []bool{false, true} {
		name := "shared"
		if separate {
			name = "separate"
		}
		b.Run(name, func(b *testing.B) {
			emb, err := StartEmbedded(embeddedAt(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			defer emb.Shutdown()
			nc, err := emb.Connect()
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			pc := nc
			if separate {
				if pc, err = emb.Connect(); err != nil {
					b.Fatal(err)
				}
				defer pc.Close()
			}
			ctx := context.Background()
			st, err := openJetStream(ctx, nc, pc, "B", 1, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			body := benchGroup(16, 4096)
			const stored = 8
			for i := range stored {
				if _, _, err := st.add(ctx, &group{body: body, id: fmt.Sprint("stored-", i), size: 16}, false); err != nil {
					b.Fatal(err)
				}
			}
			rctx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() {
				for k := 0; rctx.Err() == nil; k++ {
					if _, err := st.body(rctx, uint64(k%stored+1)); err != nil && rctx.Err() == nil {
						b.Error(err)
						return
					}
				}
			})
			var lat []time.Duration
			b.SetBytes(int64(len(body)))
			i := 0
			for b.Loop() {
				i++
				t0 := time.Now()
				if _, _, err := st.add(ctx, &group{body: body, id: fmt.Sprint(i), size: 16}, false); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			stop()
			wg.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
