package infer

import (
	"context"
	"math"
	"slices"
	"testing"
)

// FuzzEngineGenerate feeds arbitrary requests to an engine.
// Each must be rejected with an error or answered with a well-formed
// result, never a panic or a hang.
func FuzzEngineGenerate(f *testing.F) {
	p := testParams(f, testConfig(false), 8)
	e, err := NewEngine(p, engineConfig(func(c *EngineConfig) { c.MaxBatch, c.PrefillChunk = 2, 5 }))
	if err != nil {
		f.Fatalf("new engine: %v", err)
	}
	f.Cleanup(func() { e.Close() })
	f.Add([]byte{1, 2, 3}, 5, 1.0, 0.9, 0, []byte{7}, uint64(1), 2)
	f.Add([]byte{}, 0, 0.0, 0.0, 0, []byte{}, uint64(0), 0)
	f.Add([]byte{200}, 3, 0.5, 0.5, 3, []byte{1, 2}, uint64(9), 0)
	f.Add(make([]byte, 40), 1, 2.0, 1.0, 1, []byte{}, uint64(3), 1)
	f.Add([]byte{5, 6}, -1, math.Inf(1), 1.5, -2, []byte{0}, uint64(4), 99)
	f.Add([]byte{36, 0, 12}, 0, 1.0, 0.0, 0, []byte{12, 12}, uint64(5), 0)
	f.Fuzz(func(t *testing.T, prompt []byte, maxNew int, temp, topP float64, topK int, stop []byte, seed uint64, top int) {
		req := GenRequest{MaxNew: maxNew, Temperature: temp, TopP: topP, TopK: topK, Seed: seed, TopLogprobs: top}
		for _, b := range prompt {
			req.Prompt = append(req.Prompt, int(b)) // ids above 36 are out of range
		}
		if len(stop) > 0 {
			req.StopTokens = []int{int(stop[0]) % 40}
			req.StopSeqs = [][]int{{}}
			for _, b := range stop[1:] {
				req.StopSeqs[0] = append(req.StopSeqs[0], int(b)%40)
			}
			if len(req.StopSeqs[0]) == 0 {
				req.StopSeqs = nil
			}
		}
		res, err := e.Generate(context.Background(), req)
		if err != nil {
			return
		}
		c := p.Config
		limit := c.Context - len(req.Prompt)
		if req.MaxNew > 0 {
			limit = min(limit, req.MaxNew)
		}
		if len(res.Tokens) > limit || len(res.Logprobs) != len(res.Tokens) || res.PromptTokens != len(req.Prompt) {
			t.Fatalf("result %+v breaks the limits (limit %d)", res, limit)
		}
		for i, tok := range res.Tokens {
			if tok < 0 || tok >= c.Vocab || !(res.Logprobs[i] <= 0) {
				t.Fatalf("token %d logprob %v at step %d out of range", tok, res.Logprobs[i], i)
			}
		}
		switch res.Finish {
		case FinishLength:
			if len(res.Tokens) != limit {
				t.Fatalf("finish length after %d tokens, limit %d", len(res.Tokens), limit)
			}
		case FinishStop:
			last := res.Tokens[len(res.Tokens)-res.StopLen:]
			if !slices.Contains(req.StopTokens, last[len(last)-1]) && !slices.ContainsFunc(req.StopSeqs, func(s []int) bool { return slices.Equal(s, last) }) {
				t.Fatalf("finish stop on %v, which matches no stop", last)
			}
		default:
			t.Fatalf("finish = %q", res.Finish)
		}
		if req.TopLogprobs > 0 && len(res.Top) != len(res.Tokens) {
			t.Fatalf("%d alternative lists for %d tokens", len(res.Top), len(res.Tokens))
		}
	})
}
