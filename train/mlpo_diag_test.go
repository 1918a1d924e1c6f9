package train

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

var (
	mlpoLeader = flag.String("mlpo.leader", "", "TestMLPODiagnose: the leader's checkpoint directory (a run's checkpoint/policy), or shipped")
	mlpoDump   = flag.String("mlpo.dump", "", "TestMLPODiagnose: also write one JSON line per item (the peers' answers, the leader's outputs in the team and alone) to this file")
	mlpoItems  = flag.Int("mlpo.items", 300, "TestMLPODiagnose: items")
	mlpoSplit  = flag.String("mlpo.split", "validation", "TestMLPODiagnose: the items' split")
	mlpoPeers  = flag.Int("mlpo.peer-count", 3, "TestMLPODiagnose: the leader's peers (K)")
)

// diagItem is one item under MLPO: the peers' condensed answers, the
// leader's output in the team and alone.
type diagItem struct {
	ID          string   `json:"id"`
	Question    string   `json:"question"`
	Answer      int64    `json:"answer"`
	Right       string   `json:"right"` // the right steps in a peer's form
	Steps       int      `json:"steps"` // the problem's steps
	Peers       []string `json:"peers"`
	PeerRight   []bool   `json:"peer_right"`
	Team        string   `json:"team"` // the leader's output in the team
	TeamRight   bool     `json:"team_right"`
	TeamFinish  string   `json:"team_finish"`
	TeamPrompt  int      `json:"team_prompt_tokens"`
	TeamFailure string   `json:"team_failure,omitempty"`
	Alone       string   `json:"alone"` // the leader's output alone
	AloneRight  bool     `json:"alone_right"`
	// TeamSteps and AloneSteps are the outputs' steps condensed to a
	// peer's form (transcript.Condense).
	TeamSteps  string `json:"team_steps"`
	AloneSteps string `json:"alone_steps"`
}

// TestMLPODiagnose runs a leader on MLPO's validation items, with its team
// and alone, greedy. -mlpo.leader names a run's trained checkpoint, or
// shipped. The team runs as the table's team arm does, with the same
// peers, seeds and settings. It logs what the leader does with its peers'
// answers, and what simple rules over them would score
// (docs/mlpo/README.md):
//
//	go test -count=1 -run MLPODiagnose -v ./train -mlpo.leader RUN/checkpoint/policy [-mlpo.peer-count K] [-mlpo.dump items.jsonl]
func TestMLPODiagnose(t *testing.T) {
	if *mlpoLeader == "" {
		t.Skip("a diagnostic: needs -mlpo.leader")
	}
	cfg := DefaultConfig()
	cfg.Mode = ModeMLPO
	cfg.World = world.Levels()[world.MLPOLevel]
	cfg.World.Distractors = world.MLPODistractors
	cfg.TrainProblems = 256
	cfg.EvalItems = *mlpoItems
	cfg.EvalSplit = *mlpoSplit
	cfg.PeerCount = *mlpoPeers
	if *mlpoLeader != "shipped" {
		cfg.Delegator = *mlpoLeader
	}
	cfg.OutDir = t.TempDir()
	r, err := newRunner(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	items := make([]diagItem, len(r.testSet))
	ctx := context.Background()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, p := range r.testSet {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			it, err := r.diagnoseItem(ctx, p)
			if err != nil {
				t.Errorf("item %s: %v", p.ID, err)
			}
			items[i] = it
		})
	}
	wg.Wait()
	for _, it := range items {
		if len(it.Peers) != cfg.PeerCount {
			t.Errorf("item %s: %d peer answers, want %d", it.ID, len(it.Peers), cfg.PeerCount)
		}
	}
	for _, l := range diagnose(items).lines() {
		t.Log(l)
	}
	if *mlpoDump == "" {
		return
	}
	if err := os.MkdirAll(filepath.Dir(*mlpoDump), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(*mlpoDump)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			t.Fatal(err)
		}
	}
}

// diagnoseItem runs the leader (r.pretrained) on p with its team and alone.
func (r *runner) diagnoseItem(ctx context.Context, p *world.Problem) (diagItem, error) {
	it := diagItem{ID: p.ID, Question: p.Text, Answer: p.Answer, Steps: len(p.Steps)}
	it.Right, _ = transcript.PeerAnswer(p, -1, 0)
	team, err := r.lead(p, r.scfg, r.pretrained)
	if err != nil {
		return it, err
	}
	tr, err := team.Run(ctx, p.Text, nil)
	if err != nil {
		return it, err
	}
	it.TeamRight, it.TeamFailure = world.Correct(tr.Answer, p.Answer), tr.Failure
	walk(tr.Root, func(n *delegate.Node) {
		switch {
		case n.Output == nil:
		case n.Role == RoleSubagent:
			it.Peers = append(it.Peers, n.Output.Content)
			it.PeerRight = append(it.PeerRight, world.Correct(n.Output.Content, p.Answer))
		default:
			it.Team, it.TeamFinish, it.TeamPrompt = n.Output.Content, n.FinishReason, n.Usage.PromptTokens
		}
	})
	alone, err := r.single(r.delegatorAgent(newConversation(r.pretrained, r.cfg.CacheMinTokens)))
	if err != nil {
		return it, err
	}
	ta, err := alone.Run(ctx, p.Text, nil)
	if err != nil {
		return it, err
	}
	it.AloneRight = world.Correct(ta.Answer, p.Answer)
	walk(ta.Root, func(n *delegate.Node) {
		if n.Output != nil {
			it.Alone = n.Output.Content
		}
	})
	it.TeamSteps, it.AloneSteps = transcript.Condense(it.Team), transcript.Condense(it.Alone)
	return it, nil
}

func walk(n *delegate.Node, f func(*delegate.Node)) {
	if n == nil {
		return
	}
	f(n)
	for _, c := range n.Children {
		walk(c, f)
	}
}

// wellFormed returns a peer's condensed answer's <answer> and whether it
// is well formed. Well formed is an <answer> after one "expr=result" line
// per step of the problem. A peer that stopped early, ran out of room, or
// went on with steps made of a distractor sentence's numbers is not.
func wellFormed(answer string, steps int) (int64, bool) {
	tag, ok := delegate.AnswerTag(answer)
	if !ok {
		return 0, false
	}
	v, err := world.ParseAnswer("<answer>" + tag + "</answer>")
	if err != nil {
		return 0, false
	}
	lines := 0
	for _, l := range strings.Split(answer, "\n") {
		expr, _, found := strings.Cut(strings.TrimSpace(l), "=")
		if _, _, _, err := world.ParseExpr(expr); found && err == nil {
			lines++
		}
	}
	return v, lines == steps
}

// diagnosis counts, over items, how the team's leader uses its peers. It
// also counts what simple rules over the same answers would score.
type diagnosis struct {
	n, team, alone int
	// teamOnly and aloneOnly are the items only the team, or only the
	// leader alone, gets right. aloneOnlyCopied are those of aloneOnly
	// whose team answer is some peer's.
	teamOnly, aloneOnly, aloneOnlyCopied int
	// agree[k] counts the items whose most common well-formed peer answer
	// k peers give; 0 means none is well formed. agreeRight[k] counts
	// those where it is right.
	agree, agreeRight map[int]int
	// ruleV1 takes the answer two or more well-formed peers agree on, else
	// the leader alone's. ruleV2 votes over the well-formed peers' answers
	// and the leader alone's, ties to the leader's. anyRight is some peer
	// or the leader alone right.
	ruleV1, ruleV2, anyRight int
}

func diagnose(items []diagItem) diagnosis {
	d := diagnosis{n: len(items), agree: map[int]int{}, agreeRight: map[int]int{}}
	for _, it := range items {
		own, ownErr := world.ParseAnswer(it.Alone)
		team, teamErr := world.ParseAnswer(it.Team)
		if it.TeamRight {
			d.team++
		}
		if it.AloneRight {
			d.alone++
		}
		count := map[int64]int{}
		var order []int64
		copied, some := false, it.AloneRight
		for i, a := range it.Peers {
			if v, err := world.ParseAnswer(a); err == nil && teamErr == nil && v == team {
				copied = true
			}
			some = some || (i < len(it.PeerRight) && it.PeerRight[i])
			v, ok := wellFormed(a, it.Steps)
			if !ok {
				continue
			}
			if count[v] == 0 {
				order = append(order, v)
			}
			count[v]++
		}
		if some {
			d.anyRight++
		}
		switch {
		case it.TeamRight && !it.AloneRight:
			d.teamOnly++
		case !it.TeamRight && it.AloneRight:
			d.aloneOnly++
			if copied {
				d.aloneOnlyCopied++
			}
		}
		top, k := int64(0), 0
		for _, v := range order {
			if count[v] > k {
				top, k = v, count[v]
			}
		}
		d.agree[k]++
		if k > 0 && top == it.Answer {
			d.agreeRight[k]++
		}
		if (k >= 2 && top == it.Answer) || (k < 2 && ownErr == nil && own == it.Answer) {
			d.ruleV1++
		}
		v2, best := int64(0), 0
		if ownErr == nil {
			count[own]++
			v2, best = own, count[own]
		}
		for _, v := range order {
			if count[v] > best {
				v2, best = v, count[v]
			}
		}
		if best > 0 && v2 == it.Answer {
			d.ruleV2++
		}
	}
	return d
}

func (d diagnosis) lines() []string {
	share := func(k int) string { return fmt.Sprintf("%d (%.3f)", k, float64(k)/float64(max(d.n, 1))) }
	out := []string{
		fmt.Sprintf("%d items: team right %s, leader alone right %s", d.n, share(d.team), share(d.alone)),
		fmt.Sprintf("right only with the team %d, only alone %d (of these, the team's answer is some peer's on %d)", d.teamOnly, d.aloneOnly, d.aloneOnlyCopied),
	}
	for k := range 9 {
		if d.agree[k] > 0 {
			out = append(out, fmt.Sprintf("most common well-formed peer answer given by %d peers: %d items, right on %d", k, d.agree[k], d.agreeRight[k]))
		}
	}
	return append(out,
		fmt.Sprintf("rule V1 (two or more well-formed peers agree: their answer; else the leader alone's): %s", share(d.ruleV1)),
		fmt.Sprintf("rule V2 (vote of the well-formed peers and the leader alone, ties to the leader): %s", share(d.ruleV2)),
		fmt.Sprintf("some peer or the leader alone right (a ceiling): %s", share(d.anyRight)),
	)
}

// TestDiagnose checks the diagnosis's counts on hand-made items of a
// two-step problem whose answer is 687.
func TestDiagnose(t *testing.T) {
	right := "61*12=732\n0732-0045=687\n<answer>687</answer>"
	extra := "61*12=732\n0732-0045=687\n24*12=288\n0687-0288=399\n<answer>399</answer>"
	wrong := "60*12=720\n0720-0045=675\n<answer>675</answer>"
	early := "61*12=732\n<answer>732</answer>"
	item := func(alone, team string, peers ...string) diagItem {
		it := diagItem{Answer: 687, Steps: 2, Alone: alone, Team: team, Peers: peers}
		for _, p := range peers {
			it.PeerRight = append(it.PeerRight, world.Correct(p, 687))
		}
		it.AloneRight, it.TeamRight = world.Correct(alone, 687), world.Correct(team, 687)
		return it
	}
	d := diagnose([]diagItem{
		// Two well-formed peers agree and are right; alone and team wrong.
		item(`\boxed{675}`, "<answer>675</answer>", right, right, wrong),
		// Only one well-formed peer; alone right, the team copies a wrong peer.
		item(`\boxed{687}`, "<answer>399</answer>", extra, early, right),
		// No well-formed peer; alone right, the team too.
		item(`\boxed{687}`, "<answer>687</answer>", extra, early, extra),
		// Two wrong well-formed peers against the leader alone, right.
		item(`\boxed{687}`, "<answer>675</answer>", wrong, wrong, right),
	})
	tests := []struct {
		name      string
		got, want int
	}{
		{"team", d.team, 1},
		{"alone", d.alone, 3},
		{"teamOnly", d.teamOnly, 0},
		{"aloneOnly", d.aloneOnly, 2},
		{"aloneOnlyCopied", d.aloneOnlyCopied, 2},
		{"agree[0]", d.agree[0], 1},
		{"agree[1]", d.agree[1], 1},
		{"agree[2]", d.agree[2], 2},
		{"agreeRight[2]", d.agreeRight[2], 1},
		{"agreeRight[1]", d.agreeRight[1], 1},
		{"ruleV1", d.ruleV1, 3},
		{"ruleV2", d.ruleV2, 3},
		{"anyRight", d.anyRight, 4},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}
