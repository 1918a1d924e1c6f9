package gateway

import (
	"slices"
	"testing"

	"github.com/delegatelab/delegate"
)

// TestSamples checks the prefix-extension rule on token ids, or on
// messages for calls without ids. Extensions join, forks and other roles
// stay apart, and untrained roles make no samples.
func TestSamples(t *testing.T) {
	u := func(s string) delegate.Message { return delegate.User(s) }
	a := func(s string) delegate.Message { return delegate.Assistant(s) }
	call := func(role string, trained bool, prompt, gen []int, msgs ...delegate.Message) Call {
		c := Call{Role: role, Trained: trained, Request: delegate.Request{Messages: msgs}, Output: a("out"), PromptTokenIDs: prompt, CompletionTokenIDs: gen}
		for range gen {
			c.Logprobs = append(c.Logprobs, -0.5)
		}
		if prompt == nil {
			c.NoTokens = "the backend returned no prompt token ids"
		}
		return c
	}
	tests := []struct {
		name  string
		calls []Call
		want  [][]int // the calls of each sample
		roles []string
	}{
		{"extension", []Call{
			call("p", true, []int{1, 2}, []int{3}, u("q")),
			call("p", true, []int{1, 2, 3, 4}, []int{5}, u("q"), a("out"), u("r")),
		}, [][]int{{0, 1}}, []string{"p"}},
		{"fork from an earlier turn", []Call{
			call("p", true, []int{1, 2}, []int{3}, u("q")),
			call("p", true, []int{1, 2, 3, 4}, []int{5}, u("q"), a("out"), u("r")),
			call("p", true, []int{1, 2, 3, 6}, []int{7}, u("q"), a("out"), u("s")),
		}, [][]int{{0, 1}, {2}}, []string{"p", "p"}},
		{"two forks of one prompt", []Call{
			call("p", true, []int{1, 2}, []int{3}, u("q")),
			call("p", true, []int{1, 2}, []int{4}, u("q")),
		}, [][]int{{0}, {1}}, []string{"p", "p"}},
		{"interleaved conversations", []Call{
			call("p", true, []int{1}, []int{2}, u("x")),
			call("p", true, []int{9}, []int{8}, u("y")),
			call("p", true, []int{1, 2, 3}, []int{4}, u("x"), a("out"), u("z")),
		}, [][]int{{0, 2}, {1}}, []string{"p", "p"}},
		{"roles apart, untrained left out", []Call{
			call("p", true, []int{1}, []int{2}, u("x")),
			call("q", true, []int{1, 2, 3}, []int{4}, u("x"), a("out"), u("z")),
			call("r", false, []int{1, 2, 3}, []int{4}, u("x"), a("out"), u("z")),
		}, [][]int{{0}, {1}}, []string{"p", "q"}},
		{"no ids: matched on messages", []Call{
			call("p", true, nil, nil, u("x")),
			call("p", true, nil, nil, u("x"), a("out"), u("z")),
			call("p", true, nil, nil, u("x"), a("other"), u("z")),
		}, [][]int{{0, 1}, {2}}, []string{"p", "p"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.calls {
				tc.calls[i].Index = i
			}
			got := Samples(tc.calls)
			var calls [][]int
			var roles []string
			for _, s := range got {
				calls = append(calls, s.Calls)
				roles = append(roles, s.Role)
			}
			if !slices.EqualFunc(calls, tc.want, slices.Equal) || !slices.Equal(roles, tc.roles) {
				t.Fatalf("samples of calls %v roles %v, want %v %v", calls, roles, tc.want, tc.roles)
			}
			for _, s := range got {
				if len(s.Tokens) != len(s.Masks) || len(s.Tokens) != len(s.Logprobs) {
					t.Errorf("sample %v: %d tokens, %d masks, %d logprobs", s.Calls, len(s.Tokens), len(s.Masks), len(s.Logprobs))
				}
				if (s.NoTokens == "") != (len(s.Tokens) > 0) {
					t.Errorf("sample %v: tokens %v with no_tokens %q", s.Calls, s.Tokens, s.NoTokens)
				}
			}
		})
	}
	// The masks of an extension: prompt ids ignored, generated ids trained.
	s := Samples(tests[0].calls)[0]
	if want := []int{-100, -100, 3, -100, 5}; !slices.Equal(s.Masks, want) {
		t.Errorf("masks %v, want %v", s.Masks, want)
	}
	if want := []float64{1, 1, -0.5, 1, -0.5}; !slices.Equal(s.Logprobs, want) {
		t.Errorf("logprobs %v, want %v", s.Logprobs, want)
	}
}
