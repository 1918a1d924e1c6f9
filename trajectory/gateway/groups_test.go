package gateway_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// TestRecordsSayTokenizedBy checks that a group record says which ids the
// gateway tokenized, per sequence. It says nothing when the engine gave
// them all.
func TestRecordsSayTokenizedBy(t *testing.T) {
	sample := func(by string) gateway.Sample {
		return gateway.Sample{Role: "delegator", TokenizedBy: by,
			Sequence: delegate.Sequence{Tokens: []int{1, 2}, Masks: []int{-100, 2}, Logprobs: []float64{1, -0.5}}}
	}
	member := func(key string, r float64, samples ...gateway.Sample) *gateway.Finished {
		return &gateway.Finished{Version: gateway.FinishedVersion, Key: key, Group: "g", Reward: r, Samples: samples}
	}
	tests := []struct {
		name    string
		members []*gateway.Finished
		want    []string
	}{
		{"engine ids only", []*gateway.Finished{member("a", 1, sample("")), member("b", 0, sample(""))}, nil},
		{"one sequence tokenized by the gateway", []*gateway.Finished{
			member("a", 1, sample(""), sample(gateway.TokenizedByGateway)), member("b", 0, sample("")),
		}, []string{"", gateway.TokenizedByGateway, ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := gateway.Records(tc.members, reward.GRPO)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 {
				t.Fatalf("%d records, want 1", len(recs))
			}
			line, err := json.Marshal(recs[0])
			if err != nil {
				t.Fatal(err)
			}
			got, err := rollout.DecodeGroup(line)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.TokenizedBy, tc.want) {
				t.Errorf("tokenized_by %q, want %q (line %s)", got.TokenizedBy, tc.want, line)
			}
		})
	}
}
