package gateway_test

import (
	"context"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// TestGatewayTemperature checks that Config.Temperature replaces a trained
// role's temperature. An untrained role keeps what the agent asked.
func TestGatewayTemperature(t *testing.T) {
	ctx := context.Background()
	models := shipped(t)
	h := newHarness(t, t.TempDir(), models)
	h.crash()
	one := 1.0
	h.cfg.Temperature = &one
	h.open()
	defer h.srv.Close()

	// A seed at which sampling at 1 and at 0 answer apart, so that the
	// answer tells which temperature the model used.
	zero := 0.0
	sys := delegate.Message{Role: delegate.RoleSystem, Content: system["solver"]}
	var seed int64
	var hot, cold []float64
	for seed = 1; seed <= 50; seed++ {
		req := func(temp *float64) delegate.Request {
			s := seed
			return delegate.Request{Messages: []delegate.Message{sys, delegate.User("1234*5678")}, Temperature: temp, Seed: &s}
		}
		_, hotIDs, h1 := direct(t, models["solver"], req(&one))
		_, coldIDs, c1 := direct(t, models["solver"], req(&zero))
		if !slices.Equal(hotIDs, coldIDs) {
			hot, cold = h1, c1
			break
		}
	}
	if hot == nil {
		t.Fatal("the solver answers 1234*5678 alike at temperatures 1 and 0 for seeds 1 to 50")
	}
	for _, tc := range []struct {
		name, role string
		want       []float64
	}{
		{"trained role samples at the gateway's temperature", "critic", hot},
		{"untrained role samples as asked", "", cold},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := h.session(`{"group":"temperature"}`)
			params := openai.ChatCompletionNewParams{Model: "solver", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("1234*5678")},
				Temperature: openai.Float(0), Seed: openai.Int(seed), Logprobs: openai.Bool(true)}
			var opts []option.RequestOption
			if tc.role != "" {
				opts = append(opts, option.WithHeader(gateway.RoleHeader, tc.role))
			}
			resp, err := c.Chat.Completions.New(ctx, params, opts...)
			if err != nil {
				t.Fatal(err)
			}
			var got []float64
			for _, lp := range resp.Choices[0].Logprobs.Content {
				got = append(got, lp.Logprob)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("logprobs %v, want %v", got, tc.want)
			}
		})
	}
}
