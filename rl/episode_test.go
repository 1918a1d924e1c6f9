package rl

import (
	"context"
	"flag"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/train"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
)

// callNode is a policy call node with prompt ids and generated ids.
func callNode(id int, role string, prompt, gen []int) *delegate.Node {
	n := &delegate.Node{ID: id, Name: "call", Role: role, Model: "m", PromptTokenIDs: prompt,
		Output: &delegate.Message{Role: delegate.RoleAssistant, Content: "out"}}
	for _, g := range gen {
		n.Logprobs = append(n.Logprobs, delegate.TokenLogprob{TokenID: g, Logprob: -1})
	}
	n.Usage = delegate.Usage{PromptTokens: len(prompt), CompletionTokens: len(gen)}
	return n
}

func traceOf(nodes ...*delegate.Node) *delegate.Trace {
	return &delegate.Trace{Root: &delegate.Node{Name: "root", Children: nodes}}
}

func TestEpisodes(t *testing.T) {
	failed := &delegate.Node{ID: 4, Name: "call", Role: "p", Model: "m", Error: "timeout"}
	tr := traceOf(
		callNode(3, "p", []int{1, 2}, []int{5, 6, 7}),
		callNode(1, "other", []int{1}, []int{9}),
		&delegate.Node{ID: 2, Name: "group", Children: []*delegate.Node{callNode(2, "p", []int{1, 2, 3}, []int{8})}},
		failed,
	)
	eps, err := Episodes(tr, "p", 16)
	if err != nil {
		t.Fatal(err)
	}
	want := []Episode{
		{Node: "call#2", Prompt: []int{1, 2, 3}, Completion: []int{8}, Behaviour: []float32{-1}},
		{Node: "call#3", Prompt: []int{1, 2}, Completion: []int{5, 6, 7}, Behaviour: []float32{-1, -1, -1}},
	}
	if len(eps) != len(want) {
		t.Fatalf("%d episodes, want %d", len(eps), len(want))
	}
	for i := range want {
		g, w := eps[i], want[i]
		if g.Node != w.Node || !slices.Equal(g.Prompt, w.Prompt) || !slices.Equal(g.Completion, w.Completion) || !slices.Equal(g.Behaviour, w.Behaviour) {
			t.Errorf("episode %d = %+v, want %+v", i, g, w)
		}
	}
}

func TestEpisodesErrors(t *testing.T) {
	noIDs := callNode(5, "p", []int{1}, []int{4, 5})
	noIDs.Logprobs[1].TokenID = -1
	noPrompt := callNode(6, "p", nil, []int{4})
	noLogprobs := callNode(7, "p", []int{1}, nil)
	noLogprobs.Usage.CompletionTokens = 3
	short := callNode(8, "p", []int{1}, []int{4})
	short.Usage.CompletionTokens = 2
	badLogprob := callNode(10, "p", []int{1}, []int{4})
	badLogprob.Logprobs[0].Logprob = 0.5
	tests := []struct {
		name string
		node *delegate.Node
		ctx  int
		want string
	}{
		{"token without id", noIDs, 16, "call#5"},
		{"no prompt ids", noPrompt, 16, "call#6 (model m): the backend returned no prompt token ids"},
		{"no logprobs", noLogprobs, 16, "call#7"},
		{"fewer logprobs than tokens", short, 16, "call#8"},
		{"longer than the context", callNode(9, "p", []int{1, 2, 3}, []int{4, 5}), 4, "exceed the context of 4"},
		{"bad logprob", badLogprob, 16, "call#10: generated token 0 (position 1) has logprob"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Episodes(traceOf(tt.node), "p", tt.ctx)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestPackLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	eps := randomEpisodes(rng, 9, 50)
	for _, limit := range []int{1, 20, 40, 1000} {
		mbs := pack(eps, limit)
		seen := make([]bool, len(eps))
		for _, m := range mbs {
			b := m.batch
			if b.B > 1 && b.B*b.T > limit {
				t.Errorf("limit %d: batch %dx%d is over it", limit, b.B, b.T)
			}
			for _, s := range m.seqs {
				if seen[s.idx] {
					t.Errorf("limit %d: episode %d packed twice", limit, s.idx)
				}
				seen[s.idx] = true
				seq := append(slices.Clone(s.ep.Prompt), s.ep.Completion...)
				row := b.Inputs[s.row*b.T : (s.row+1)*b.T]
				tgt := b.Targets[s.row*b.T : (s.row+1)*b.T]
				if !slices.Equal(row[:len(seq)-1], seq[:len(seq)-1]) || !slices.Equal(tgt[:len(seq)-1], seq[1:]) {
					t.Errorf("limit %d: row %d inputs %v targets %v, want the shifts of %v", limit, s.row, row, tgt, seq)
				}
				for j, id := range s.ep.Completion {
					if got := b.Targets[m.at(s, j)]; got != id {
						t.Errorf("limit %d: completion token %d at %d is %d, want %d", limit, j, m.at(s, j), got, id)
					}
				}
				for k := len(seq) - 1; k < b.T; k++ {
					if row[k] != 0 || tgt[k] != 0 {
						t.Errorf("limit %d: padding at %d holds %d/%d", limit, k, row[k], tgt[k])
					}
				}
			}
		}
		for i, ok := range seen {
			if !ok {
				t.Errorf("limit %d: episode %d not packed", limit, i)
			}
		}
	}
}

// TestMaskedTokensGetNoGradient perturbs what a masked position holds and requires a bit-identical gradient.
// Masked positions are the targets of prompt positions and the inputs and targets of padding.
// Perturbing a trained target must change the gradient.
func TestMaskedTokensGetNoGradient(t *testing.T) {
	ctx := context.Background()
	p := tinyParams(t, 32, 3)
	rng := rand.New(rand.NewPCG(3, 4))
	eps := randomEpisodes(rng, 4, p.Config.Vocab)
	m := pack(eps, 4096)[0]
	trained := map[int]bool{}
	for _, s := range m.seqs {
		for j := range s.ep.Completion {
			k := m.at(s, j)
			m.batch.Weights[k] = float32(rng.NormFloat64())
			trained[k] = true
		}
	}
	ws, err := train.NewWorkspace(p.Config)
	if err != nil {
		t.Fatal(err)
	}
	grad := func(b train.Batch) []float32 {
		g, err := nn.Alloc(p.Config)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ws.ForwardBackward(ctx, p, g, b, 1); err != nil {
			t.Fatal(err)
		}
		return g.Data
	}
	base := grad(m.batch)

	masked := m.batch
	masked.Inputs = slices.Clone(m.batch.Inputs)
	masked.Targets = slices.Clone(m.batch.Targets)
	changed := 0
	for _, s := range m.seqs {
		end := s.row*m.batch.T + s.ep.Len()
		for k := s.row * m.batch.T; k < (s.row+1)*m.batch.T; k++ {
			if trained[k] {
				continue
			}
			masked.Targets[k] = (masked.Targets[k] + 1 + rng.IntN(p.Config.Vocab-1)) % p.Config.Vocab
			changed++
			if k >= end { // padding: its input only feeds later (padding) positions
				masked.Inputs[k] = rng.IntN(p.Config.Vocab)
			}
		}
	}
	if changed == 0 {
		t.Fatal("no masked position to perturb")
	}
	if got := grad(masked); !slices.Equal(got, base) {
		t.Error("perturbing masked positions changed the gradient")
	}

	live := m.batch
	live.Targets = slices.Clone(m.batch.Targets)
	for k := range trained {
		live.Targets[k] = (live.Targets[k] + 1) % p.Config.Vocab
		break
	}
	if got := grad(live); slices.Equal(got, base) {
		t.Error("perturbing a trained target left the gradient unchanged; the check is blind")
	}
}

var update = flag.Bool("update", false, "regenerate the model in testdata/route-strong")

// routeStrongDir holds a tiny strong model trained by sftToolCall.
// The test then need not spend seconds training it under -race.
const routeStrongDir = "testdata/route-strong"

// routeStrong returns the tiny strong model of the route test, trained
// anew with -update.
func routeStrong(t *testing.T, msgs []delegate.Message) *nn.Params {
	t.Helper()
	if *update {
		p := tinyParams(t, 768, 21)
		sftToolCall(t, p, msgs, 150)
		if err := nn.Save(routeStrongDir, p, map[string]string{"made_by": "go test ./rl -run TestEpisodesFromRouteRun -update"}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p, _, err := nn.Load(routeStrongDir)
	if err != nil {
		t.Fatalf("%v (regenerate with -update)", err)
	}
	return p
}

// sftToolCall trains p for a few steps to answer the route prompt of request with a delegate tool call.
// A route run then makes weak calls and more than one strong turn.
func sftToolCall(t *testing.T, p *nn.Params, msgs []delegate.Message, steps int) {
	t.Helper()
	prompt := tokenizer.Render(msgs, []delegate.Tool{strategy.DelegateTool}, true)
	gen := []int{tokenizer.ToolCall}
	gen = append(gen, tokenizer.Encode(`delegate{"question":"2+2?"}`)...)
	gen = append(gen, tokenizer.EndToolCall, tokenizer.End)
	seq := append(slices.Clone(prompt), gen...)
	b := train.Batch{B: 1, T: len(seq) - 1, Inputs: seq[:len(seq)-1], Targets: seq[1:], Weights: make([]float32, len(seq)-1)}
	for j := range gen {
		b.Weights[len(prompt)-1+j] = 1
	}
	tr, err := train.NewTrainer(p, train.Config{AdamW: train.DefaultAdamW(), Schedule: train.Schedule{Total: steps, MaxLR: 3e-2, MinLR: 3e-2}, ClipNorm: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range steps {
		if _, err := tr.Step(context.Background(), []train.Batch{b}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEpisodesFromRouteRun builds episodes from real route runs of tiny local models.
// They must cover exactly the tokens the strong model generated, call by call,
// and nothing of the weak model's.
func TestEpisodesFromRouteRun(t *testing.T) {
	const request = "What is 2+2?"
	const system = "Delegate sums."
	scfg := strategy.DefaultConfig()
	scfg.Prompts = map[string]string{"route_system": system, "route_user": "{{.Request}}", "weak_system": "Answer.", "weak_user": "{{.Question}}"}
	scfg.MaxTurns = 3
	scfg.Strong.MaxTokens = 64
	scfg.Weak.MaxTokens = 8

	strongP := routeStrong(t, []delegate.Message{delegate.System(system), delegate.User(request)})
	cfg := DefaultConfig()
	cfg.MaxNewTokens = 64
	strong := newLocal(t, strongP, "tiny-strong")
	weak := newLocal(t, tinyParams(t, 256, 22), "tiny-weak")
	s, err := strategy.New(strategy.NameRoute, strategy.Roles{
		Strong: delegate.Agent{Model: strong, Sampler: samplerOf(cfg, nil)},
		Weak:   delegate.Agent{Model: weak},
	}, scfg)
	if err != nil {
		t.Fatal(err)
	}
	var strongCalls, weakCalls, turns int
	for run := range 4 {
		tr, err := s.Run(context.Background(), request, nil)
		if err != nil {
			t.Fatal(err)
		}
		eps, err := Episodes(tr, strategy.RoleStrong, strongP.Config.Context)
		if err != nil {
			t.Fatal(err)
		}
		var want []*delegate.Node
		var gen int
		for _, n := range tr.Calls() {
			switch n.Role {
			case strategy.RoleStrong:
				want = append(want, n)
				gen += n.Usage.CompletionTokens
			case strategy.RoleWeak:
				weakCalls++
			}
		}
		strongCalls += len(want)
		// The turns of the conversation continue one another exactly, so
		// they are one training sequence with every generated token trained.
		if len(eps) != 1 || eps[0].Calls != len(want) || eps[0].Generated() != gen {
			t.Fatalf("run %d: %d strong calls make %d sequences, want 1 with every call's %d generated tokens", run, len(want), len(eps), gen)
		}
		seq := append(slices.Clone(eps[0].Prompt), eps[0].Completion...)
		for i, n := range want {
			// Each call's prompt ids are a prefix of the sequence, and are
			// exactly the rendering of the call's messages: tool results
			// and weak answers included, none of them trained.
			if len(n.PromptTokenIDs) > len(seq) || !slices.Equal(seq[:len(n.PromptTokenIDs)], n.PromptTokenIDs) {
				t.Errorf("run %d call %d: prompt ids are not a prefix of the sequence", run, i)
			}
			if r := tokenizer.Render(n.Messages, []delegate.Tool{strategy.DelegateTool}, true); !slices.Equal(r, n.PromptTokenIDs) {
				t.Errorf("run %d call %d: the prompt ids are not the rendering of the call's messages", run, i)
			}
			if i > 0 {
				turns++
				// A later turn's prompt holds the earlier turn's output and
				// the tool results: the positions between the two turns'
				// outputs are masked.
				prev := want[i-1]
				for j := len(prev.PromptTokenIDs) + len(prev.Logprobs); j < len(n.PromptTokenIDs); j++ {
					if k := j - len(eps[0].Prompt); k < 0 || !eps[0].Masked[k] {
						t.Errorf("run %d call %d: position %d between turns is trained", run, i, j)
						break
					}
				}
			}
		}
	}
	t.Logf("%d strong calls, %d weak calls, %d later turns", strongCalls, weakCalls, turns)
	if weakCalls == 0 || turns == 0 {
		t.Errorf("%d weak calls and %d later strong turns: the runs did not delegate, so masking of tool results went unchecked", weakCalls, turns)
	}
}

// TestEpisodesFromLeadRun is MLPO's case: the leader's prompt holds the
// frozen peers' answers, and only the leader's own tokens are trained.
func TestEpisodesFromLeadRun(t *testing.T) {
	scfg := strategy.DefaultConfig()
	scfg.Peers, scfg.Rounds = 3, 1
	scfg.Peer.MaxTokens, scfg.Leader.MaxTokens = 12, 16
	cfg := DefaultConfig()
	cfg.MaxNewTokens = 16
	leaderP := tinyParams(t, 1024, 31)
	leader := newLocal(t, leaderP, "tiny-leader")
	peer := newLocal(t, tinyParams(t, 1024, 32), "tiny-peer")
	s, err := strategy.New(strategy.NameLead, strategy.Roles{
		Leader: delegate.Agent{Model: leader, Sampler: samplerOf(cfg, nil)},
		Peers:  []delegate.Agent{{Model: peer}},
	}, scfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := s.Run(context.Background(), "What is 3*4?", nil)
	if err != nil {
		t.Fatal(err)
	}
	eps, err := Episodes(tr, strategy.RoleLeader, leaderP.Config.Context)
	if err != nil {
		t.Fatal(err)
	}
	var leaderTokens, peerCalls, trained int
	var peerAnswers []string
	for _, n := range tr.Calls() {
		switch n.Role {
		case strategy.RoleLeader:
			leaderTokens += n.Usage.CompletionTokens
		case strategy.RolePeer:
			peerCalls++
			if a := strings.TrimSpace(n.Output.Content); a != "" && peerCalls <= scfg.Peers {
				peerAnswers = append(peerAnswers, a)
			}
		}
	}
	for _, e := range eps {
		trained += len(e.Completion)
	}
	if len(eps) != scfg.Rounds+1 || trained != leaderTokens {
		t.Errorf("%d episodes with %d trained tokens; want %d (one per round) with the leader's %d", len(eps), trained, scfg.Rounds+1, leaderTokens)
	}
	if peerCalls != scfg.Peers*(scfg.Rounds+1) {
		t.Errorf("%d peer calls, want %d", peerCalls, scfg.Peers*(scfg.Rounds+1))
	}
	// Every peer answer of round 0 sits in the masked prompt of the first
	// leader episode.
	prompt := tokenizer.Decode(eps[0].Prompt)
	if len(peerAnswers) == 0 {
		t.Fatal("every peer answer of round 0 is empty; the check would be blind")
	}
	for i, a := range peerAnswers {
		if !strings.Contains(prompt, a) {
			t.Errorf("peer answer %d %q is not in the leader's prompt", i, a)
		}
	}
}

func TestFromTokens(t *testing.T) {
	const I = delegate.MaskIgnore
	e, err := FromTokens([]int{1, 2, 5, 6, 3, 7}, []int{I, I, 5, 6, I, 7}, []float64{1, 1, -0.5, -0.25, 1, -1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.Prompt, []int{1, 2}) || !slices.Equal(e.Completion, []int{5, 6, 3, 7}) ||
		!slices.Equal(e.Masked, []bool{false, false, true, false}) || e.Generated() != 3 ||
		e.Behaviour[0] != -0.5 || e.Behaviour[3] != -1 {
		t.Errorf("episode %+v", e)
	}
	for _, tt := range []struct {
		name          string
		tokens, masks []int
		lps           []float64
		want          string
	}{
		{"lengths", []int{1, 2}, []int{I}, []float64{1, 1}, "2 tokens, 1 masks"},
		{"mask not the token", []int{1, 2}, []int{I, 3}, []float64{1, -1}, "mask 3 at position 1"},
		{"logprob above 0", []int{1, 2}, []int{I, 2}, []float64{1, 0.7}, "position 1) has logprob 0.7"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := FromTokens(tt.tokens, tt.masks, tt.lps); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("FromTokens: %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if e, err := FromTokens([]int{1, 2}, []int{I, I}, []float64{1, 1}); err != nil || len(e.Completion) != 0 {
		t.Errorf("no trained token: %+v, %v; want no completion", e, err)
	}
}
