package rollout

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
)

// withTokens gives a text response the token ids and logprobs a local model returns.
// The ids are the prompt rendered by the chat template, then the reply and its closing <|end|>.
func withTokens(req *delegate.Request, resp *delegate.Response) *delegate.Response {
	resp.PromptTokenIDs = tokenizer.Render(req.Messages, req.Tools, true)
	if !req.Logprobs {
		return resp // as a local backend does: prompt ids always, logprobs when asked
	}
	out := resp.Choices[0].Message
	gen := tokenizer.Render([]delegate.Message{out}, nil, false)
	gen = gen[2:] // drop <s> and <|assistant|>: the model wrote what follows
	for i, id := range gen {
		resp.Choices[0].Logprobs = append(resp.Choices[0].Logprobs,
			delegate.TokenLogprob{Token: tokenizer.Piece(id), TokenID: id, Logprob: -0.25 - float64(i%3)/10})
	}
	return resp
}

func planText(subtasks ...string) string {
	var b strings.Builder
	b.WriteString("<|reasoning|>\nSplit it up.\n</|reasoning|>\n")
	for _, s := range subtasks {
		b.WriteString("<|subtask|>\n" + s + "\n<|end_subtask|>\n")
	}
	return b.String()
}

// subagentModel is the fixtures' sub-agent: it answers "done: " and the
// first five bytes of its question.
func subagentModel() *modeltest.Model {
	return modeltest.New("subagent-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("done: " + modeltest.LastUser(req)[:5]), nil
	})
}

// singleModel is the fixtures' baseline model: it always answers "base".
func singleModel() *modeltest.Model {
	return modeltest.New("single-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("Thinking.\nFinal answer: base"), nil
	})
}

// fixture is a decompose policy, a single baseline and a scorer over
// scripted models. The n-th aggregation (from 1) answers "score <score(n)>";
// the scorer's reward is that number.
type fixture struct {
	score    func(n int64) int64 // the score of the n-th aggregation
	failPlan func(n int64) bool  // fail the n-th plan call
	onCall   func(n int64)       // called at every delegator call, numbered from 1
	badPlan  bool                // plan without tags: a format failure
	// formatCost, when set, is subtracted from a format failure's -1.
	// It is the token cost that graded rewards add to a fixed reward.
	formatCost func() float64
	planN      atomic.Int64 // plan calls so far
	aggN       atomic.Int64 // aggregation calls so far
	callN      atomic.Int64 // delegator calls so far
	judge      *modeltest.Model
	policy     delegate.Strategy
	baseline   delegate.Strategy
	scorer     Scorer
	delegator  *modeltest.Model
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{score: func(n int64) int64 { return n }}
	f.delegator = modeltest.New("delegator-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		if f.onCall != nil {
			f.onCall(f.callN.Add(1))
		}
		if modeltest.Contains(req, "Subtask 1") {
			n := f.aggN.Add(1)
			return withTokens(req, modeltest.Text(fmt.Sprintf("Merged.\nFinal Output:\nscore %d", f.score(n)))), nil
		}
		n := f.planN.Add(1)
		if f.failPlan != nil && f.failPlan(n) {
			return nil, &delegate.APIError{Status: 500, Type: "server_error", Message: "scripted failure", Attempts: 1}
		}
		if f.badPlan {
			return withTokens(req, modeltest.Text("I will just answer.")), nil
		}
		return withTokens(req, modeltest.Text(planText("Find A.", "Find B.", "Find C."))), nil
	})
	subagent, single := subagentModel(), singleModel()
	f.judge = modeltest.New("judge-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("Score A: 70\nScore B: 40"), nil
	})
	cfg := strategy.DefaultConfig()
	var err error
	f.policy, err = strategy.New(strategy.NameDecompose, strategy.Roles{
		Delegator: delegate.Agent{Model: f.delegator, Price: delegate.Price{Input: 1, Output: 2}, Sampler: delegate.NewSampler(delegate.Sampling{Logprobs: true})},
		Subagent:  delegate.Agent{Model: subagent},
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.baseline, err = strategy.New(strategy.NameSingle, strategy.Roles{Single: delegate.Agent{Model: single}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.scorer = ScorerFunc(func(ctx context.Context, rec *delegate.Recorder, task delegate.Task, base, tr *delegate.Trace) (Score, error) {
		if _, err := rec.Call(ctx, nil, "judge", delegate.Agent{Role: "judge", Model: f.judge},
			&delegate.Request{Messages: []delegate.Message{delegate.User(tr.Answer + " vs " + base.Answer)}}); err != nil {
			return Score{}, err
		}
		if delegate.ParseFailureKind(tr.Failure) != "" {
			r := -1.0
			if f.formatCost != nil {
				r -= f.formatCost()
			}
			return Score{Reward: r, Fixed: FixedFormat}, nil
		}
		v, err := strconv.Atoi(strings.TrimPrefix(tr.Answer, "score "))
		if err != nil {
			return Score{}, fmt.Errorf("answer %q has no score", tr.Answer)
		}
		right := v > 0
		return Score{Reward: float64(v), Candidate: float64(v) * 10, Baseline: 50, Outcome: "win",
			Inputs: &reward.Outcome{FormatOK: true, Correct: &right, Calls: 3, Tokens: 10 + v, Cost: 0.5},
			Judge: &judge.Verdict{Mode: judge.ModePairwise, Outcome: judge.Win, Candidate: 70, Baseline: 40, Diff: 30,
				Orders: []judge.OrderResult{{Order: judge.CandidateFirst, Parsed: true, ScoreA: 70, ScoreB: 40, Raw: "Score A: 70\nScore B: 40"}}}}, nil
	})
	return f
}

// grpo is the group-normalised advantage, written out for the tests.
func grpo(r []float64) ([]float64, error) {
	var mean, sq float64
	for _, x := range r {
		mean += x
	}
	mean /= float64(len(r))
	for _, x := range r {
		sq += (x - mean) * (x - mean)
	}
	std := math.Sqrt(sq / float64(len(r)))
	out := make([]float64, len(r))
	for i, x := range r {
		out[i] = (x - mean) / (std + 1e-6)
	}
	return out, nil
}

func tasks(n int) []delegate.Task {
	out := make([]delegate.Task, n)
	for i := range out {
		out[i] = delegate.Task{ID: fmt.Sprintf("t%d", i), Dataset: "open", Prompt: fmt.Sprintf("Request number %d.", i)}
	}
	return out
}

// config is DefaultConfig for items groups of g in dir, 3 in flight.
func config(dir string, items, g int) Config {
	c := DefaultConfig()
	c.Items, c.GroupSize, c.Concurrency, c.Advantages, c.Seed, c.OutDir = items, g, 3, grpo, 7, dir
	return c
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("%s does not end with a newline", path)
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		out = append(out, slices.Clone(sc.Bytes()))
	}
	return out
}

func readArtifacts(t *testing.T, dir string) []*Artifact {
	t.Helper()
	var out []*Artifact
	for i, line := range readLines(t, filepath.Join(dir, ArtifactsFile)) {
		a, err := DecodeArtifact(line)
		if err != nil {
			t.Fatalf("artifact line %d: %v", i+1, err)
		}
		out = append(out, a)
	}
	return out
}

func readGroups(t *testing.T, dir string) []*GroupRecord {
	t.Helper()
	var out []*GroupRecord
	for i, line := range readLines(t, filepath.Join(dir, GroupsFile)) {
		g, err := DecodeGroup(line)
		if err != nil {
			t.Fatalf("group line %d: %v", i+1, err)
		}
		out = append(out, g)
	}
	return out
}

// checkComplete checks the invariants of a finished run.
// There are exactly items×g artifacts with the expected unique ids and one group decision per item,
// and summary.json agrees.
func checkComplete(t *testing.T, dir string, items, g int) ([]*Artifact, []*GroupRecord, Summary) {
	t.Helper()
	arts := readArtifacts(t, dir)
	if got, want := len(arts), items*g; got != want {
		t.Errorf("artifacts: %d records, want %d", got, want)
	}
	seen := map[string]bool{}
	for _, a := range arts {
		if seen[a.ID] {
			t.Errorf("artifact %s recorded twice", a.ID)
		}
		seen[a.ID] = true
	}
	for i := range items {
		for k := range g {
			if id := rolloutID(fmt.Sprintf("t%d", i), 0, k); !seen[id] {
				t.Errorf("artifact %s missing", id)
			}
		}
	}
	groups := readGroups(t, dir)
	gseen := map[string]bool{}
	for _, gr := range groups {
		if gseen[gr.ID] {
			t.Errorf("group %s recorded twice", gr.ID)
		}
		gseen[gr.ID] = true
	}
	var s Summary
	data, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if s.Version != SummaryVersion || !s.Complete || s.Rollouts != items*g || s.Groups != items || s.GroupsWritten != len(groups) {
		t.Errorf("summary = version %d complete %v rollouts %d groups %d written %d; want %d, true, %d, %d, %d",
			s.Version, s.Complete, s.Rollouts, s.Groups, s.GroupsWritten, SummaryVersion, items*g, items, len(groups))
	}
	dropped := 0
	for _, n := range s.Dropped {
		dropped += n
	}
	if got, want := s.GroupsWritten+dropped, s.Groups; got != want {
		t.Errorf("written %d + dropped %d = %d groups, want %d: a group is unaccounted for", s.GroupsWritten, dropped, got, want)
	}
	return arts, groups, s
}

// checkSequences checks the token layout of a group against the chat template.
// Lengths are equal, masks are -100 exactly outside the trained assistant spans,
// and logprobs are 1.0 where masked.
func checkSequences(t *testing.T, gr *GroupRecord, tools ...delegate.Tool) {
	t.Helper()
	n := len(gr.Scores)
	for name, l := range map[string]int{"tokens": len(gr.Tokens), "masks": len(gr.Masks), "inference_logprobs": len(gr.InferenceLogprobs),
		"messages": len(gr.Messages), "advantages": len(gr.Advantages), "overrides": len(gr.Overrides), "sequence_rollout": len(gr.SequenceRollout)} {
		if l != n {
			t.Errorf("group %s: %d %s for %d scores", gr.ID, l, name, n)
		}
	}
	for i := range gr.Tokens {
		toks, masks, lps := gr.Tokens[i], gr.Masks[i], gr.InferenceLogprobs[i]
		if len(toks) == 0 || len(toks) != len(masks) || len(toks) != len(lps) {
			t.Errorf("group %s sequence %d: %d tokens, %d masks, %d logprobs; want equal and non-zero", gr.ID, i, len(toks), len(masks), len(lps))
			continue
		}
		var msgs []delegate.Message
		for _, m := range gr.Messages[i] {
			msgs = append(msgs, m.Message)
		}
		want, spans := tokenizer.RenderSpans(msgs, tools, false)
		if !slices.Equal(toks, want) {
			t.Errorf("group %s sequence %d: tokens differ from the chat template's rendering", gr.ID, i)
			continue
		}
		trained := make([]bool, len(toks))
		for j, sp := range spans {
			if gr.Messages[i][j].Trained {
				for p := sp.Body; p < sp.End; p++ {
					trained[p] = true
				}
			}
		}
		for p := range toks {
			switch {
			case trained[p] && masks[p] != toks[p]:
				t.Errorf("group %s sequence %d position %d: mask %d in a trained turn, want the token %d", gr.ID, i, p, masks[p], toks[p])
			case !trained[p] && (masks[p] != delegate.MaskIgnore || lps[p] != 1.0):
				t.Errorf("group %s sequence %d position %d: mask %d logprob %v outside the trained turns, want -100 and 1.0", gr.ID, i, p, masks[p], lps[p])
			case trained[p] && lps[p] >= 0:
				t.Errorf("group %s sequence %d position %d: logprob %v, want the model's", gr.ID, i, p, lps[p])
			}
		}
	}
}

func TestRunWritesGroupsAndArtifacts(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	progress := make(chan Progress, 1000)
	sum, err := Run(context.Background(), config(dir, 3, 4), tasks(5), f.baseline, Same(f.policy), f.scorer, progress)
	if err != nil {
		t.Fatal(err)
	}
	close(progress)
	arts, groups, _ := checkComplete(t, dir, 3, 4)
	if got, want := len(groups), 3; got != want {
		t.Fatalf("groups: %d, want %d", got, want)
	}
	for _, gr := range groups {
		if gr.Version != GroupVersion || gr.GroupOverrides.GroupSize != 4 || len(gr.Rollouts) != 4 {
			t.Errorf("group %s: version %d, group_size %d, %d rollouts; want %d, 4, 4", gr.ID, gr.Version, gr.GroupOverrides.GroupSize, len(gr.Rollouts), GroupVersion)
		}
		// decompose trains two conversations per rollout: its plan and its aggregation.
		if got, want := len(gr.Tokens), 8; got != want {
			t.Errorf("group %s: %d sequences, want %d", gr.ID, got, want)
		}
		var sum float64
		for _, m := range gr.Rollouts {
			sum += m.Advantage
			// What the reward was computed from comes with each member,
			// for a trainer's metrics.
			if o := m.Outcome; o == nil || o.Correct == nil || o.Calls != 3 || o.Tokens != 10+int(m.Reward) || o.Cost != 0.5 {
				t.Errorf("group %s member %s: outcome %+v, want 3 sub-agent calls and the policy's tokens", gr.ID, m.ID, o)
			}
		}
		if math.Abs(sum) > 1e-9 {
			t.Errorf("group %s: advantages sum to %v, want 0", gr.ID, sum)
		}
		checkSequences(t, gr)
	}
	for _, a := range arts {
		if a.Version != ArtifactVersion || a.Status != StatusScored {
			t.Errorf("artifact %s: version %d status %q", a.ID, a.Version, a.Status)
		}
		if len(a.Subtasks) != 3 || len(a.SubagentOutputs) != 3 || !strings.HasPrefix(a.FinalOutput, "score ") ||
			!strings.Contains(a.Stage1Raw, "<|subtask|>") || a.BaselineOutput != "base" || a.Score == nil || a.Score.Judge == nil || a.Score.Judge.Orders[0].Raw == "" {
			t.Errorf("artifact %s lacks reference fields: %+v", a.ID, a)
		}
		if a.Roles["delegator"].Calls != 2 || a.Roles["subagent"].Calls != 3 || a.ScoreTotals.Calls != 1 || a.Total.Cost <= 0 {
			t.Errorf("artifact %s: roles %+v, score calls %d, cost %v", a.ID, a.Roles, a.ScoreTotals.Calls, a.Total.Cost)
		}
		if a.Trace == nil || a.BaselineTrace == nil || a.ScoreTrace == nil {
			t.Errorf("artifact %s: traces not embedded", a.ID)
		}
	}
	if sum.MeanReward <= 0 || sum.MeanCandidate != sum.MeanReward*10 || sum.MeanBaseline != 50 {
		t.Errorf("summary means: reward %v candidate %v baseline %v", sum.MeanReward, sum.MeanCandidate, sum.MeanBaseline)
	}
	var last Progress
	for p := range progress {
		last = p
	}
	if last.ItemsDone != 3 || last.RolloutsDone != 12 || last.Items != 3 || last.Rollouts != 12 {
		t.Errorf("last progress = %+v, want 3/3 items, 12/12 rollouts", last)
	}
}

func TestRunAllTies(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep_ties=%v", keep), func(t *testing.T) {
			dir := t.TempDir()
			f := newFixture(t)
			f.score = func(int64) int64 { return 5 }
			cfg := config(dir, 4, 3)
			cfg.KeepTies = keep
			sum, err := Run(context.Background(), cfg, tasks(4), f.baseline, Same(f.policy), f.scorer, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, groups, _ := checkComplete(t, dir, 4, 3)
			if got, want := sum.Ties[DropEqual], 4; got != want {
				t.Errorf("ties counted: %d, want %d", got, want)
			}
			if !keep {
				if len(groups) != 0 || sum.Dropped[DropEqual] != 4 {
					t.Errorf("groups written %d, dropped as equal %d; want 0 and 4", len(groups), sum.Dropped[DropEqual])
				}
				return
			}
			if len(groups) != 4 || sum.TiesKept != 4 || sum.Dropped[DropEqual] != 0 {
				t.Errorf("groups written %d, ties kept %d, dropped %d; want 4, 4, 0", len(groups), sum.TiesKept, sum.Dropped[DropEqual])
			}
			for _, gr := range groups {
				if gr.Reason != DropEqual {
					t.Errorf("group %s: reason %q, want %q", gr.ID, gr.Reason, DropEqual)
				}
				for i, a := range gr.Advantages {
					if a != 0 || !gr.Overrides[i].SetAdvantageToZero {
						t.Errorf("group %s sequence %d: advantage %v, override %+v; want 0 and set_advantage_to_zero", gr.ID, i, a, gr.Overrides[i])
					}
				}
			}
		})
	}
}

func TestRunFailingRollout(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	f.failPlan = func(n int64) bool { return n == 2 || n == 5 || n == 6 || n == 7 }
	cfg := config(dir, 2, 4)
	cfg.Concurrency = 1 // plan calls 1-4 are item 0's, 5-8 item 1's
	sum, err := Run(context.Background(), cfg, tasks(2), f.baseline, Same(f.policy), f.scorer, nil)
	if err != nil {
		t.Fatal(err)
	}
	arts, groups, _ := checkComplete(t, dir, 2, 4)
	failed := 0
	for _, a := range arts {
		if a.Status == StatusFailed {
			failed++
			if !strings.Contains(a.Error, "scripted failure") || a.Trace == nil {
				t.Errorf("failed artifact %s: error %q, trace %v; want the model's error and the trace", a.ID, a.Error, a.Trace != nil)
			}
		}
	}
	if failed != 4 || sum.RolloutsFailed != 4 || sum.RolloutsScored != 4 {
		t.Errorf("failed %d (summary %d), scored %d; want 4, 4, 4", failed, sum.RolloutsFailed, sum.RolloutsScored)
	}
	// Item 0 keeps its three scored siblings; item 1 has one and is dropped.
	if len(groups) != 1 || groups[0].TaskID != "t0" || len(groups[0].Rollouts) != 3 || len(groups[0].Missing) != 1 ||
		groups[0].GroupOverrides.GroupSize != 3 || groups[0].Missing[0].Index != 1 {
		t.Fatalf("groups = %+v; want t0 with 3 members and rollout 1 missing", groups)
	}
	checkSequences(t, groups[0])
	if got, want := sum.Dropped[DropErrors], 1; got != want {
		t.Errorf("dropped for errors: %d, want %d", got, want)
	}
	// The scripted error is an API error with status 500.
	if got, want := sum.Failed["call server_error"], 4; got != want || len(sum.Failed) != 1 {
		t.Errorf("failed by reason %v, want call server_error %d", sum.Failed, want)
	}
	if d := sum.Roles["delegator"]; d.Calls == 0 || d.Errors != 4 {
		t.Errorf("delegator totals %+v, want calls and 4 errors", d)
	}
	if sum.Baselines.Calls != 2 {
		t.Errorf("baseline calls %d, want 2", sum.Baselines.Calls)
	}
}

func TestRunResumesAfterCancel(t *testing.T) {
	const items, g = 3, 3
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(seed, 99))
			// Each rollout makes 2 delegator calls: cancel somewhere in the run.
			stopAt := int64(1 + rng.IntN(items*g*2-1))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := newFixture(t)
			f.onCall = func(n int64) {
				if n == stopAt {
					cancel()
				}
			}
			sum, err := Run(ctx, config(dir, items, g), tasks(items), f.baseline, Same(f.policy), f.scorer, nil)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted run: err %v, want context.Canceled", err)
			}
			if sum.Complete || sum.Rollouts >= items*g {
				t.Fatalf("interrupted run: complete %v with %d rollouts", sum.Complete, sum.Rollouts)
			}
			first := sum.Rollouts

			f2 := newFixture(t)
			sum, err = Run(context.Background(), config(dir, items, g), tasks(items), f2.baseline, Same(f2.policy), f2.scorer, nil)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Resumed != first {
				t.Errorf("resumed %d rollouts, the first run recorded %d", sum.Resumed, first)
			}
			_, groups, _ := checkComplete(t, dir, items, g)
			for _, gr := range groups {
				if len(gr.Rollouts) != g {
					t.Errorf("group %s has %d members, want %d", gr.ID, len(gr.Rollouts), g)
				}
			}
			// The second run did only what was left.
			if got, want := int(f2.planN.Load()), items*g-first; got != want {
				t.Errorf("resumed run made %d plans, want %d", got, want)
			}
		})
	}
}

func TestRunRepairsTruncatedLine(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		tail   func(lastLine []byte) []byte
		repair string
	}{
		{"artifacts partial line", ArtifactsFile, func(l []byte) []byte { return l[:len(l)/2] }, "a partial line of"},
		{"artifacts unrecorded whole line", ArtifactsFile, func(l []byte) []byte { return l }, "1 whole unrecorded lines"},
		{"groups partial line", GroupsFile, func(l []byte) []byte { return l[:len(l)-7] }, "a partial line of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := newFixture(t)
			f.onCall = func(n int64) {
				if n == 9 { // with one rollout at a time: item 0's group is done
					cancel()
				}
			}
			cfg := config(dir, 3, 3)
			cfg.Concurrency = 1
			if _, err := Run(ctx, cfg, tasks(3), f.baseline, Same(f.policy), f.scorer, nil); !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted run: %v", err)
			}
			// A writer killed mid-record leaves bytes the state never recorded.
			path := filepath.Join(dir, tt.file)
			lines := readLines(t, path)
			if len(lines) == 0 {
				t.Fatalf("the interrupted run wrote nothing to %s", tt.file)
			}
			fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			extra := tt.tail(append(slices.Clone(lines[len(lines)-1]), '\n'))
			if _, err := fh.Write(extra); err != nil {
				t.Fatal(err)
			}
			fh.Close()

			f2 := newFixture(t)
			sum, err := Run(context.Background(), config(dir, 3, 3), tasks(3), f2.baseline, Same(f2.policy), f2.scorer, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(sum.Repairs) != 1 || !strings.Contains(sum.Repairs[0], tt.file) || !strings.Contains(sum.Repairs[0], tt.repair) {
				t.Errorf("repairs = %q, want one naming %s and %q", sum.Repairs, tt.file, tt.repair)
			}
			_, groups, _ := checkComplete(t, dir, 3, 3)
			if len(groups) != 3 {
				t.Errorf("%d groups after the repair, want 3", len(groups))
			}
		})
	}
}

func TestRunRefusesOtherConfig(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	if _, err := Run(context.Background(), config(dir, 2, 2), tasks(2), f.baseline, Same(f.policy), f.scorer, nil); err != nil {
		t.Fatal(err)
	}
	other := tasks(2)
	other[1].Prompt = "Another request."
	tests := []struct {
		name  string
		cfg   Config
		tasks []delegate.Task
		want  string
	}{
		{"group size", config(dir, 2, 3), tasks(2), "group_size 2 there, 3 now"},
		{"dataset", config(dir, 2, 2), other, "dataset"},
		{"estimator", func() Config { c := config(dir, 2, 2); c.Estimator = "rloo"; return c }(), tasks(2), "estimator grpo there, rloo now"},
		{"fingerprint", func() Config { c := config(dir, 2, 2); c.Fingerprint = "judge gpt-x"; return c }(), tasks(2), "fingerprint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(context.Background(), tt.cfg, tt.tasks, f.baseline, Same(f.policy), f.scorer, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	t.Run("strategy", func(t *testing.T) {
		_, err := Run(context.Background(), config(dir, 2, 2), tasks(2), f.baseline, Same(f.baseline), f.scorer, nil)
		if err == nil || !strings.Contains(err.Error(), "strategy decompose there, single now") {
			t.Errorf("got %v, want an error naming the strategy", err)
		}
	})
	// Same settings: nothing left to do, nothing duplicated.
	sum, err := Run(context.Background(), config(dir, 2, 2), tasks(2), f.baseline, Same(f.policy), f.scorer, nil)
	if err != nil || sum.Resumed != 4 {
		t.Errorf("rerun: resumed %d, err %v; want 4, nil", sum.Resumed, err)
	}
	checkComplete(t, dir, 2, 2)
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   string // "" valid, else a substring of the error
	}{
		{"defaults", func(*Config) {}, ""},
		{"all items, one in flight", func(c *Config) { c.Items, c.Concurrency = 0, 1 }, ""},
		{"group size", func(c *Config) { c.GroupSize = 1 }, "group_size"},
		{"estimator", func(c *Config) { c.Estimator = "ppo" }, "estimator"},
		{"out dir", func(c *Config) { c.OutDir = "" }, "out_dir"},
		{"concurrency", func(c *Config) { c.Concurrency = -1 }, "concurrency"},
		{"zero concurrency", func(c *Config) { c.Concurrency = 0 }, "concurrency: 0"},
		{"negative items", func(c *Config) { c.Items = -1 }, "items"},
		{"zero config", func(c *Config) { *c = Config{OutDir: c.OutDir} }, "group_size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.OutDir = "out"
			tt.modify(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

func TestRunBaselineFails(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	single := modeltest.New("single-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		if modeltest.Contains(req, "Request number 1.") {
			return nil, &delegate.APIError{Status: 503, Type: "server_error", Message: "overloaded", Attempts: 3}
		}
		return modeltest.Text("Final answer: base"), nil
	})
	var err error
	f.baseline, err = strategy.New(strategy.NameSingle, strategy.Roles{Single: delegate.Agent{Model: single}}, strategy.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), config(dir, 3, 2), tasks(3), f.baseline, Same(f.policy), f.scorer, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rollouts != 4 || sum.RolloutsSkipped != 2 || sum.Dropped[DropErrors] != 1 || sum.GroupsWritten != 2 || !sum.Complete {
		t.Errorf("summary: rollouts %d, skipped %d, dropped for errors %d, written %d, complete %v; want 4, 2, 1, 2, true",
			sum.Rollouts, sum.RolloutsSkipped, sum.Dropped[DropErrors], sum.GroupsWritten, sum.Complete)
	}
	for _, a := range readArtifacts(t, dir) {
		if a.TaskID == "t1" {
			t.Errorf("artifact %s of the item whose baseline failed", a.ID)
		}
	}
}

// A run without a baseline plays no single-model call per item and hands the scorer a nil baseline.
// It is a run of its own: the same directory with a baseline is another configuration.
func TestRunWithoutBaseline(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	var bases atomic.Int64
	sc := ScorerFunc(func(ctx context.Context, rec *delegate.Recorder, task delegate.Task, base, tr *delegate.Trace) (Score, error) {
		if base != nil {
			bases.Add(1)
		}
		var n int
		if _, err := fmt.Sscanf(tr.Answer, "score %d", &n); err != nil {
			return Score{}, fmt.Errorf("answer %q: %w", tr.Answer, err)
		}
		return Score{Candidate: float64(n), Reward: float64(n) / 10}, nil
	})
	sum, err := Run(context.Background(), config(dir, 3, 2), tasks(3), nil, Same(f.policy), sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkComplete(t, dir, 3, 2)
	if got := bases.Load(); got != 0 {
		t.Errorf("the scorer got a baseline trace %d times, want none", got)
	}
	if sum.Baselines.Calls != 0 {
		t.Errorf("summary: %d baseline calls, want 0", sum.Baselines.Calls)
	}
	for _, a := range readArtifacts(t, dir) {
		if a.BaselineStrategy != "" || a.BaselineTrace != nil || a.BaselineOutput != "" {
			t.Errorf("artifact %s: baseline %q, trace %v, output %q; want none", a.ID, a.BaselineStrategy, a.BaselineTrace != nil, a.BaselineOutput)
		}
	}
	_, err = Run(context.Background(), config(dir, 3, 2), tasks(3), f.baseline, Same(f.policy), sc, nil)
	if err == nil || !strings.Contains(err.Error(), "baseline strategy") {
		t.Errorf("the same directory with a baseline: got %v, want an error naming the baseline strategy", err)
	}
}

func TestRunScorerPanics(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	inner := f.scorer
	f.scorer = ScorerFunc(func(ctx context.Context, rec *delegate.Recorder, task delegate.Task, base, tr *delegate.Trace) (Score, error) {
		if tr.Answer == "score 2" {
			panic("scorer bug")
		}
		return inner.Score(ctx, rec, task, base, tr)
	})
	cfg := config(dir, 1, 4)
	cfg.Concurrency = 1
	sum, err := Run(context.Background(), cfg, tasks(1), f.baseline, Same(f.policy), f.scorer, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, groups, _ := checkComplete(t, dir, 1, 4)
	if sum.RolloutsFailed != 1 || len(groups) != 1 || len(groups[0].Rollouts) != 3 {
		t.Fatalf("failed %d, groups %+v; want 1 failed and a group of 3", sum.RolloutsFailed, groups)
	}
	if m := groups[0].Missing; len(m) != 1 || !strings.Contains(m[0].Error, "panic: scorer bug") || !strings.Contains(m[0].Error, "goroutine") {
		t.Errorf("missing = %+v; want the panic with its stack", m)
	}
}

// TestRunRouteSequences checks that route's turns extend one sequence.
// The strong model's second call continues its first conversation,
// so a rollout is one sequence with both of its turns trained.
func TestRunRouteSequences(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	var n atomic.Int64
	strong := modeltest.New("strong-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		for _, m := range req.Messages {
			if m.Role == delegate.RoleTool {
				return withTokens(req, modeltest.Text(fmt.Sprintf("Got it.\nFinal answer: score %d", n.Add(1)))), nil
			}
		}
		return withTokens(req, modeltest.ToolCalls(modeltest.Call("call_1", strategy.DelegateToolName, `{"question":"What is 6 * 7?"}`))), nil
	})
	weak := modeltest.New("weak-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("42"), nil
	})
	policy, err := strategy.New(strategy.NameRoute, strategy.Roles{Strong: delegate.Agent{Model: strong, Sampler: delegate.NewSampler(delegate.Sampling{Logprobs: true})}, Weak: delegate.Agent{Model: weak}}, strategy.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), config(dir, 2, 3), tasks(2), f.baseline, Same(policy), f.scorer, nil); err != nil {
		t.Fatal(err)
	}
	_, groups, _ := checkComplete(t, dir, 2, 3)
	if len(groups) != 2 {
		t.Fatalf("%d groups, want 2", len(groups))
	}
	for _, gr := range groups {
		if got, want := len(gr.Tokens), 3; got != want {
			t.Errorf("group %s: %d sequences, want one per rollout (%d)", gr.ID, got, want)
		}
		for i, msgs := range gr.Messages {
			trained := 0
			for _, m := range msgs {
				if m.Trained {
					trained++
				}
			}
			if trained != 2 {
				t.Errorf("group %s sequence %d: %d trained turns, want 2", gr.ID, i, trained)
			}
		}
		checkSequences(t, gr, strategy.DelegateTool)
	}
}

func TestRunRefusesSecondRunOnOneDirectory(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	started, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	f.onCall = func(int64) {
		if once.CompareAndSwap(false, true) {
			close(started)
			<-release
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), config(dir, 1, 2), tasks(1), f.baseline, Same(f.policy), f.scorer, nil)
		done <- err
	}()
	<-started
	_, err := Run(context.Background(), config(dir, 1, 2), tasks(1), f.baseline, Same(f.policy), f.scorer, nil)
	close(release)
	if err == nil || !strings.Contains(err.Error(), "another process holds it") {
		t.Errorf("second run: got %v, want an error saying the directory is held", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("first run: %v", err)
	}
	checkComplete(t, dir, 1, 2)
}

// TestRunWithoutLogprobs: a policy model not asked for logprobs gives
// sequences with messages and no tokens, and says why.
func TestRunWithoutLogprobs(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	sub := modeltest.New("subagent-model", func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("done"), nil
	})
	policy, err := strategy.New(strategy.NameDecompose, strategy.Roles{Delegator: delegate.Agent{Model: f.delegator}, Subagent: delegate.Agent{Model: sub}}, strategy.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), config(dir, 1, 2), tasks(1), f.baseline, Same(policy), f.scorer, nil); err != nil {
		t.Fatal(err)
	}
	_, groups, _ := checkComplete(t, dir, 1, 2)
	if len(groups) != 1 {
		t.Fatalf("%d groups, want 1", len(groups))
	}
	gr := groups[0]
	for i := range gr.Messages {
		if len(gr.Tokens[i]) != 0 || len(gr.Masks[i]) != 0 || len(gr.InferenceLogprobs[i]) != 0 || len(gr.Messages[i]) == 0 {
			t.Errorf("sequence %d: %d tokens, %d masks, %d logprobs, %d messages; want messages only", i,
				len(gr.Tokens[i]), len(gr.Masks[i]), len(gr.InferenceLogprobs[i]), len(gr.Messages[i]))
		}
	}
	if got := gr.NoTokens; len(got) != len(gr.Messages) || !strings.Contains(got[0], "no logprobs") {
		t.Errorf("no_tokens = %q, want one reason per sequence naming the missing logprobs", got)
	}
}

func TestRunAllFormatFailures(t *testing.T) {
	t.Run("equal rewards", func(t *testing.T) { testAllFormatFailures(t, nil) })
	// Rewards that differ by their token costs alone carry no signal.
	// The group is dropped all the same, not given full-size advantages.
	var n atomic.Int64
	t.Run("rewards differing by cost", func(t *testing.T) {
		testAllFormatFailures(t, func() float64 { return 1e-5 * float64(n.Add(1)) })
	})
}

func testAllFormatFailures(t *testing.T, cost func() float64) {
	dir := t.TempDir()
	f := newFixture(t)
	f.badPlan = true
	f.formatCost = cost
	sum, err := Run(context.Background(), config(dir, 2, 3), tasks(2), f.baseline, Same(f.policy), f.scorer, nil)
	if err != nil {
		t.Fatal(err)
	}
	arts, groups, _ := checkComplete(t, dir, 2, 3)
	if len(groups) != 0 || sum.Dropped[DropFormat] != 2 || sum.RolloutsFormat != 6 || sum.RolloutsFailed != 0 {
		t.Errorf("groups %d, dropped for format %d, format rollouts %d, failed %d; want 0, 2, 6, 0",
			len(groups), sum.Dropped[DropFormat], sum.RolloutsFormat, sum.RolloutsFailed)
	}
	for _, a := range arts {
		if !strings.HasPrefix(a.Failure, "plan ") || a.Score == nil || a.Score.Fixed != FixedFormat {
			t.Errorf("artifact %s: failure %q, score %+v; want a plan failure fixed as format", a.ID, a.Failure, a.Score)
		}
	}
}

func TestRunRefusesShortenedFile(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t)
	if _, err := Run(context.Background(), config(dir, 1, 2), tasks(1), f.baseline, Same(f.policy), f.scorer, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ArtifactsFile)
	lines := readLines(t, path)
	if err := os.WriteFile(path, append(lines[0], '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), config(dir, 1, 2), tasks(1), f.baseline, Same(f.policy), f.scorer, nil)
	if err == nil || !strings.Contains(err.Error(), "committed records were lost") || !strings.Contains(err.Error(), ArtifactsFile) {
		t.Errorf("got %v, want an error naming %s and the lost records", err, ArtifactsFile)
	}
}
