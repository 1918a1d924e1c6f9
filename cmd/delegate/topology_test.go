package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/trajectory/atropos"
	"github.com/delegatelab/delegate/world"
)

// startAPI runs `delegate api` (embedded NATS, a temporary store) until the
// test ends and returns its URL.
func startAPI(t *testing.T) string {
	t.Helper()
	return startAPIAt(t, t.TempDir())
}

// saveSmallModel writes a random small model (context 512) of the tokenizer's
// vocabulary at dir.
func saveSmallModel(t *testing.T, dir string) {
	t.Helper()
	p, err := nn.Alloc(nn.Config{Vocab: tokenizer.VocabSize, Dim: 32, Layers: 1, Heads: 2, KVHeads: 2, Hidden: 48, Context: 512}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	p.Init(1)
	if err := nn.Save(dir, p, nil); err != nil {
		t.Fatal(err)
	}
}

// readGroupIDs returns the ids of the groups in a groups.jsonl.
func readGroupIDs(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var g rollout.GroupRecord
		if err := json.Unmarshal([]byte(line), &g); err != nil {
			t.Fatal(err)
		}
		ids[g.ID] = true
	}
	return ids
}

// TestProcessPushesToTheTrajectoryAPI runs process --push with a local
// model against delegate's own API while a trainer client pulls. Every
// written group arrives once, in Atropos's schema, with its identity and
// policy version. It is process's group: the same sequences, advantages
// and roles (sameAsProcess). A second run of the same command pushes
// nothing again.
func TestProcessPushesToTheTrajectoryAPI(t *testing.T) {
	url := startAPI(t)
	dir := t.TempDir()
	saveSmallModel(t, filepath.Join(dir, "tiny"))
	doc := "models:\n  tiny:\n    kind: local\n    checkpoint: " + filepath.Join(dir, "tiny") +
		"\n    price: {input: 1, output: 1}\nroles:\n  default: tiny\nstrategy:\n  single: {temperature: 1, max_tokens: 6}\n"
	cfg := filepath.Join(dir, "delegate.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	trainer := atropos.DefaultTrainerClient()
	trainer.URL, trainer.Poll = url, 50*time.Millisecond
	// One group of G=2 sequences per batch.
	if err := trainer.Register(ctx, atropos.Registration{BatchSize: 2, MaxTokenLen: 512, NumSteps: 10}); err != nil {
		t.Fatal(err)
	}
	batches := make(chan atropos.Batch, 8)
	go func() {
		for {
			b, err := trainer.Next(ctx)
			if err != nil {
				return
			}
			batches <- b
		}
	}()

	out := filepath.Join(dir, "run")
	args := []string{"process", "--config", cfg, "--dataset", "gsm8k", "--data", "../../dataset/testdata/gsm8k/test.jsonl",
		"-n", "4", "-g", "2", "--strategy", "single", "--keep-ties", "--out", out, "--progress", "none", "--push", url}
	got, err := execute(t, testEnv, args...)
	if err != nil {
		t.Fatalf("process --push: %v\n%s", err, got)
	}
	written := readGroupIDs(t, filepath.Join(out, "groups.jsonl"))
	if len(written) == 0 {
		t.Fatalf("process wrote no group:\n%s", got)
	}
	records := readGroupRecords(t, filepath.Join(out, "groups.jsonl"))
	seen := map[string]int{}
	for len(seen) < len(written) {
		var b atropos.Batch
		select {
		case b = <-batches:
		case <-ctx.Done():
			t.Fatalf("the trainer got %d groups, want the %d written:\n%s", len(seen), len(written), got)
		}
		for _, g := range b.Batch {
			id, _ := g.GroupOverrides["group_id"].(string)
			seen[id]++
			if len(g.Tokens) != 2 || len(g.Masks) != 2 || len(g.Scores) != 2 || len(g.InferenceLogprobs) != 2 || len(g.Advantages) != 2 {
				t.Fatalf("group %s: %d tokens, %d masks, %d scores, %d logprobs, %d advantages; want 2 of each",
					id, len(g.Tokens), len(g.Masks), len(g.Scores), len(g.InferenceLogprobs), len(g.Advantages))
			}
			for i := range g.Tokens {
				trained := 0
				for j, m := range g.Masks[i] {
					switch {
					case m == delegate.MaskIgnore:
						if g.InferenceLogprobs[i][j] != 1 {
							t.Errorf("group %s sequence %d: logprob %v at an untrained position, want 1.0", id, i, g.InferenceLogprobs[i][j])
						}
					case m != g.Tokens[i][j]:
						t.Errorf("group %s sequence %d: mask %d at a token %d", id, i, m, g.Tokens[i][j])
					default:
						trained++
					}
				}
				if trained == 0 || len(g.Advantages[i]) != len(g.Tokens[i]) {
					t.Errorf("group %s sequence %d: %d trained tokens, %d advantages for %d tokens", id, i, trained, len(g.Advantages[i]), len(g.Tokens[i]))
				}
			}
			if _, ok := g.GroupOverrides["policy_version"]; !ok {
				t.Errorf("group %s has no policy_version", id)
			}
			_, gid, _ := strings.Cut(id, "/")
			rec := records[gid]
			if rec == nil {
				t.Fatalf("group %s: not one process wrote", id)
			}
			sameAsProcess(t, id, g, rec)
		}
	}
	for id, n := range seen {
		run, gid, _ := strings.Cut(id, "/")
		if n != 1 || run == "" || !written[gid] {
			t.Errorf("group %q delivered %d times; want once, as <run>/<a written group's id>", id, n)
		}
	}

	// The same command again: the run is complete and every group was
	// sent, so nothing more reaches the API.
	if got, err := execute(t, testEnv, args...); err != nil {
		t.Fatalf("process --push again: %v\n%s", err, got)
	}
	st, err := trainer.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.QueueSize != 0 {
		t.Errorf("after the second run the API queues %d groups, want 0", st.QueueSize)
	}
}

// readGroupRecords reads a groups.jsonl, by group id.
func readGroupRecords(t *testing.T, path string) map[string]*rollout.GroupRecord {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := map[string]*rollout.GroupRecord{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		rec, err := rollout.DecodeGroup([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		recs[rec.ID] = rec
	}
	return recs
}

// sameAsProcess checks that the API's group g is process's rec. It checks
// each sequence's tokens and its advantage at every token. Each rollout's
// sequences must be its episode's samples, with the same roles, trained
// and frozen.
func sameAsProcess(t *testing.T, id string, g atropos.ScoredData, rec *rollout.GroupRecord) {
	t.Helper()
	if len(g.Tokens) != len(rec.Tokens) {
		t.Fatalf("group %s: %d sequences from the API, %d in process", id, len(g.Tokens), len(rec.Tokens))
	}
	for i := range g.Tokens {
		if !slices.Equal(g.Tokens[i], rec.Tokens[i]) {
			t.Errorf("group %s sequence %d: tokens differ from process's", id, i)
		}
		for j, a := range g.Advantages[i] {
			if a != rec.Advantages[i] {
				t.Errorf("group %s sequence %d token %d: advantage %v, process's %v", id, i, j, a, rec.Advantages[i])
				break
			}
		}
	}
	for k, e := range rec.Episodes {
		n := 0
		for _, r := range rec.SequenceRollout {
			if r == rec.Rollouts[k].Index {
				n++
			}
		}
		if n != len(e.Samples) {
			t.Errorf("group %s rollout %d: %d sequences, %d samples in its episode", id, k, n, len(e.Samples))
		}
	}
	raw, err := json.Marshal(g.GroupOverrides["roles"])
	if err != nil {
		t.Fatal(err)
	}
	roles, err := atropos.GroupRoles(raw)
	if err != nil || len(roles) == 0 || !reflect.DeepEqual(roles, rec.GroupOverrides.Roles) {
		t.Errorf("group %s: roles from the API %+v (%v), process's %+v", id, roles, err, rec.GroupOverrides.Roles)
	}
}

// TestTrainFromTheTrajectoryAPI runs the loop's three parts in one process.
// They are the trajectory API, a trainer pulling its batches (train --api),
// and an environment pushing the shipped models' route rollouts on world
// problems (process --push). The trainer trains two steps on the pushed
// groups, checkpoints each, and its first step checks that the environment's
// logprobs are the trainer's own at the same weights.
func TestTrainFromTheTrajectoryAPI(t *testing.T) {
	endToEnd(t)
	url := startAPI(t)
	dir := t.TempDir()
	models, err := filepath.Abs("../../models")
	if err != nil {
		t.Fatal(err)
	}
	doc := `preset: world
models:
  delegator: {kind: local, checkpoint: ` + filepath.Join(models, "router") + `, price: {input: 1, cached_input: 0.1, output: 5}}
  solver: {kind: local, checkpoint: ` + filepath.Join(models, "solver") + `, price: {input: 0.2, cached_input: 0.02, output: 1}}
roles: {default: delegator, subagent: solver, weak: solver}
strategy:
  single: {temperature: 0}
  strong: {temperature: 1}
`
	cfg := filepath.Join(dir, "world.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	problems, err := world.Generate(world.Levels()[world.DefaultLevel], 5, world.Train, 6)
	if err != nil {
		t.Fatal(err)
	}
	var data strings.Builder
	for _, p := range problems {
		line, _ := json.Marshal(map[string]string{"question": p.Text, "answer": fmt.Sprintf("#### %d", p.Answer)})
		data.Write(append(line, '\n'))
	}
	dataPath := filepath.Join(dir, "world.jsonl")
	if err := os.WriteFile(dataPath, []byte(data.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	trainOut := filepath.Join(dir, "train")
	trained := make(chan error, 1)
	var trainLog string
	go func() {
		var err error
		trainLog, err = execute(t, testEnv, "train", "--api", url, "--steps", "2", "--items", "2", "--group", "2", "--out", trainOut)
		trained <- err
	}()
	got, err := execute(t, testEnv, "process", "--config", cfg, "--dataset", "gsm8k", "--data", dataPath, "-n", "6", "-g", "2",
		"--strategy", "route", "--keep-ties", "--out", filepath.Join(dir, "rollouts"), "--progress", "none", "--push", url)
	if err != nil {
		t.Fatalf("process --push: %v\n%s", err, got)
	}
	select {
	case err := <-trained:
		if err != nil {
			t.Fatalf("train --api: %v\n%s", err, trainLog)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("train --api did not finish two steps; process said:\n%s", got)
	}
	ms := readMetrics(t, filepath.Join(trainOut, "metrics.jsonl"))
	if len(ms) != 2 || ms[0].Rollouts != 4 || ms[1].Rollouts != 4 || ms[0].TrainedTokens+ms[1].TrainedTokens == 0 {
		t.Fatalf("metrics %+v, want 2 steps of 4 sequences that trained tokens\n%s", ms, trainLog)
	}
	if _, _, err := nn.Load(filepath.Join(rl.CheckpointDir(trainOut), "policy")); err != nil {
		t.Errorf("no policy checkpoint after the run: %v", err)
	}
	// Route's weak role, the solver, is frozen. Its calls are spent but
	// never pushed; the sequences are the strong role's samples.
	var solverCalls int
	for id, rec := range readGroupRecords(t, filepath.Join(dir, "rollouts", "groups.jsonl")) {
		for _, r := range rec.GroupOverrides.Roles {
			if r.Role == strategy.RoleWeak && r.Trained {
				t.Errorf("group %s: the solver's role is trained", id)
			}
		}
		var samples int
		for _, e := range rec.Episodes {
			for _, sm := range e.Samples {
				samples++
				if sm.Role != strategy.RoleStrong {
					t.Errorf("group %s: a sample of frozen role %s", id, sm.Role)
				}
			}
			for _, c := range e.Calls {
				if c.Role == strategy.RoleWeak {
					solverCalls++
				}
			}
		}
		if samples != len(rec.Tokens) {
			t.Errorf("group %s: %d sequences pushed, %d samples of the trained role", id, len(rec.Tokens), samples)
		}
	}
	if solverCalls == 0 {
		t.Error("no rollout called the solver: the frozen role was never tested")
	}
	t.Logf("train --api:\n%s", trainLog)
}

func readMetrics(t *testing.T, path string) []rl.Metrics {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []rl.Metrics
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m rl.Metrics
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestTopologyOnAClusterLosingANode runs the API on a three-node JetStream
// cluster of embedded servers on loopback, all replicated three times. An
// environment pushes and a trainer pulls. One node stops after the
// trainer's first step. The environment and the trainer go on,
// and every group the environment wrote is trained on.
func TestTopologyOnAClusterLosingANode(t *testing.T) {
	endToEnd(t)
	if testing.Short() {
		t.Skip("cluster test in -short mode")
	}
	dir := t.TempDir()
	var urls, routes, clientAddrs, clusterAddrs []string
	for range 3 {
		ca, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		ra, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		clientAddrs, clusterAddrs = append(clientAddrs, ca), append(clusterAddrs, ra)
		urls, routes = append(urls, "nats://"+ca), append(routes, "nats-route://"+ra)
	}
	var nodes []*atropos.Embedded
	for i := range 3 {
		ec := atropos.DefaultEmbeddedConfig()
		ec.Dir, ec.Name, ec.Listen = filepath.Join(dir, fmt.Sprint("n", i)), fmt.Sprint("n", i), clientAddrs[i]
		ec.ClusterName, ec.ClusterListen, ec.Routes = "delegate-test", clusterAddrs[i], routes
		e, err := atropos.StartEmbedded(ec)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, e)
	}
	var stopped atomic.Bool
	defer func() {
		for i, e := range nodes {
			if i != 0 || !stopped.Load() {
				e.Shutdown()
			}
		}
	}()

	var apiOut syncBuffer
	cmd := newRootCmd(func(string) string { return "" }, slog.New(slog.DiscardHandler))
	cmd.SetOut(&apiOut)
	cmd.SetArgs([]string{"api", "--addr", "127.0.0.1:0", "--nats", strings.Join(urls, ","), "--replicas", "3"})
	ctx, cancel := context.WithCancel(context.Background())
	apiDone := make(chan error, 1)
	go func() { apiDone <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-apiDone; err != nil {
			t.Errorf("api: %v", err)
		}
	}()
	re := regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
	var url string
	for deadline := time.Now().Add(60 * time.Second); url == ""; time.Sleep(20 * time.Millisecond) {
		url = re.FindString(apiOut.String())
		if time.Now().After(deadline) {
			t.Fatalf("the api on the cluster did not start: %q", apiOut.String())
		}
	}

	trainOut := filepath.Join(dir, "trainer")
	trained := make(chan error, 1)
	var trainLog string
	go func() {
		var err error
		trainLog, err = execute(t, testEnv, "train", "--api", url, "--steps", "4", "--items", "2", "--group", "2", "--out", trainOut)
		trained <- err
	}()
	// One node stops once the trainer has finished its first step.
	go func() {
		for {
			if b, err := os.ReadFile(filepath.Join(trainOut, "metrics.jsonl")); err == nil && len(b) > 0 {
				nodes[0].Shutdown()
				stopped.Store(true)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	// Greedy: at temperature 1 the router sometimes writes a malformed
	// call, the rollout splits, and its group has an odd size that no
	// exact batch of 4 sequences fits.
	got, err := execute(t, testEnv, "process", "--config", "../../examples/world.yaml", "--dataset", "world", "-n", "8", "-g", "2",
		"--strategy", "route", "--temperature", "0", "--keep-ties", "--out", filepath.Join(dir, "env"), "--progress", "none", "--push", url)
	if err != nil {
		t.Fatalf("process --push: %v\n%s", err, got)
	}
	if !strings.Contains(got, "groups 8: written 8") {
		t.Fatalf("the environment did not write its 8 groups:\n%s", got)
	}
	select {
	case err := <-trained:
		if err != nil {
			t.Fatalf("train --api: %v\n%s", err, trainLog)
		}
	case <-time.After(2 * time.Minute):
		steps, _ := os.ReadFile(filepath.Join(trainOut, "metrics.jsonl"))
		t.Fatalf("the trainer did not finish its 4 steps (8 groups): %d steps logged, node stopped %v; the api said:\n%s",
			bytes.Count(steps, []byte("\n")), stopped.Load(), apiOut.String())
	}
	if !stopped.Load() {
		t.Error("no node was stopped during the run")
	}
	if ms := readMetrics(t, filepath.Join(trainOut, "metrics.jsonl")); len(ms) != 4 || ms[3].Groups != 2 {
		t.Errorf("trainer metrics %+v, want 4 steps of 2 groups", ms)
	}
}
