package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// FilterFile holds MLPO's filtered training items, so that a resumed run
// does not sample the peers again.
const FilterFile = "filter.json"

// filterVersion is the format version of FilterFile.
const filterVersion = 1

// NameMajority is the strategy name of the peers' majority vote.
const NameMajority = "majority"

// itemSeed is the seed of a problem's peer answers. It is the same in
// every rollout, in the filter and in the table, so the leader is trained
// and judged on fixed peers' answers.
func itemSeed(p *world.Problem) int64 {
	v, err := strconv.ParseUint(p.ID, 16, 64)
	if err != nil {
		v = uint64(len(p.Text)) // IDs are 16 hex digits; a fallback keeps it deterministic
	}
	return int64(v & (1<<62 - 1))
}

// scratchPeer is a peer that solves with scratch work. Asked a question
// in lead's peer format, it asks m the same problem in single's format
// (the one the delegator solves in: every step's scratchpad, then
// \boxed{}), under the request's sampling settings and seed with room for
// the scratch work, and answers with the reply condensed to lead's terse
// peer answer (transcript.Condense: one "expr=result" line per step as the
// scratchpad reached it, then <answer>), so that three answers fit in the
// leader's context. The usage is the whole reply's: the team pays for the
// scratch work the leader does not read.
type scratchPeer struct {
	m         delegate.Model
	maxTokens int
}

func (s scratchPeer) Name() string { return s.m.Name() }

func (s scratchPeer) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	var question string
	for _, m := range req.Messages {
		if m.Role == delegate.RoleUser {
			question = m.Content
		}
	}
	if question == "" {
		return nil, errors.New("scratch peer: the request has no user message")
	}
	r := *req
	r.Messages = transcript.SingleMessages(question)
	r.MaxTokens = s.maxTokens
	resp, err := s.m.Chat(ctx, &r)
	if err != nil {
		return nil, err
	}
	if len(resp.Choices) == 0 {
		return nil, errors.New("scratch peer: the reply has no choice")
	}
	out := *resp
	out.Choices = slices.Clone(resp.Choices)
	out.Choices[0] = delegate.Choice{Message: delegate.Assistant(transcript.Condense(resp.Text())), FinishReason: resp.Choices[0].FinishReason}
	return &out, nil
}

// peerRequest is the request of peer answer i to p, as lead sends it.
func (r *runner) peerRequest(p *world.Problem, i int) *delegate.Request {
	msgs := transcript.PeerTranscript(p).Messages[:2]
	t := r.scfg.Peer.Temperature
	seed := itemSeed(p) + int64(i)
	return &delegate.Request{Messages: msgs, Temperature: &t, MaxTokens: r.scfg.Peer.MaxTokens, Seed: &seed}
}

// lead builds lead with leader in the leader's seat, in its
// conversation, the peers answering with p's seeds.
func (r *runner) lead(p *world.Problem, scfg strategy.Config, leader delegate.Model) (delegate.Strategy, error) {
	return r.leadAgent(p, scfg, r.delegatorAgent(newConversation(leader, r.cfg.CacheMinTokens)))
}

// leadAgent builds lead with the agent leader in the leader's seat.
func (r *runner) leadAgent(p *world.Problem, scfg strategy.Config, leader delegate.Agent) (delegate.Strategy, error) {
	s := itemSeed(p)
	scfg.Peer.Seed = &s
	return r.observe(strategy.New(strategy.NameLead, strategy.Roles{Leader: leader, Peers: r.peerAgents()}, scfg))
}

// peerAgents are the peer models as lead's agents; lead gives peer i
// agent i mod len.
func (r *runner) peerAgents() []delegate.Agent {
	out := make([]delegate.Agent, len(r.peers))
	for i, m := range r.peers {
		out[i] = r.subagent(m, r.cfg.Prices.Delegator)
	}
	return out
}

// peerAloneRequest is the request of peer model answering p alone,
// greedy: its strongest form.
func (r *runner) peerAloneRequest(p *world.Problem, _ int) *delegate.Request {
	req := r.peerRequest(p, 0)
	t := 0.0
	req.Temperature = &t
	return req
}

func (r *runner) problem(request string) (*world.Problem, error) {
	p, ok := r.byText[request]
	if !ok {
		return nil, errors.New("the request is not a problem of this run")
	}
	return p, nil
}

// leaderSample is the request of sample i of the leader alone on p. It is
// the single prompt at the peers' temperature, seeded by the problem.
func (r *runner) leaderSample(p *world.Problem, i int) *delegate.Request {
	msgs := transcript.Single(p).Delegator[0].Messages[:2]
	t := r.scfg.Peer.Temperature
	seed := itemSeed(p) + 1000 + int64(i)
	return &delegate.Request{Messages: msgs, Temperature: &t, MaxTokens: r.scfg.Single.MaxTokens, Seed: &seed}
}

// majorityArm is the majority vote of n answers to requests made by req.
// Answer i comes from ms[i mod len(ms)], as lead assigns its peers. Each
// is a sub-agent call priced at price.
func (r *runner) majorityArm(name string, ms []delegate.Model, price delegate.Price, req func(*world.Problem, int) *delegate.Request, n int) bench.Arm {
	return bench.Arm{Name: name, Strategy: perRun{NameMajority, func(request string) (delegate.Strategy, error) {
		p, err := r.problem(request)
		if err != nil {
			return nil, err
		}
		agents := make([]delegate.Agent, len(ms))
		for i, m := range ms {
			agents[i] = r.subagent(m, price)
		}
		return &majority{agents: agents, p: p, n: n, req: req}, nil
	}}}
}

// budgetCount is how many answers costing one each fit the budget, at
// least 1. A baseline never gets more than the team spends.
func budgetCount(budget, one float64) int {
	if !(one > 0) || !(budget > 0) {
		return 1
	}
	return max(1, int(budget/one))
}

// mlpoMode trains a leader under lead, frozen peers answering first.
type mlpoMode struct{ r *runner }

func (mlpoMode) startModel() string                          { return "delegator" }
func (mlpoMode) settings(*strategy.Config)                   {}
func (mlpoMode) prepare(context.Context, func(string)) error { return nil }
func (mlpoMode) acceptance(t *Table) []Check                 { return mlpoAcceptance(t) }
func (m mlpoMode) source(ctx context.Context, cfg rl.Config) (rl.Source, error) {
	return m.r.mlpoEnv(ctx, cfg)
}

// startArms are the untrained leader's arms, alone and with its peers.
func (m mlpoMode) startArms() int { return len(m.trainedArms(0)) }

// open loads the frozen peers, each solving with scratch work and each
// answer computed once (local.Model.Memoized).
func (m mlpoMode) open() error {
	r := m.r
	for i, c := range r.cfg.peerCheckpoints() {
		dir, what := c, "peer"
		if name, ok := strings.CutPrefix(c, ShippedPrefix); ok {
			dir, what = "", name
		}
		pp, err := loadCheckpoint(what, dir)
		if err != nil {
			return fmt.Errorf("train: peer %d: %w", i+1, err)
		}
		pm, err := r.open(pp, fmt.Sprintf("peer-%d", i+1))
		if err != nil {
			return err
		}
		r.peers = append(r.peers, scratchPeer{m: pm.Memoized(), maxTokens: r.scfg.Single.MaxTokens})
	}
	return nil
}

// final adds the majorities at the trained team's dollar budget. They take
// as many peer answers, and as many samples of the trained leader alone,
// as fit in what the team costs.
func (m mlpoMode) final(ctx context.Context, _ func(string), arms []bench.Arm, tab *Table, steps int) ([]bench.Arm, *Table, error) {
	r := m.r
	team, alone, votes := tab.Row(ArmTeam), tab.Row(ArmLeaderAlone), tab.Row(ArmMajority)
	nPeers := budgetCount(team.Cost, votes.Cost/float64(r.cfg.PeerCount+1))
	nOwn := budgetCount(team.Cost, alone.Cost)
	arms = append(arms,
		r.majorityArm(fmt.Sprintf("%s (%d answers, step %d)", ArmPeersCost, nPeers, steps), r.peers, r.cfg.Prices.Delegator, r.peerRequest, nPeers),
		r.majorityArm(fmt.Sprintf("%s (%d samples, step %d)", ArmOwnMajority, nOwn, steps), []delegate.Model{r.policy}, r.cfg.Prices.Delegator, r.leaderSample, nOwn))
	tab, err := r.evaluate(ctx, arms)
	if err != nil {
		return nil, nil, err
	}
	return arms, tab, nil
}

// notes say how the team was made.
func (m mlpoMode) notes() []string {
	r, c := m.r, m.r.cfg
	ckpts := c.peerCheckpoints()
	var peers []string
	for i := range c.PeerCount {
		peers = append(peers, fmt.Sprintf("peer %d %s", i+1, ckpts[i%len(ckpts)]))
	}
	lead := fmt.Sprintf("Lead with %d frozen peers (%s; temperature %g, answers fixed per item). A peer solves alone in the delegator's format, scratch work included, and the leader reads its answer condensed to one line per step and <answer> (transcript.Condense); the team pays for the whole reply. The majority vote takes %d peer answers (the team's number of generations, peers in turn); each peer model alone is greedy. Training items: those the peers solve less than %g of the time (%d samples).",
		c.PeerCount, strings.Join(peers, ", "), r.scfg.Peer.Temperature, c.PeerCount+1, c.FilterMaxRate, c.PeerSamples)
	return []string{lead}
}

// baselines are the peers' majority vote, each peer model alone and the
// untrained leader, alone and with the peers.
func (m mlpoMode) baselines() []bench.Arm {
	r := m.r
	arms := []bench.Arm{r.majorityArm(ArmMajority, r.peers, r.cfg.Prices.Delegator, r.peerRequest, r.cfg.PeerCount+1)}
	seen := map[string]bool{}
	for i, c := range r.cfg.peerCheckpoints() {
		if !seen[c] && i < len(r.peers) {
			seen[c] = true
			arms = append(arms, r.majorityArm(fmt.Sprintf("%s (%s, greedy)", ArmPeerAlone, c), r.peers[i:i+1], r.cfg.Prices.Delegator, r.peerAloneRequest, 1))
		}
	}
	return append(arms, []bench.Arm{
		{Name: ArmUntrained, Strategy: perRun{strategy.NameSingle, func(string) (delegate.Strategy, error) {
			return r.single(r.delegatorAgent(newConversation(r.pretrained, r.cfg.CacheMinTokens)))
		}}},
		{Name: ArmPretrTeam, Strategy: perRun{strategy.NameLead, func(req string) (delegate.Strategy, error) {
			p, err := r.problem(req)
			if err != nil {
				return nil, err
			}
			return r.lead(p, r.scfg, r.pretrained)
		}}},
	}...)
}

// trainedArms are the trained leader with the peers and alone.
func (m mlpoMode) trainedArms(steps int) []bench.Arm {
	r := m.r
	return []bench.Arm{
		{Name: trainedName(ArmTeam, steps), Strategy: perRun{strategy.NameLead, func(req string) (delegate.Strategy, error) {
			p, err := r.problem(req)
			if err != nil {
				return nil, err
			}
			return r.lead(p, r.scfg, r.policy)
		}}},
		{Name: trainedName(ArmLeaderAlone, steps), Strategy: perRun{strategy.NameSingle, func(string) (delegate.Strategy, error) {
			return r.single(r.delegatorAgent(newConversation(r.policy, r.cfg.CacheMinTokens)))
		}}},
	}
}

// majority is the majority vote over n sampled answers of one agent to
// the requests req makes. They are the peers' answers, the first K those
// lead shows its leader, or samples of the leader alone. Ties go to the
// answer seen first.
type majority struct {
	agents []delegate.Agent // answer i by agents[i mod len]
	p      *world.Problem
	n      int
	req    func(*world.Problem, int) *delegate.Request
}

func (m *majority) Name() string { return NameMajority }

func (m *majority) Run(ctx context.Context, request string, events chan<- delegate.Event) (*delegate.Trace, error) {
	rec := delegate.NewRecorder(NameMajority, request, events)
	g := rec.Group(nil, strategy.RoundNode(0))
	texts := make([]string, m.n)
	var wg sync.WaitGroup
	for i := range m.n {
		wg.Go(func() {
			resp, err := rec.Call(ctx, g, strategy.PeerNode(i+1), m.agents[i%len(m.agents)], m.req(m.p, i))
			if err == nil {
				texts[i] = resp.Text()
			}
		})
	}
	wg.Wait()
	rec.EndGroup(g)
	answer, votes := vote(texts)
	var failure delegate.Failure
	if votes == 0 {
		failure = delegate.Failure{Kind: delegate.FailureAnswerFormat, Message: "format: no answer held an integer"}
	}
	tr := rec.Finish(answer, failure)
	return tr, ctx.Err()
}

// vote returns the most frequent integer answer of texts and its count.
// Ties go to the first seen; "" and 0 mean none has one.
func vote(texts []string) (string, int) {
	count := map[int64]int{}
	var order []int64
	for _, t := range texts {
		v, err := world.ParseAnswer(t)
		if err != nil {
			continue
		}
		if count[v] == 0 {
			order = append(order, v)
		}
		count[v]++
	}
	best, n := int64(0), 0
	for _, v := range order {
		if count[v] > n {
			best, n = v, count[v]
		}
	}
	if n == 0 {
		return "", 0
	}
	return strconv.FormatInt(best, 10), n
}

// filterRecord is FilterFile.
type filterRecord struct {
	Version int     `json:"version"`
	Items   int     `json:"items"`
	Samples int     `json:"samples"`
	MaxRate float64 `json:"max_rate"`
	Kept    []int   `json:"kept"`
}

// filter returns the training items MLPO keeps. It reads FilterFile when
// that matches the run's settings, else samples the peers and saves it.
func (r *runner) filter(ctx context.Context) ([]int, error) {
	path := filepath.Join(r.cfg.OutDir, FilterFile)
	want := filterRecord{Version: filterVersion, Items: len(r.trainSet), Samples: r.cfg.PeerSamples, MaxRate: r.cfg.FilterMaxRate}
	if b, err := os.ReadFile(path); err == nil {
		var got filterRecord
		if err := json.Unmarshal(b, &got); err != nil {
			return nil, fmt.Errorf("train: filter file %s: %w (remove it to filter again)", path, err)
		}
		if got.Version != filterVersion {
			return nil, fmt.Errorf("train: filter file %s has version %d, this program writes %d: remove it to filter again", path, got.Version, filterVersion)
		}
		if got.Items == want.Items && got.Samples == want.Samples && got.MaxRate == want.MaxRate {
			return got.Kept, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("train: %w", err)
	}
	rate := func(ctx context.Context, item int) (int, int, error) {
		p := r.trainSet[item]
		right := 0
		for i := range r.cfg.PeerSamples {
			resp, err := r.peers[i%len(r.peers)].Chat(ctx, r.peerRequest(p, i))
			if err != nil {
				return 0, 0, err
			}
			if world.Correct(resp.Text(), p.Answer) {
				right++
			}
		}
		return right, r.cfg.PeerSamples, nil
	}
	kept, err := rl.FilterSolved(ctx, len(r.trainSet), rate, r.cfg.FilterMaxRate, r.cfg.EvalConcurrency)
	if err != nil {
		return nil, fmt.Errorf("train: filter: %w", err)
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("train: filter: the peers solve every one of the %d training items; nothing to train on", len(r.trainSet))
	}
	want.Kept = kept
	b, err := json.Marshal(want)
	if err != nil {
		return nil, fmt.Errorf("train: filter: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, fmt.Errorf("train: filter: %w", err)
	}
	return kept, nil
}

// mlpoEnv trains the leader under lead on the kept items, the peers'
// answers fixed per item.
func (r *runner) mlpoEnv(ctx context.Context, cfg rl.Config) (rl.Source, error) {
	kept, err := r.filter(ctx)
	if err != nil {
		return nil, err
	}
	scfg := r.scfg
	scfg.Leader.Temperature = cfg.Temperature
	problems := make([]*world.Problem, len(kept))
	for i, k := range kept {
		problems[i] = r.trainSet[k]
	}
	return r.problemEnv(cfg, problems, func(p *world.Problem, leader, _ delegate.Agent) (delegate.Strategy, error) {
		return r.leadAgent(p, scfg, leader)
	}), nil
}
