package gateway_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/store"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// byteTemplate is this test's chat template. Each message is
// "role:content\n", one id per byte, and id 0 closes the answer.
type byteTemplate struct{}

func (byteTemplate) Prompt(msgs []delegate.Message, _ []delegate.Tool) ([]int, error) {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(string(m.Role) + ":" + m.Content + "\n")
	}
	b.WriteString("assistant:")
	return byteIDs(b.String()), nil
}

func (byteTemplate) Completion(_ []delegate.Message, _ []delegate.Tool, out delegate.Message) ([]int, error) {
	return append(byteIDs(out.Content), 0), nil
}

func byteIDs(s string) []int {
	var ids []int
	for _, c := range []byte(s) {
		ids = append(ids, int(c))
	}
	return ids
}

// fakeBackend answers "42" and gives ids as the user's message asks.
// "ids" gives the template's, "none" logprobs without ids, "drift" a
// prompt the template does not give, "bare" neither ids nor logprobs.
type fakeBackend struct{}

func (fakeBackend) Name() string { return "remote" }

func (fakeBackend) Chat(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
	mode := req.Messages[len(req.Messages)-1].Content
	resp := &delegate.Response{Model: "remote", Choices: []delegate.Choice{{Message: delegate.Message{Role: delegate.RoleAssistant, Content: "42"}, FinishReason: "stop"}}}
	ch := &resp.Choices[0]
	out, _ := byteTemplate{}.Completion(nil, nil, ch.Message)
	for i, id := range out {
		lp := delegate.TokenLogprob{Token: string(rune(id)), TokenID: -1, Logprob: -0.5 - float64(i)}
		if mode == "ids" || mode == "drift" {
			lp.TokenID = id
		}
		ch.Logprobs = append(ch.Logprobs, lp)
	}
	switch mode {
	case "ids":
		resp.PromptTokenIDs, _ = byteTemplate{}.Prompt(req.Messages, req.Tools)
	case "drift":
		p, _ := byteTemplate{}.Prompt(req.Messages, req.Tools)
		resp.PromptTokenIDs = append([]int{7}, p...) // a token the template never writes
	case "bare":
		ch.Logprobs = nil
	}
	return resp, nil
}

// TestGatewayTokenizes checks calls of a backend behind a chat template.
// Without ids, the gateway tokenizes them, marks them so and keeps the
// backend's logprobs. Matching ids are kept. Differing ids drift and make
// no tokens. Without logprobs, calls cannot be tokenized.
func TestGatewayTokenizes(t *testing.T) {
	dir := t.TempDir()
	var logs syncBuffer
	cfg := gateway.DefaultConfig()
	cfg.Dir, cfg.Token, cfg.GroupSize, cfg.Tokenizers = dir, "admin-token", 2, map[string]gateway.Tokenizer{"remote": byteTemplate{}}
	gw, err := gateway.Open(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)), fakeBackend{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	h := &harness{t: t, srv: srv}
	prompt := func(mode string) []int {
		p, _ := byteTemplate{}.Prompt([]delegate.Message{delegate.User(mode)}, nil)
		return p
	}
	lps := []float64{-0.5, -1.5, -2.5}
	tests := []struct {
		mode        string
		tokenizedBy string
		tokens      []int
		noTokens    string // a part of the reason, "" when there are tokens
	}{
		{"ids", "", append(prompt("ids"), '4', '2', 0), ""},
		{"none", gateway.TokenizedByGateway, append(prompt("none"), '4', '2', 0), ""},
		{"drift", "", nil, "drift: the backend's prompt ids (22) differ from the chat template's (21) at position 0"},
		{"bare", "", nil, "tokenizing needs the backend's logprobs"},
	}
	for _, tc := range tests {
		id, c := h.session(`{"group":"` + tc.mode + `"}`)
		if _, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "remote",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(tc.mode)}}, option.WithMaxRetries(0)); err != nil {
			t.Fatalf("%s: %v", tc.mode, err)
		}
		h.reward(id, `{"reward":1}`)
	}
	srv.Close()
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	// The sessions wait for their groups in the store: read them there.
	db, err := store.Open(context.Background(), filepath.Join(dir, gateway.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fins, err := db.FinishedSessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byGroup := map[string]gateway.Finished{}
	for _, s := range fins {
		var f gateway.Finished
		if err := json.Unmarshal(s.Data, &f); err != nil {
			t.Fatal(err)
		}
		byGroup[f.Group] = f
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			f, ok := byGroup[tc.mode]
			if !ok || len(f.Calls) != 1 || len(f.Samples) != 1 {
				t.Fatalf("session %+v: want one call and one sample", f)
			}
			c, s := f.Calls[0], f.Samples[0]
			if c.TokenizedBy != tc.tokenizedBy || s.TokenizedBy != tc.tokenizedBy {
				t.Errorf("tokenized by %q (sample %q), want %q", c.TokenizedBy, s.TokenizedBy, tc.tokenizedBy)
			}
			if !slices.Equal(s.Tokens, tc.tokens) {
				t.Errorf("tokens %v, want %v", s.Tokens, tc.tokens)
			}
			if tc.noTokens == "" {
				if s.NoTokens != "" || !slices.Equal(s.Logprobs[len(s.Logprobs)-3:], lps) || !slices.Equal(s.Masks[len(s.Masks)-3:], []int{'4', '2', 0}) {
					t.Errorf("sample %+v: want the backend's logprobs on the answer's ids, trained", s.Sequence)
				}
			} else if !strings.Contains(s.NoTokens, tc.noTokens) || !strings.Contains(c.NoTokens, tc.noTokens) {
				t.Errorf("no tokens %q (call %q), want it to say %q", s.NoTokens, c.NoTokens, tc.noTokens)
			}
		})
	}
	if !strings.Contains(logs.String(), "drift from the chat template") {
		t.Errorf("the drift is not logged:\n%s", logs.String())
	}
}
