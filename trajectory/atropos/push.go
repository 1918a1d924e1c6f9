package atropos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/rollout"
)

// PushConfig configures a Pusher: the API and the environment it
// registers as.
type PushConfig struct {
	URL         string  // the API's base URL
	Token       string  // the API's bearer token; "" for none
	Name        string  // the environment's desired name
	Weight      float64 // the environment's weight in batches
	MaxTokenLen int     // the environment's max_token_length
	GroupSize   int     // the environment's group_size
	// OffPolicy is max_batches_offpolicy: without Sync, pause while the
	// queue holds this many batches. At least 1 without Sync.
	OffPolicy int
	// Sync, when positive, is the items this environment samples per
	// trainer step. Each starts only once the trainer has finished every
	// batch handed out and the queue holds less than a batch. That is
	// on-policy, as the in-process loop samples.
	Sync int
	// SyncPolicy, with Sync, is the base URL of the delegate serve that
	// samples the policy. An item starts only once every model that follows
	// a checkpoint serves the trainer's step, per GET /health's
	// policy_versions. So an item's first call is not answered by the step
	// before.
	SyncPolicy string
}

// Pusher hands group records to a trajectory API as an Atropos environment
// does. It registers, waiting for the trainer to start, and paces by GET
// /status-env. It sends every group to POST /scored_data in Atropos's
// ScoredData schema. It is the rollout.Sink of process --push and of the
// gateway. Its methods may run concurrently.
type Pusher struct {
	env *EnvClient
	out io.Writer // a line for each pause of a second or more

	// sync and syncPolicy are PushConfig's. hold is how long the API or
	// the policy server may hold a look until something changes. poll is
	// the wait between looks at a server that answers at once.
	sync       int
	syncPolicy string
	hold       time.Duration
	poll       time.Duration
	stall      time.Duration // syncStall, shorter in tests
	http       *http.Client

	mu      sync.Mutex
	paused  time.Duration // summed over items
	refused int           // groups the API refused for good
	empty   int           // groups without sequences not sent
	// The step whose policy the items now starting sample (sync). Also
	// when the trainer reached it, and how many items started on it.
	syncStep    int
	syncSince   time.Time
	syncStarted int
	// The longest a step took, from this environment's first item on it
	// to the trainer's next step. A stall is counted against it.
	syncFirst   time.Time
	syncLongest time.Duration

	// BatchOrder, when set, gives a task's place among its trainer step's
	// items under process --train-pool. It is sent as the group's
	// batch_order, so the trainer orders a batch as train does. Set
	// it before the first Send.
	BatchOrder func(item int) int
	// CheckSample, when set, gives a sample without its own result one,
	// sent as its sample_correct; nil when it has none. Process sets the
	// world's check of a solver's answer. Set it before the first Send.
	CheckSample func(delegate.Sample) *bool
}

// syncStall is the least wait before an environment under --push-sync
// starts one more item. It waits, its share of a step started, for the
// trainer to pass that step. The wait is three times the longest step it
// saw, when longer. A group dropped because its rollouts failed leaves the
// batch short, and only another item fills it.
const syncStall = 10 * time.Second

// syncHold is how long the API or the policy server may hold a look under
// --push-sync (waitSync). It bounds the delay of a stall's detection; it
// does not delay the loop.
const syncHold = time.Second

// NewPusher registers with the API at cfg.URL; it waits, as Atropos's
// environments do, until a trainer has started. Pauses and refused groups
// are reported on out.
func NewPusher(ctx context.Context, out io.Writer, cfg PushConfig) (*Pusher, error) {
	env := DefaultEnvClient()
	env.URL, env.Token = cfg.URL, cfg.Token
	env.Env = RegisterEnv{MaxTokenLength: cfg.MaxTokenLen, DesiredName: cfg.Name, Weight: cfg.Weight, GroupSize: cfg.GroupSize}
	if cfg.Sync == 0 {
		// Under Sync, waitSync paces the items and Wait is not called.
		env.MaxBatchesOffpolicy = cfg.OffPolicy
	}
	// A full queue empties when the trainer fetches a batch; on
	// loopback a status costs well under a millisecond, and every
	// millisecond of a pause is a millisecond the loop does not sample.
	env.Poll = 20 * time.Millisecond
	if err := env.Register(ctx); err != nil {
		return nil, fmt.Errorf("push %s: register: %w", cfg.URL, err)
	}
	return &Pusher{env: &env, out: out, sync: cfg.Sync, syncPolicy: strings.TrimSuffix(cfg.SyncPolicy, "/"),
		hold: syncHold, poll: env.Poll, stall: syncStall, http: &http.Client{Timeout: 10 * time.Second, CheckRedirect: edge.CheckRedirect}}, nil
}

// Wait pauses while the API's queue is full. It returns the trainer's
// step, the policy version the item's rollouts are sampled with. A pause
// of a second or more is reported on out with the pauses' sum over the
// items; items paused together count each.
func (s *Pusher) Wait(ctx context.Context) (int, error) {
	start := time.Now()
	if s.sync > 0 {
		step, err := s.waitSync(ctx)
		if err != nil {
			return 0, err
		}
		s.countPause(start)
		return step, nil
	}
	// The API counts the batches it has assembled but the trainer has
	// not fetched as queued, so its queue alone bounds how far the
	// environment runs ahead.
	st, err := s.env.Wait(ctx)
	if err != nil {
		return 0, err
	}
	s.countPause(start)
	return st.CurrentStep, nil
}

// countPause adds an item's pause since start. It reports a pause of a
// second or more with the pauses' sum over the items. Items paused
// together count each.
func (s *Pusher) countPause(start time.Time) {
	d := time.Since(start)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paused += d
	if d < time.Second {
		return
	}
	fmt.Fprintf(s.out, "push: an item paused %.1fs for the trainer (the API's queue was full); %.1fs over the items in all\n", d.Seconds(), s.paused.Seconds())
}

// waitSync returns the trainer's step once an item may start on it. The
// trainer must have finished every batch handed out, so its newest
// checkpoint, which the policy server follows, is the step's. The queue
// must hold less than a batch. Fewer than s.sync items of this
// environment may have started on the step, unless it has stalled since
// the last did (syncStall).
//
// The items of a share after its first start at once: the trainer cannot
// pass the step without them. The first waits on held requests (the API's
// /status-env?after_step, the policy server's /health?policy_version),
// which answer as soon as the trainer or the server moves on, rather than
// on polls; a server that answers them at once is polled every s.poll.
func (s *Pusher) waitSync(ctx context.Context) (int, error) {
	s.mu.Lock()
	if s.syncStarted > 0 && s.syncStarted < s.sync {
		s.syncStarted++
		s.syncSince = time.Now()
		step := s.syncStep
		s.mu.Unlock()
		return step, nil
	}
	s.mu.Unlock()
	after := math.MinInt // the trainer step to wait past; MinInt: look at once
	for {
		// spin: a request asked the server to hold it and came back at
		// once with nothing new (a server that does not hold requests):
		// poll then.
		asked := time.Now()
		var st StatusEnv
		var err error
		spin := false
		if after == math.MinInt {
			st, err = s.env.Status(ctx)
		} else {
			st, err = s.env.StatusAfter(ctx, after, s.hold)
			spin = st.TrainerStep <= after && time.Since(asked) < s.hold/2
		}
		if err != nil {
			return 0, err
		}
		// The queue short of a batch: an environment restarted in the
		// middle of a step starts its share again beside the groups the
		// others pushed.
		ready := st.TrainerStep == st.CurrentStep && st.QueueSize*s.env.Env.GroupSize < s.env.BatchSize
		// Unless it starts an item, wait for the trainer to ask for its
		// next batch.
		after = st.TrainerStep
		if ready && s.syncPolicy != "" {
			asked = time.Now()
			if ready, err = s.policyAt(ctx, st.CurrentStep); err != nil {
				return 0, err
			}
			if !ready {
				// Not there within the server's wait: look at both again.
				after, spin = math.MinInt, time.Since(asked) < s.hold/2
			}
		}
		if ready {
			s.mu.Lock()
			now := time.Now()
			if st.CurrentStep != s.syncStep || s.syncSince.IsZero() {
				if !s.syncFirst.IsZero() {
					s.syncLongest = max(s.syncLongest, now.Sub(s.syncFirst))
				}
				s.syncStep, s.syncSince, s.syncFirst, s.syncStarted = st.CurrentStep, now, now, 0
			}
			stalled := now.Sub(s.syncSince) >= max(s.stall, 3*s.syncLongest)
			if s.syncStarted < s.sync || stalled {
				if stalled {
					fmt.Fprintf(s.out, "push: the trainer still waits on step %d %.0fs after this environment's items for it started (a group dropped?); one more item\n",
						st.CurrentStep, now.Sub(s.syncSince).Seconds())
				}
				s.syncStarted++
				s.syncSince = now
				s.mu.Unlock()
				return st.CurrentStep, nil
			}
			s.mu.Unlock()
		}
		if !spin {
			continue
		}
		select {
		case <-time.After(s.poll):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Send pushes one group and checks that the API took it. A group the API
// refuses for what it holds (422: ids or lengths the trainer cannot use;
// 413: too large) would be refused again at every retry: it is reported
// on out, counted, and not sent again, so that one bad group does not
// stop the environment at every restart. A group without sequences (its
// rollouts never called the trained roles) is sent only to a trainer
// registered with batch_groups, for which it is one of a step's items;
// otherwise it is counted and not sent.
func (s *Pusher) Send(ctx context.Context, g *rollout.GroupRecord) error {
	if len(g.Tokens) == 0 && s.env.BatchGroups <= 0 {
		s.mu.Lock()
		s.empty++
		s.mu.Unlock()
		return nil
	}
	if s.CheckSample != nil {
		g = checkedSamples(g, s.CheckSample)
	}
	sd, err := ScoredDataOf(g)
	if err != nil {
		return err
	}
	if s.BatchOrder != nil {
		o := groupOverride(g)
		order := s.BatchOrder(g.Item)
		o.BatchOrder = &order
		sd.GroupOverrides = o.Map()
	}
	resp, err := s.env.Push(ctx, sd)
	var ae *delegate.APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusUnprocessableEntity || ae.Status == http.StatusRequestEntityTooLarge) {
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
		fmt.Fprintf(s.out, "push: the API refused group %s (%d %s); it is not sent again\n", g.ID, ae.Status, ae.Message)
		return nil
	}
	if err != nil {
		return err
	}
	if resp.Status != "received" && resp.Status != "buffered" {
		return fmt.Errorf("the API answered status %q", resp.Status)
	}
	return nil
}

// Close reports the items' pauses in all and tells the API this
// environment is done.
func (s *Pusher) Close(ctx context.Context) error {
	s.mu.Lock()
	fmt.Fprintf(s.out, "push: done; %.1fs over the items in all paused for the trainer; %d groups refused by the API", s.paused.Seconds(), s.refused)
	if s.empty > 0 {
		fmt.Fprintf(s.out, "; %d groups without sequences not sent (the trainer counts sequences, not groups)", s.empty)
	}
	fmt.Fprintln(s.out)
	s.mu.Unlock()
	return s.env.Disconnect(ctx)
}

// ScoredDataOf is a group record in Atropos's ScoredData schema. Each
// sequence has one entry in tokens, masks, scores, advantages,
// inference_logprobs, messages and overrides. A mask is -100 where untrained
// and the token id where trained. Scores are the rollout's reward, and its
// advantage fills every token. inference_logprobs are 1.0 at untrained
// positions. group_overrides carry the group's identity (group_id, for the
// API's deduplication), its size, the policy version it was sampled with and
// what played each role. Each sequence's overrides also say what its rollout
// was scored from, when the record has it (OverrideCorrect and the others),
// and which sample of its episode it is (OverrideRole and the others). A
// sequence without token ids cannot be trained on, and is an error naming the
// group and why.
func ScoredDataOf(g *rollout.GroupRecord) (ScoredData, error) {
	sd := ScoredData{
		Tokens: g.Tokens, Masks: g.Masks, Scores: g.Scores, InferenceLogprobs: g.InferenceLogprobs,
		GroupOverrides: groupOverride(g).Map(),
	}
	if len(g.Tokens) == 0 {
		// An empty group: its three required fields as empty lists, not null.
		sd.Tokens, sd.Masks, sd.Scores = [][]int{}, [][]int{}, []float64{}
	}
	if len(g.SequenceRollout) != len(g.Tokens) {
		return ScoredData{}, fmt.Errorf("group %s: %d sequences but %d rollout indices", g.ID, len(g.Tokens), len(g.SequenceRollout))
	}
	outcomes := map[int]*rollout.Outcome{}
	for _, m := range g.Rollouts {
		outcomes[m.Index] = m.Outcome
	}
	samples := sequenceSamples(g)
	for i, toks := range g.Tokens {
		if len(toks) == 0 {
			why := "no token ids"
			if i < len(g.NoTokens) && g.NoTokens[i] != "" {
				why = g.NoTokens[i]
			}
			return ScoredData{}, fmt.Errorf("group %s: sequence %d has no tokens (%s): a trainer needs the policy's token ids and logprobs: use a local model, or vLLM with token_ids: true, and --logprobs", g.ID, i, why)
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
				return ScoredData{}, fmt.Errorf("group %s: sequence %d: %w", g.ID, i, err)
			}
			msgs = append(msgs, m)
		}
		sd.Messages = append(sd.Messages, msgs)
		ov := SequenceOverride{SetAdvantageToZero: g.Overrides[i].SetAdvantageToZero}
		if o := outcomes[g.SequenceRollout[i]]; o != nil {
			// What the rollout was scored from, for the trainer's metrics.
			delegated := o.Calls > 0
			calls, tokens, cost := float64(o.Calls), float64(o.Tokens), o.Cost
			ov.Correct, ov.Delegated = o.Correct, &delegated
			ov.Calls, ov.Tokens, ov.Cost = &calls, &tokens, &cost
		}
		if samples != nil {
			sm := samples[i]
			ov.Role, ov.Question, ov.SampleCorrect = sm.Role, sm.Question, sm.Correct
		}
		sd.Overrides = append(sd.Overrides, ov.Map())
	}
	return sd, nil
}

// sequenceSamples says which sample of its episode each sequence of g is.
// A rollout's sequences are its episode's samples, in call order. It
// is nil when g has no episodes, or a rollout's sequences and samples
// differ in number (a conversation of one role that another role's call
// interrupted is one sample but two sequences): then no sequence says its
// sample, and a trainer crediting per role sets the group aside.
func sequenceSamples(g *rollout.GroupRecord) []*delegate.Sample {
	if len(g.Episodes) != len(g.Rollouts) {
		return nil
	}
	next := map[int]int{} // rollout index: its sequences so far
	episode := map[int]*delegate.Episode{}
	for k, m := range g.Rollouts {
		episode[m.Index] = g.Episodes[k]
	}
	out := make([]*delegate.Sample, len(g.SequenceRollout))
	for i, r := range g.SequenceRollout {
		e := episode[r]
		if e == nil || next[r] >= len(e.Samples) {
			return nil
		}
		out[i] = &e.Samples[next[r]]
		next[r]++
	}
	for r, e := range episode {
		if next[r] != len(e.Samples) {
			return nil
		}
	}
	return out
}

// checkedSamples is g with check's result on each sample that has none.
// g and its episodes are left as they are: the record is on disk.
func checkedSamples(g *rollout.GroupRecord, check func(delegate.Sample) *bool) *rollout.GroupRecord {
	c := *g
	c.Episodes = make([]*delegate.Episode, len(g.Episodes))
	for k, e := range g.Episodes {
		if e == nil {
			continue
		}
		ce := *e
		ce.Samples = slices.Clone(e.Samples)
		for j := range ce.Samples {
			if sm := &ce.Samples[j]; sm.Correct == nil {
				sm.Correct = check(*sm)
			}
		}
		c.Episodes[k] = &ce
	}
	return &c
}

// groupOverride is the group_overrides of g. It holds g's identity, for
// the API's deduplication, its size, the policy version it was sampled
// with and what played each role.
func groupOverride(g *rollout.GroupRecord) GroupOverride {
	v := g.PolicyVersion
	return GroupOverride{GroupID: g.Run + "/" + g.ID, GroupSize: g.GroupOverrides.GroupSize, PolicyVersion: &v, Roles: g.GroupOverrides.Roles}
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

// policyAt reports whether every followed model of the policy server
// serves version step or later. It asks the server to hold its answer up
// to s.hold until they do (GET /health?policy_version=N&wait=S).
func (s *Pusher) policyAt(ctx context.Context, step int) (bool, error) {
	url := fmt.Sprintf("%s/health?policy_version=%d&wait=%s", s.syncPolicy, step, strconv.FormatFloat(s.hold.Seconds(), 'f', -1, 64))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, fmt.Errorf("policy server %s: %w", s.syncPolicy, err)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		// A restarting server: look again at the next poll.
		return false, nil
	}
	defer resp.Body.Close()
	var h struct {
		Versions map[string]int `json:"policy_versions"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&h); err != nil || resp.StatusCode != http.StatusOK {
		return false, nil // the same: a server that is not up yet answers nothing useful
	}
	if h.Versions == nil {
		return false, fmt.Errorf("policy server %s: its /health names no policy_versions: not a delegate serve following a checkpoint", s.syncPolicy)
	}
	for _, v := range h.Versions {
		if v < step {
			return false, nil
		}
	}
	return true, nil
}
