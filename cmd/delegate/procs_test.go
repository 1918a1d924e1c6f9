package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/delegatelab/delegate/models"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/store"
	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/trajectory/atropos"
	"github.com/delegatelab/delegate/world"
)

// topologyRun is a test's `delegate train --processes` child process. It
// holds its output as it comes, and its children's pids by name.
type topologyRun struct {
	cmd  *exec.Cmd
	done chan error // the exit, once

	mu    sync.Mutex
	out   strings.Builder
	pids  map[string]int
	lines chan string // every line, for the test's triggers; dropped when full
}

var startedRE = regexp.MustCompile(`^\[supervisor\] (.+) started \(pid (\d+)\)`)

// startTopology runs the delegate command that testscript.Main put on
// PATH: the test binary named delegate. os.Executable in it is that copy,
// so its children run delegate's main too.
func startTopology(t *testing.T, args ...string) *topologyRun {
	t.Helper()
	exe, err := exec.LookPath("delegate")
	if err != nil {
		t.Fatalf("no delegate command on PATH (TestMain puts it there): %v", err)
	}
	cmd := exec.Command(exe, append([]string{"train", "--processes"}, args...)...)
	cmd.Dir = t.TempDir()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &topologyRun{cmd: cmd, done: make(chan error, 1), pids: map[string]int{}, lines: make(chan string, 4096)}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			r.mu.Lock()
			r.out.WriteString(line + "\n")
			if m := startedRE.FindStringSubmatch(line); m != nil {
				r.pids[m[1]], _ = strconv.Atoi(m[2])
			}
			r.mu.Unlock()
			select {
			case r.lines <- line:
			default:
			}
		}
		close(r.lines)
	}()
	go func() {
		err := cmd.Wait()
		pw.Close()
		r.done <- err
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // gone already when the test went well
	})
	return r
}

// wait waits up to 3 minutes for the command to end. Unless it succeeded,
// it fails the test with its output.
func (r *topologyRun) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("train --processes: %v\n%s", err, r.output())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("train --processes did not finish:\n%s", r.output())
	}
}

func (r *topologyRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

func (r *topologyRun) pid(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pids[name]
}

// alive reports whether pid is a running process (a zombie is not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the command's closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitGone fails t unless every pid ends within d.
func waitGone(t *testing.T, pids map[string]int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for name, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("%s (pid %d) is still running: an orphan", name, pid)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// topologyArgs is a short loop: 2 environments, steps of 2 groups of 2,
// a small table.
func topologyArgs(out string, steps int) []string {
	return []string{"2", "--steps", strconv.Itoa(steps), "--items", "2", "--group", "2", "--eval-items", "4", "--rule-items", "2", "-q", "--out", out}
}

// TestTrainProcessesSurvivesKills runs `delegate train --processes 2`. It
// SIGKILLs each kind of child once, at a random moment after a given trainer
// step: the API, the policy server, an environment, the trainer. The
// supervisor restarts each; the run takes all its steps and prints the table.
// Afterwards the API's own record of the batch of every step (GET
// /batch?step=N on the same store) shows each group handed to the trainer at
// most once, every one a group an environment wrote, and every group an
// environment recorded as pushed either trained or still queued; the
// trainer's metrics have each step once, and the restarted trainer went on
// from its checkpoint.
func TestTrainProcessesSurvivesKills(t *testing.T) {
	endToEnd(t)
	const steps = 8
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("kill delays drawn with seed %d", seed)
	out := t.TempDir()
	r := startTopology(t, topologyArgs(out, steps)...)

	// After trainer step k, kill kills[k] after a random delay.
	kills := map[int]string{1: "api", 2: "serve", 3: "env 1", 4: "trainer"}
	stepRE := regexp.MustCompile(`^\[trainer\] step (\d+)/`)
	killed := map[string]bool{}
	lastBeforeKill, firstAfterKill := 0, 0
	trainerKilled := false
	var killWG sync.WaitGroup
	var killMu sync.Mutex
	for line := range r.lines {
		m := stepRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		k, _ := strconv.Atoi(m[1])
		killMu.Lock()
		if trainerKilled && firstAfterKill == 0 {
			firstAfterKill = k
		}
		if !trainerKilled {
			lastBeforeKill = k
		}
		killMu.Unlock()
		name, ok := kills[k]
		if !ok || killed[name] {
			continue
		}
		killed[name] = true
		delay := time.Duration(rng.IntN(250)) * time.Millisecond
		pid := r.pid(name)
		killWG.Go(func() {
			time.Sleep(delay)
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Errorf("kill -9 %s (pid %d): %v", name, pid, err)
			}
			if name == "trainer" {
				killMu.Lock()
				trainerKilled = true
				killMu.Unlock()
			}
			t.Logf("killed %s (pid %d) %s after trainer step %d", name, pid, delay, k)
		})
	}
	killWG.Wait()
	r.wait(t)
	got := r.output()
	for _, name := range []string{"api", "serve", "env 1", "trainer"} {
		if !strings.Contains(got, "[supervisor] "+name+" died unexpectedly") {
			t.Errorf("no restart of %s:\n%s", name, got)
		}
	}
	if !strings.Contains(got, fmt.Sprintf("| RL-trained delegator (step %d) |", steps)) {
		t.Errorf("no table row of the trained delegator at step %d:\n%s", steps, got)
	}

	// The trainer's metrics: each step once, in order.
	ms := readMetrics(t, filepath.Join(out, procsTrainerDir, "metrics.jsonl"))
	if len(ms) != steps {
		t.Fatalf("%d metrics lines, want %d", len(ms), steps)
	}
	for i, m := range ms {
		if m.Step != i+1 || m.Groups != 2 {
			t.Errorf("metrics line %d: step %d with %d groups, want step %d with 2", i, m.Step, m.Groups, i+1)
		}
	}
	// Resumed from its checkpoint: the restarted trainer's first step is
	// the one after the last it checkpointed (the one it was on, when the
	// kill came between its metrics line and its checkpoint), not step 1.
	killMu.Lock()
	if firstAfterKill < 2 || firstAfterKill > lastBeforeKill+1 || firstAfterKill < lastBeforeKill {
		t.Errorf("the restarted trainer's first step is %d; the last before the kill was %d: it did not resume from its checkpoint", firstAfterKill, lastBeforeKill)
	}
	killMu.Unlock()

	checkDelivery(t, out, steps, 2)
}

// checkDelivery reads every step's batch back from the API's store. It
// checks them against what the environments wrote and pushed.
func checkDelivery(t *testing.T, out string, steps, groupsPerStep int) {
	t.Helper()
	url := startAPIAt(t, filepath.Join(out, procsAPIDir))
	batch := func(step int) []atropos.ScoredData {
		resp, err := http.Get(fmt.Sprintf("%s/batch?step=%d", url, step))
		if err != nil {
			t.Fatal(err)
		}
		var b atropos.Batch
		err = json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("batch of step %d: status %d, %v", step, resp.StatusCode, err)
		}
		return b.Batch
	}
	delivered := map[string]int{}
	for step := 1; step <= steps; step++ {
		b := batch(step)
		if len(b) != groupsPerStep {
			t.Errorf("batch of step %d has %d groups, want %d", step, len(b), groupsPerStep)
		}
		for _, g := range b {
			id, _ := g.GroupOverrides["group_id"].(string)
			delivered[id]++
		}
	}
	// What the API holds for later steps: batches it assembled ahead of
	// the trainer (taken now), then the groups still queued.
	later := map[string]bool{}
	for step := steps + 1; ; step++ {
		b := batch(step)
		if len(b) == 0 {
			break
		}
		for _, g := range b {
			id, _ := g.GroupOverrides["group_id"].(string)
			later[id] = true
		}
	}
	written, pushed := map[string]bool{}, map[string]bool{}
	for i := 1; i <= 2; i++ {
		dir := filepath.Join(out, procsEnvDir(i))
		db, err := store.Open(context.Background(), filepath.Join(dir, rollout.StateFile))
		if err != nil {
			t.Fatal(err)
		}
		sent, err := db.Sent(context.Background())
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "groups.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var g rollout.GroupRecord
			if err := json.Unmarshal([]byte(line), &g); err != nil {
				t.Fatalf("%s groups.jsonl: %v", dir, err)
			}
			id := g.Run + "/" + g.ID
			written[id] = true
			if sent[[2]int{g.Item, g.Group}] {
				pushed[id] = true
			}
		}
	}
	for id, n := range delivered {
		if n != 1 || !written[id] {
			t.Errorf("group %q handed to the trainer %d times (written by an environment: %v); want once, and written", id, n, written[id])
		}
	}
	status := atropos.DefaultTrainerClient()
	status.URL = url
	st, err := status.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	notTrained := 0
	for id := range pushed {
		if delivered[id] == 0 && !later[id] {
			notTrained++
		}
	}
	if notTrained > st.QueueSize {
		t.Errorf("%d groups the environments pushed are neither trained on nor in a later batch, but the API queues only %d: groups lost", notTrained, st.QueueSize)
	}
	t.Logf("%d groups written, %d pushed, %d trained on, %d in later batches, %d queued", len(written), len(pushed), len(delivered), len(later), st.QueueSize)
}

// startAPIAt runs `delegate api` in this process on the store dir until
// the test ends and returns its URL.
func startAPIAt(t *testing.T, dir string) string {
	t.Helper()
	var out syncBuffer
	cmd := newRootCmd(func(string) string { return "" }, slog.New(slog.DiscardHandler))
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"api", "--addr", "127.0.0.1:0", "--data", dir})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("api: %v", err)
		}
	})
	re := regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
	for deadline := time.Now().Add(30 * time.Second); re.FindString(out.String()) == ""; {
		if time.Now().After(deadline) {
			t.Fatalf("the api printed no address: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return re.FindString(out.String())
}

// TestTrainProcessesLeavesNoOrphan stops `delegate train --processes`
// while its children run. SIGINT, as Ctrl-C, makes it stop them and say
// how to resume. Under SIGKILL it cannot, so the kernel kills them
// (Pdeathsig). No child outlives it either way.
func TestTrainProcessesLeavesNoOrphan(t *testing.T) {
	endToEnd(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			r := startTopology(t, topologyArgs(t.TempDir(), 50)...)
			// Every child up, and the trainer training.
			for line := range r.lines {
				if strings.HasPrefix(line, "[trainer] step 1/") {
					break
				}
			}
			pids := map[string]int{}
			for _, name := range []string{"api", "serve", "trainer", "env 1", "env 2"} {
				if pids[name] = r.pid(name); pids[name] == 0 {
					t.Fatalf("%s never started:\n%s", name, r.output())
				}
			}
			if err := r.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			go func() {
				for range r.lines {
				}
			}()
			var err error
			select {
			case err = <-r.done:
			case <-time.After(time.Minute):
				t.Fatalf("train --processes did not end on %s:\n%s", sig, r.output())
			}
			if err == nil {
				t.Errorf("train --processes stopped by %s exited 0", sig)
			}
			waitGone(t, pids, 15*time.Second)
			if sig == syscall.SIGINT && !strings.Contains(r.output(), "run the same command again to resume") {
				t.Errorf("interrupted, it did not say how to resume:\n%s", r.output())
			}
		})
	}
}

// TestSupervisorGivesUp runs a child that always fails. The supervisor
// restarts it maxRestarts times with growing backoff. Then it returns an
// error naming it and its last exit; every line of the child comes out
// behind its prefix. A child that finishes is not restarted.
func TestSupervisorGivesUp(t *testing.T) {
	exe, err := exec.LookPath("delegate")
	if err != nil {
		t.Fatalf("no delegate command on PATH (TestMain puts it there): %v", err)
	}
	var out syncBuffer
	s := &supervisor{exe: exe, out: &out, grace: time.Second, maxRestarts: 2, backoff: 10 * time.Millisecond, maxBackoff: 20 * time.Millisecond}
	err = s.run(context.Background(), child{name: "bad", args: []string{"train", "--no-such-flag"}, finishes: true})
	if err == nil || !strings.Contains(err.Error(), "bad: exit status 1, after 2 restarts") {
		t.Errorf("err %v, want the child named, its exit status and 2 restarts", err)
	}
	got := out.String()
	if n := strings.Count(got, "[supervisor] bad started"); n != 3 {
		t.Errorf("started %d times, want 3 (once and 2 restarts):\n%s", n, got)
	}
	for _, want := range []string{"[bad] delegate: unknown flag: --no-such-flag", "restart 1 of 2 in 10ms", "restart 2 of 2 in 20ms"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}

	var done syncBuffer
	s.out = &done
	if err := s.run(context.Background(), child{name: "ok", args: []string{"--help"}, finishes: true}); err != nil {
		t.Errorf("a child that finishes: %v", err)
	}
	if got := done.String(); strings.Count(got, "started") != 1 || !strings.Contains(got, "[supervisor] ok finished") {
		t.Errorf("a child that finishes: output\n%s\nwant one start and finished", got)
	}
}

// TestTrainProcessesFlags checks the command lines train --processes
// refuses before it starts anything.
func TestTrainProcessesFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"too many", []string{"--processes", "65"}, "want 1 to 64 environments"},
		{"negative", []string{"--processes", "-1"}, "want 1 to 64 environments"},
		{"api", []string{"--processes", "2", "--api", "http://127.0.0.1:1"}, "--api does not apply"},
		{"batch items without an api", []string{"--batch-items"}, "--batch-items goes with --api"},
		{"mu", []string{"--processes", "2", "--mu", "0.1"}, "--mu does not apply"},
		{"mlpo", []string{"--processes", "2", "--mode", "mlpo"}, "--mode does not apply"},
		{"offpolicy alone", []string{"--offpolicy", "1"}, "--offpolicy goes with --processes"},
		{"otlp from an api", []string{"--api", "http://127.0.0.1:1", "--otlp", "http://127.0.0.1:4318"}, "a trainer from a trajectory API (--api) makes none"},
		{"offpolicy negative", []string{"--processes", "2", "--offpolicy", "-1"}, "--offpolicy -1"},
		{"on-policy, more environments than items", []string{"--processes", "3", "--items", "2"}, "want at most 2 environments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := execute(t, testEnv, append([]string{"train", "--out", t.TempDir()}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want one containing %q\n%s", err, tt.want, out)
			}
		})
	}
}

// TestTrainProcessesTrainsOnTheInProcessGroups runs one short training in
// process and as `train --processes 2`, with real child processes.
// On-policy, the environments draw the in-process run's items: its
// training pool and item order, each environment its part of every step.
// They seed each rollout as it does, so the trainer gets the same groups
// step for step. That means the same rewards and policy tokens at every
// step, the same gradient, and the same trained policy in the table.
func TestTrainProcessesTrainsOnTheInProcessGroups(t *testing.T) {
	endToEnd(t)
	const steps = 2 // the second samples the weights the first step trained
	args := []string{"--steps", strconv.Itoa(steps), "--items", "2", "--group", "4", "--eval-items", "2", "--rule-items", "1", "--seed", "3", "-q"}
	inDir, procsDir := trainBothWays(t, args)
	in := readMetrics(t, filepath.Join(inDir, rl.MetricsFile))
	procs := readMetrics(t, filepath.Join(procsDir, procsTrainerDir, rl.MetricsFile))
	sameSteps(t, "delegator", in, procs, steps, true)
	if in[0].Accuracy == 0 && in[0].DelegationRate == 0 && in[1].Accuracy == 0 && in[1].DelegationRate == 0 {
		t.Error("accuracy and delegation rate 0 at every step in process: the comparison says nothing")
	}
	sameTrainedRows(t, inDir, procsDir, 1)
}

// TestTrainProcessesTrainsBothRoles runs `train --processes 2 --train
// both --credit role` for 2 steps, and the same run in process. The
// policy server serves each role from its own trainer's checkpoint, the
// environments sample both, and the trainer's batches are a step's items.
// The run exits 0, both checkpoints moved from the shipped models, and
// the solver's trainer trained solver answers at every step.
//
// Each role's trainer gets the in-process run's samples step for step.
// The delegator's are its groups: the same rewards, policy tokens and
// gradient norms. The solver's samples are grouped otherwise. In process
// its group holds every rollout of the item, its answers in it; over the
// API each answer is a sequence, and a rollout without one is not there.
// So its rewards' mean and tied groups differ. Dr. GRPO weighs every
// token alike whatever holds it, so its policy tokens and gradient norms
// are the in-process ones, and step 2 samples the same weights. The
// table's three trained rows are then the same but for latency.
func TestTrainProcessesTrainsBothRoles(t *testing.T) {
	endToEnd(t)
	const steps = 2
	args := []string{"--train", "both", "--credit", "role", "--estimator", "drgrpo", "--steps", strconv.Itoa(steps), "--items", "2", "--group", "4",
		"--eval-items", "2", "--rule-items", "1", "--seed", "3", "-q"}
	inDir, procsDir := trainBothWays(t, args)
	trainerDir := filepath.Join(procsDir, procsTrainerDir)
	for _, role := range []struct{ name, sub, shipped string }{
		{"delegator", "", train.RouterModel},
		{"solver", train.SolverDir, "solver"},
	} {
		in := readMetrics(t, filepath.Join(inDir, role.sub, rl.MetricsFile))
		procs := readMetrics(t, filepath.Join(trainerDir, role.sub, rl.MetricsFile))
		if role.sub == "" {
			sameSteps(t, role.name, in, procs, steps, true)
		} else {
			sameSolverSteps(t, in, procs, steps)
		}
		for _, m := range procs {
			if m.Rollouts == 0 || m.PolicyTokens == 0 {
				t.Errorf("%s, step %d: %d sequences, %d policy tokens trained, want some", role.name, m.Step, m.Rollouts, m.PolicyTokens)
			}
		}
		start, _, err := models.Load(role.shipped)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(policyParams(t, filepath.Join(trainerDir, role.sub)).Data, start.Data) {
			t.Errorf("%s: the trainer's checkpoint is the shipped model's: not trained", role.name)
		}
	}
	sameTrainedRows(t, inDir, procsDir, 3)
}

// TestTrainProcessesTrainsTheSolver runs `train --processes 2 --train
// solver --credit role` for 2 steps, and the same run in process. The
// environments send the solver's answers alone; an item whose greedy
// delegator never calls the solver gives an empty group, which the API
// takes as one of the step's items and the trainer trains nothing on.
// Every step has both its items, one of them empty at least once. The
// run exits 0, the solver's checkpoint moved from the shipped model, and
// no delegator checkpoint is written: the policy server's delegator is
// the starting one throughout.
//
// The solver's trainer gets the in-process run's samples step for step,
// grouped otherwise, as in TestTrainProcessesTrainsBothRoles: its policy
// tokens and gradient norms are the in-process ones. The reward's mean
// differs: over the API it is over the solver's answers alone, in process
// over every rollout of the items. The table's trained rows are the same
// but for latency.
func TestTrainProcessesTrainsTheSolver(t *testing.T) {
	endToEnd(t)
	const steps = 2
	// MLPO's shipped delegator, greedy under route, calls the solver on
	// one item of step 1 and not on the other (seed 4); step 2 trains.
	// Absolute: the topology's children run elsewhere.
	delegator, err := filepath.Abs(filepath.Join(repoRoot, "models", "delegator"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--train", "solver", "--credit", "role", "--estimator", "drgrpo", "--steps", strconv.Itoa(steps), "--items", "2", "--group", "4",
		"--eval-items", "2", "--rule-items", "1", "--seed", "4", "--delegator", delegator, "-q"}
	inDir, procsDir := trainBothWays(t, args)
	trainerDir := filepath.Join(procsDir, procsTrainerDir)
	in := readMetrics(t, filepath.Join(inDir, train.SolverDir, rl.MetricsFile))
	procs := readMetrics(t, filepath.Join(trainerDir, train.SolverDir, rl.MetricsFile))
	sameSolverSteps(t, in, procs, steps)
	empty := 0
	for _, m := range procs {
		if m.Items != 2 || m.Groups != 2 || m.QuarantinedGroups != 0 {
			t.Errorf("step %d: %d items, %d groups, %d quarantined; want 2, 2, 0: every item of the step, none set aside", m.Step, m.Items, m.Groups, m.QuarantinedGroups)
		}
		empty += m.EmptyGroups
	}
	if empty == 0 {
		t.Error("no empty group at any step: the run never met an item without a solver call")
	}
	start, _, err := models.Load("solver")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(policyParams(t, filepath.Join(trainerDir, train.SolverDir)).Data, start.Data) {
		t.Error("the solver's checkpoint is the shipped model's: not trained")
	}
	if _, err := os.Stat(rl.CheckpointDir(trainerDir)); !os.IsNotExist(err) {
		t.Errorf("a delegator checkpoint in %s (%v): the delegator is not trained", trainerDir, err)
	}
	sameTrainedRows(t, inDir, procsDir, 1)
}

// sameSolverSteps fails t unless the solver's trainer with processes
// trained what the in-process one did, step for step: as many policy
// tokens and the same gradient norm, all on-policy.
func sameSolverSteps(t *testing.T, in, procs []rl.Metrics, steps int) {
	t.Helper()
	if len(in) != steps || len(procs) != steps {
		t.Fatalf("solver: %d steps in process, %d with processes; want %d each", len(in), len(procs), steps)
	}
	for i := range steps {
		a, b := in[i], procs[i]
		if a.PolicyTokens != b.PolicyTokens || math.Abs(a.GradNorm-b.GradNorm) > 1e-6*max(1, math.Abs(a.GradNorm)) {
			t.Errorf("solver, step %d: in process %d policy tokens, gradient norm %v; with processes %d, %v",
				a.Step, a.PolicyTokens, a.GradNorm, b.PolicyTokens, b.GradNorm)
		}
		if len(b.StalenessGroups) != 1 {
			t.Errorf("solver, step %d: groups by steps behind %v, want every group on-policy", b.Step, b.StalenessGroups)
		}
	}
}

// trainBothWays runs train with args in process, then as train
// --processes 2, and returns each run's --out.
func trainBothWays(t *testing.T, args []string) (inDir, procsDir string) {
	t.Helper()
	inDir = t.TempDir()
	if out, err := execute(t, testEnv, append([]string{"train", "--out", inDir, "--progress", "none"}, args...)...); err != nil {
		t.Fatalf("train in process: %v\n%s", err, out)
	}
	procsDir = t.TempDir()
	r := startTopology(t, append([]string{"2", "--out", procsDir}, args...)...)
	for range r.lines {
	}
	r.wait(t)
	return inDir, procsDir
}

// sameSteps fails t unless a trainer's metrics with processes are the
// in-process trainer's, step for step. With outcomes it compares what the
// rollouts were scored from too: accuracy, delegation and their means.
func sameSteps(t *testing.T, what string, in, procs []rl.Metrics, steps int, outcomes bool) {
	t.Helper()
	if len(in) != steps || len(procs) != steps {
		t.Fatalf("%s: %d steps in process, %d with processes; want %d each", what, len(in), len(procs), steps)
	}
	// The batch holds the groups in the order they were pushed: the sums
	// of the update may differ in their last bits.
	near := func(a, b, tol float64) bool { return math.Abs(a-b) <= tol*max(1, math.Abs(a)) }
	for i := range steps {
		a, b := in[i], procs[i]
		if a.Rollouts != b.Rollouts || a.PolicyTokens != b.PolicyTokens || a.DegenerateGroups != b.DegenerateGroups ||
			!near(a.Reward, b.Reward, 1e-9) || !near(a.RewardStd, b.RewardStd, 1e-9) || !near(a.GradNorm, b.GradNorm, 1e-6) {
			t.Errorf("%s, step %d: in process %d rollouts, %d policy tokens, %d tied groups, reward %v ± %v, gradient norm %v; with processes %d, %d, %d, %v ± %v, %v",
				what, a.Step, a.Rollouts, a.PolicyTokens, a.DegenerateGroups, a.Reward, a.RewardStd, a.GradNorm,
				b.Rollouts, b.PolicyTokens, b.DegenerateGroups, b.Reward, b.RewardStd, b.GradNorm)
		}
		if len(b.StalenessGroups) != 1 {
			t.Errorf("%s, step %d: groups by steps behind %v, want every group on-policy", what, b.Step, b.StalenessGroups)
		}
		if !outcomes {
			continue
		}
		// The environments say per sequence what its rollout was scored
		// from: the trainer's accuracy, delegation rate and their means
		// are the in-process run's.
		if !near(a.Accuracy, b.Accuracy, 1e-9) || !near(a.DelegationRate, b.DelegationRate, 1e-9) {
			t.Errorf("%s, step %d: accuracy %v, delegation rate %v in process; %v, %v with processes", what, a.Step, a.Accuracy, a.DelegationRate, b.Accuracy, b.DelegationRate)
		}
		for _, k := range []string{"subagent_calls", "delegator_tokens", "cost"} {
			if va, vb := a.Scalars[k], b.Scalars[k]; !near(va, vb, 1e-9) {
				t.Errorf("%s, step %d: %s %v in process, %v with processes", what, a.Step, k, va, vb)
			}
		}
	}
}

// sameTrainedRows fails t unless both runs' tables have the same n rows
// of trained policies, but for their latency.
func sameTrainedRows(t *testing.T, inDir, procsDir string, n int) {
	t.Helper()
	rows := func(dir string) []string {
		b, err := os.ReadFile(filepath.Join(dir, "table.md"))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		seen := map[string]bool{} // the table of costs under other prices comes after
		for _, line := range strings.Split(string(b), "\n") {
			cells := strings.Split(line, "|")
			if len(cells) < 4 || !strings.Contains(cells[1], "RL-trained") || !strings.Contains(cells[1], "(step ") || seen[cells[1]] {
				continue
			}
			seen[cells[1]] = true
			out = append(out, strings.Join(append(cells[:len(cells)-3:len(cells)-3], cells[len(cells)-2:]...), "|"))
		}
		if len(out) != n {
			t.Fatalf("%s: %d trained rows in the table, want %d:\n%s", dir, len(out), n, b)
		}
		return out
	}
	a, b := rows(inDir), rows(procsDir)
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("a trained policy's row (latency left out)\nin process:     %s\nwith processes: %s", a[i], b[i])
		}
	}
}

// TestTrainProcessesChildrenGetSecrets checks how the topology's children
// get secrets. The API's token and the policy server's key go in each
// child's environment, never on its command line, which ps shows. The
// environments' config names the key's variable.
func TestTrainProcessesChildrenGetSecrets(t *testing.T) {
	cfg := train.DefaultConfig()
	top := &topology{envs: 2, level: world.DefaultLevel, cfg: cfg}
	dir := t.TempDir()
	secrets := []string{apiTokenEnv + "=tok-123", serveKeyEnv + "=key-456"}
	for _, c := range top.children(dir, "127.0.0.1:1", "127.0.0.1:2", secrets) {
		if !slices.Equal(c.env, secrets) {
			t.Errorf("%s: env %q, want %q", c.name, c.env, secrets)
		}
		if args := strings.Join(c.args, " "); strings.Contains(args, "tok-123") || strings.Contains(args, "key-456") {
			t.Errorf("%s: a secret on the command line: %s", c.name, args)
		}
	}
	if err := top.writeConfigs(dir, "127.0.0.1:2"); err != nil {
		t.Fatal(err)
	}
	env, err := os.ReadFile(filepath.Join(dir, procsEnvFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(env), "api_key_env: "+serveKeyEnv); got != 2 {
		t.Errorf("environments' config names %s %d times, want 2 (delegator, solver):\n%s", serveKeyEnv, got, env)
	}
	// The environments sample as the trainer's config says.
	top.cfg.StrictToolCalls = true
	if err := top.writeConfigs(dir, "127.0.0.1:2"); err != nil {
		t.Fatal(err)
	}
	envCfg, err := LoadConfig(filepath.Join(dir, procsEnvFile))
	if err != nil {
		t.Fatal(err)
	}
	if !envCfg.Strategy.StrictToolCalls {
		t.Errorf("environments' config does not ask for strict tool calls")
	}
}

// train --processes --otlp hands the flag to the environments, which make
// the rollouts' calls, and to no other child.
func TestTrainProcessesPassOTLP(t *testing.T) {
	top := &topology{envs: 2, level: world.DefaultLevel, cfg: train.DefaultConfig(), otlp: "http://127.0.0.1:4318"}
	for _, c := range top.children(t.TempDir(), "127.0.0.1:1", "127.0.0.1:2", nil) {
		args := strings.Join(c.args, " ")
		got := strings.Contains(args, "--otlp http://127.0.0.1:4318")
		if want := strings.HasPrefix(c.name, "env "); got != want {
			t.Errorf("%s: --otlp passed %v, want %v: %s", c.name, got, want, args)
		}
	}
}

// TestTrainProcessesRoles checks what train --processes sets up for each
// trained role. A trained model of the policy server follows its own
// trainer's checkpoint and a frozen one follows none. The environments
// sample the solver with token ids, and send its answers, only when it is
// trained. The trainer gets --train and asks for batches of a step's
// items.
func TestTrainProcessesRoles(t *testing.T) {
	tests := []struct {
		train                    string
		followDelegator, follows bool // the solver follows
		roles                    string
	}{
		{train.TrainDelegator, true, false, ""},
		{train.TrainBoth, true, true, "--train-roles strong,weak"},
		{train.TrainSolver, false, true, "--train-roles weak"},
	}
	for _, tt := range tests {
		t.Run(tt.train, func(t *testing.T) {
			cmd := newTrainCmd(testEnv, slog.New(slog.DiscardHandler))
			if err := cmd.Flags().Parse([]string{"--processes", "2", "--train", tt.train}); err != nil {
				t.Fatal(err)
			}
			cfg := train.DefaultConfig()
			cfg.Train = tt.train
			top, err := newTopology(cmd.Flags(), cfg, 2, world.DefaultLevel, 0)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := top.writeConfigs(dir, "127.0.0.1:2"); err != nil {
				t.Fatal(err)
			}
			serve, err := LoadConfig(filepath.Join(dir, procsServeFile))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []struct {
				name, sub string
				want      bool
			}{{"delegator", "", tt.followDelegator}, {"solver", train.SolverDir, tt.follows}} {
				want := ""
				if m.want {
					want = rl.CheckpointDir(filepath.Join(dir, procsTrainerDir, m.sub))
				}
				if got := serve.Models[m.name].Follow; got != want {
					t.Errorf("policy server's %s follows %q, want %q", m.name, got, want)
				}
			}
			env, err := LoadConfig(filepath.Join(dir, procsEnvFile))
			if err != nil {
				t.Fatal(err)
			}
			if got := env.Models["solver"].TokenIDs; got != tt.follows {
				t.Errorf("environments ask the solver for token ids: %v, want %v", got, tt.follows)
			}
			for _, c := range top.children(dir, "127.0.0.1:1", "127.0.0.1:2", nil) {
				args := strings.Join(c.args, " ")
				switch {
				case c.name == "trainer":
					if !strings.Contains(args, "--batch-items") || !strings.Contains(args, "--train "+tt.train) {
						t.Errorf("trainer's command line %q lacks --batch-items or --train %s", args, tt.train)
					}
				case strings.HasPrefix(c.name, "env "):
					if got := strings.Contains(args, "--train-roles"); got != (tt.roles != "") || tt.roles != "" && !strings.Contains(args, tt.roles) {
						t.Errorf("%s's command line %q: want train roles %q", c.name, args, tt.roles)
					}
				}
			}
		})
	}
}
