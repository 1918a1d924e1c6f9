package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/delegatelab/delegate/api"
	"github.com/delegatelab/delegate/rollout"
)

// pushFlags are process's flags for a trajectory API.
type pushFlags struct {
	url         string  // the API's base URL; "" pushes nothing
	name        string  // the environment's desired name
	weight      float64 // the environment's weight in batches
	maxTokenLen int     // the environment's max_token_length
	offPolicy   int     // max_batches_offpolicy: pause while the queue holds this many batches
}

// pushSink hands process's groups to a trajectory API as an Atropos
// environment does: registered (waiting for the trainer to start), paced
// by GET /status-env, every written group sent to POST /scored_data in
// Atropos's ScoredData schema.
type pushSink struct {
	env *api.EnvClient
	out io.Writer // a line for each pause of a second or more
	// offPolicy bounds, besides the queue, the batches the API has
	// assembled that the trainer has not fetched yet.
	offPolicy int

	mu     sync.Mutex
	paused time.Duration // summed over items
}

// newPushSink registers with the API at f.url; it waits, as Atropos's
// environments do, until a trainer has started. The token is the API's
// bearer token (DELEGATE_API_TOKEN), empty for none.
func newPushSink(ctx context.Context, out io.Writer, f pushFlags, token string, groupSize int) (*pushSink, error) {
	env := &api.EnvClient{
		Client: api.Client{URL: f.url, Token: token},
		Env: api.RegisterEnv{MaxTokenLength: f.maxTokenLen, DesiredName: f.name, Weight: f.weight,
			GroupSize: groupSize},
		MaxBatchesOffpolicy: f.offPolicy,
		Poll:                500 * time.Millisecond,
	}
	if err := env.Register(ctx); err != nil {
		return nil, fmt.Errorf("process --push %s: register: %w", f.url, err)
	}
	return &pushSink{env: env, out: out, offPolicy: max(f.offPolicy, 1)}, nil
}

// Wait pauses while the API's queue is full and returns the trainer's
// step, the policy version the item's rollouts are sampled with.
// A pause of a second or more is reported on out with the pauses' sum
// over the items (items paused together count each).
func (s *pushSink) Wait(ctx context.Context) (int, error) {
	start := time.Now()
	// The API counts the batches it has assembled but the trainer has
	// not fetched as queued, so its queue alone bounds how far the
	// environment runs ahead.
	st, err := s.env.Wait(ctx)
	if err != nil {
		return 0, err
	}
	if d := time.Since(start); d >= time.Second {
		s.mu.Lock()
		s.paused += d
		fmt.Fprintf(s.out, "push: an item paused %.1fs for the trainer (the API's queue was full); %.1fs over the items in all\n", d.Seconds(), s.paused.Seconds())
		s.mu.Unlock()
	}
	return st.CurrentStep, nil
}

// Send pushes one group and checks that the API took it.
func (s *pushSink) Send(ctx context.Context, g *rollout.GroupRecord) error {
	sd, err := scoredData(g)
	if err != nil {
		return err
	}
	resp, err := s.env.Push(ctx, sd)
	if err != nil {
		return err
	}
	if resp.Status != "received" && resp.Status != "buffered" {
		return fmt.Errorf("the API answered status %q", resp.Status)
	}
	return nil
}

// Close tells the API this environment is done.
func (s *pushSink) Close(ctx context.Context) error { return s.env.Disconnect(ctx) }

// scoredData is a group in Atropos's ScoredData schema: one entry per
// sequence in tokens, masks (-100 untrained, the token id trained),
// scores (the rollout's reward), advantages (the rollout's, at every
// token), inference_logprobs (1.0 at untrained positions), messages and
// overrides; group_overrides carry the group's identity (group_id, for the
// API's deduplication), its size and the policy version it was sampled
// with. A sequence without token ids cannot be trained on, and is an
// error naming the group and why.
func scoredData(g *rollout.GroupRecord) (api.ScoredData, error) {
	sd := api.ScoredData{
		Tokens: g.Tokens, Masks: g.Masks, Scores: g.Scores, InferenceLogprobs: g.InferenceLogprobs,
		GroupOverrides: map[string]any{
			"group_id":       g.Run + "/" + g.ID,
			"group_size":     g.GroupOverrides.GroupSize,
			"policy_version": g.PolicyVersion,
		},
	}
	for i, toks := range g.Tokens {
		if len(toks) == 0 {
			why := "no token ids"
			if i < len(g.NoTokens) && g.NoTokens[i] != "" {
				why = g.NoTokens[i]
			}
			return api.ScoredData{}, fmt.Errorf("group %s: sequence %d has no tokens (%s): a trainer needs the policy's token ids and logprobs: use a local model, or vLLM with token_ids: true, and --logprobs", g.ID, i, why)
		}
		adv := make([]float64, len(toks))
		for j := range adv {
			adv[j] = g.Advantages[i]
		}
		sd.Advantages = append(sd.Advantages, adv)
		var msgs []map[string]any
		for _, t := range g.Messages[i] {
			m, err := messageMap(t.Message)
			if err != nil {
				return api.ScoredData{}, fmt.Errorf("group %s: sequence %d: %w", g.ID, i, err)
			}
			msgs = append(msgs, m)
		}
		sd.Messages = append(sd.Messages, msgs)
		sd.Overrides = append(sd.Overrides, map[string]any{"set_advantage_to_zero": g.Overrides[i].SetAdvantageToZero})
	}
	return sd, nil
}

// messageMap is a message as an OpenAI-style JSON object.
func messageMap(m any) (map[string]any, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode message: %w", err)
	}
	return out, nil
}
