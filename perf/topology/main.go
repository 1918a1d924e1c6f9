// Command topology measures `delegate train --processes N` against the in-process `delegate train`.
// Both make the same training run, side by side, and it prints PASS or MISS for reward and wall time.
// With -kill it also kills each kind of child once.
// README.md gives the method; docs/topology.md the figures.
//
//	go run ./perf/topology -steps 40 -processes 2
//	go run ./perf/topology -steps 60 -items 4 -group 8 -kill
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/delegatelab/delegate/internal/host"
)

// metrics is the part of a metrics.jsonl line (rl.Metrics) read here.
type metrics struct {
	Step            int     `json:"step"`
	Rollouts        int     `json:"rollouts"`
	Reward          float64 `json:"reward"`
	PolicyTokens    int     `json:"policy_tokens"`
	StalenessGroups []int   `json:"staleness_groups"`
	UnknownVersion  int     `json:"unknown_version_groups"`
	Groups          int     `json:"groups"`
	RolloutSeconds  float64 `json:"rollout_seconds"`
	UpdateSeconds   float64 `json:"update_seconds"`
}

// result is one run's figures.
type result struct {
	name    string
	wall    time.Duration // the whole command, table included
	train   time.Duration // from the start to the trainer's last step
	ms      []metrics
	envWait float64 // item-seconds the environments paused for the trainer
	trained float64 // the trained delegator's reward in the table
	lo, hi  float64 // its 95% interval
	table   string
	load    float64            // the load average when it started
	cpu     time.Duration      // user and system time of the command and every child it waited for
	cpus    map[string]float64 // CPU seconds of each child (summed over restarts), with processes
}

func main() {
	steps := flag.Int("steps", 40, "RL steps of each run")
	items := flag.Int("items", 2, "items per step")
	group := flag.Int("group", 4, "rollouts per item")
	procs := flag.Int("processes", 2, "environments of the multi-process run")
	evalItems := flag.Int("eval-items", 100, "held-out items of each table")
	ruleItems := flag.Int("rule-items", 20, "training items the fixed rules run on")
	seed := flag.Int("seed", 1, "seed of both runs")
	dir := flag.String("dir", "", "work directory (default: a temporary one, removed)")
	kill := flag.Bool("kill", false, "SIGKILL each kind of child of the multi-process run once, at random moments")
	flag.Parse()
	if err := run(*steps, *items, *group, *procs, *evalItems, *ruleItems, *seed, *dir, *kill); err != nil {
		fmt.Fprintln(os.Stderr, "topology:", err)
		os.Exit(1)
	}
}

func run(steps, items, group, procs, evalItems, ruleItems, seed int, dir string, kill bool) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "perf-topology")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	bin := filepath.Join(dir, "delegate")
	build := exec.Command("go", "build", "-o", bin, "./cmd/delegate")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	fmt.Printf("machine: %s, %d CPUs, %s\n", host.CPUModel(), runtime.NumCPU(), runtime.Version())
	common := []string{"--steps", strconv.Itoa(steps), "--items", strconv.Itoa(items), "--group", strconv.Itoa(group),
		"--eval-items", strconv.Itoa(evalItems), "--rule-items", strconv.Itoa(ruleItems), "--seed", strconv.Itoa(seed), "--time", "0", "-q"}
	fmt.Printf("run: delegate train %s (in process, then with --processes %d)\n\n", strings.Join(common, " "), procs)

	in, err := measure("in process", bin, filepath.Join(dir, "in"), "", common, nil)
	if err != nil {
		return err
	}
	var killer *killer
	if kill {
		killer = newKiller(uint64(seed))
	}
	multi, err := measure(fmt.Sprintf("%d processes", procs), bin, filepath.Join(dir, "procs"), "trainer",
		append([]string{"--processes", strconv.Itoa(procs)}, common...), killer)
	if err != nil {
		return err
	}
	report(in, multi)
	return nil
}

var (
	trainedRow = regexp.MustCompile(`(?m)^\| RL-trained delegator \(step \d+\) \| \d+ \| [^|]+\| ([-0-9.]+) \[([-0-9.]+), ([-0-9.]+)\] \|`)
	childCPURE = regexp.MustCompile(`^\[supervisor\] (.+) used ([0-9.]+) s of CPU`)
	startedRE  = regexp.MustCompile(`^\[supervisor\] (.+) started \(pid (\d+)\)`)
	envWaitRE  = regexp.MustCompile(`^\[env \d+\] push: .*; ([0-9.]+)s over the items in all`)
	envRE      = regexp.MustCompile(`^\[(env \d+)\] `)
)

// measure runs the command with out as --out; metricsDir is where its
// trainer's metrics.jsonl is, under out. A killer, when given, learns the
// children's pids from the supervisor's lines and kills them.
func measure(name, bin, out, metricsDir string, args []string, k *killer) (*result, error) {
	r := &result{name: name, cpus: map[string]float64{}}
	load, _ := host.LoadAverage()
	r.load = load[0]
	cmd := exec.Command(bin, append([]string{"train", "--out", out}, args...)...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stopKiller := make(chan struct{})
	var killed sync.WaitGroup
	if k != nil {
		killed.Go(func() { k.run(stopKiller) })
	}
	var log strings.Builder
	envWaits := map[string]float64{}
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			log.WriteString(line + "\n")
			if strings.HasPrefix(line, "[supervisor] the trainer took its") {
				r.train = time.Since(start)
			}
			if m := startedRE.FindStringSubmatch(line); m != nil && k != nil {
				pid, _ := strconv.Atoi(m[2])
				k.started(m[1], pid)
			}
			if m := childCPURE.FindStringSubmatch(line); m != nil {
				v, _ := strconv.ParseFloat(m[2], 64)
				r.cpus[m[1]] += v
			}
			if m := envWaitRE.FindStringSubmatch(line); m != nil {
				// Pauses of a second or more as they come, then every
				// pause in the environment's last line ("push: done").
				env := envRE.FindStringSubmatch(line)[1]
				envWaits[env], _ = strconv.ParseFloat(m[1], 64)
			}
		}
	})
	err := cmd.Wait()
	close(stopKiller)
	killed.Wait()
	pw.Close()
	wg.Wait()
	r.wall = time.Since(start)
	if ps := cmd.ProcessState; ps != nil {
		r.cpu = ps.UserTime() + ps.SystemTime()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", name, err, log.String())
	}
	for _, w := range envWaits {
		r.envWait += w
	}
	f, err := os.Open(filepath.Join(out, metricsDir, "metrics.jsonl"))
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(f)
	for {
		var m metrics
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s metrics: %w", name, err)
		}
		r.ms = append(r.ms, m)
	}
	f.Close()
	if r.train == 0 {
		// In process: the training phase is the steps' rollouts and updates.
		var s float64
		for _, m := range r.ms {
			s += m.RolloutSeconds + m.UpdateSeconds
		}
		r.train = time.Duration(s * float64(time.Second))
	}
	tab, err := os.ReadFile(filepath.Join(out, "table.md"))
	if err != nil {
		return nil, err
	}
	r.table = string(tab)
	m := trainedRow.FindStringSubmatch(r.table)
	if m == nil {
		return nil, fmt.Errorf("%s: no trained row in the table:\n%s", name, r.table)
	}
	r.trained, _ = strconv.ParseFloat(m[1], 64)
	r.lo, _ = strconv.ParseFloat(m[2], 64)
	r.hi, _ = strconv.ParseFloat(m[3], 64)
	return r, nil
}

func report(in, multi *result) {
	fmt.Printf("%-12s %9s %9s %11s %12s %14s %14s %20s %s\n", "run", "wall s", "train s", "steps/min", "rollouts/s", "trainer wait s", "env wait s", "trained reward", "staleness (groups by steps behind)")
	for _, r := range []*result{in, multi} {
		var rollouts int
		var wait float64
		hist := []int{}
		unknown := 0
		for _, m := range r.ms {
			rollouts += m.Rollouts
			wait += m.RolloutSeconds
			if m.StalenessGroups == nil && m.UnknownVersion == 0 {
				// In process every group is sampled by the current policy.
				m.StalenessGroups = []int{m.Groups}
			}
			for k, n := range m.StalenessGroups {
				for len(hist) <= k {
					hist = append(hist, 0)
				}
				hist[k] += n
			}
			unknown += m.UnknownVersion
		}
		envWait := "-"
		if r != in {
			envWait = fmt.Sprintf("%.1f", r.envWait)
		}
		fmt.Printf("%-12s %9.1f %9.1f %11.1f %12.2f %14.1f %14s %20s %v (unknown %d)\n", r.name, r.wall.Seconds(), r.train.Seconds(),
			float64(len(r.ms))/r.train.Minutes(), float64(rollouts)/r.train.Seconds(), wait, envWait,
			fmt.Sprintf("%.3f [%.3f, %.3f]", r.trained, r.lo, r.hi), hist, unknown)
	}
	fmt.Println()
	for _, r := range []*result{in, multi} {
		fmt.Printf("%-12s load average at its start %.2f; CPU %.1f s (%.2f cores busy over its wall time)", r.name, r.load, r.cpu.Seconds(), r.cpu.Seconds()/r.wall.Seconds())
		if len(r.cpus) > 0 {
			names := make([]string, 0, len(r.cpus))
			for n := range r.cpus {
				names = append(names, n)
			}
			sort.Strings(names)
			var sum float64
			fmt.Print(":")
			for _, n := range names {
				fmt.Printf(" %s %.1f,", n, r.cpus[n])
				sum += r.cpus[n]
			}
			fmt.Printf(" the supervisor and the table %.1f", r.cpu.Seconds()-sum)
		}
		fmt.Println()
	}
	fmt.Printf("CPU time with processes against in process: %.2fx\n", multi.cpu.Seconds()/in.cpu.Seconds())
	same, first := sameSteps(in.ms, multi.ms)
	fmt.Printf("steps whose rollouts were the same in both runs (mean reward and policy tokens): %d of %d", same, len(in.ms))
	if first > 0 {
		fmt.Printf("; the first that differs: %d", first)
	}
	fmt.Println()
	fmt.Println("\n(in process the trainer's wait is its own rollouts; with processes, the time it waited for a batch; env wait sums the pauses of every item)")
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "MISS"
	}
	inside := multi.trained >= in.lo && multi.trained <= in.hi
	fmt.Printf("\n%s multi-process trained reward %.3f inside the in-process run's 95%% interval [%.3f, %.3f]\n", verdict(inside), multi.trained, in.lo, in.hi)
	ratio := multi.wall.Seconds() / in.wall.Seconds()
	fmt.Printf("%s wall time %.1f s against %.1f s in process: %.2fx (target at most 1.30x)\n", verdict(ratio <= 1.3), multi.wall.Seconds(), in.wall.Seconds(), ratio)
	for _, r := range []*result{in, multi} {
		fmt.Printf("\n## %s\n\n%s", r.name, r.table)
	}
}

// sameSteps counts the steps whose rollouts were the same in both runs, as far as the metrics tell.
// The metrics compared are the mean reward to 1e-9 and the policy's tokens.
// It returns the first step that differs, or 0 when none does.
func sameSteps(a, b []metrics) (same, first int) {
	for i := range min(len(a), len(b)) {
		d := a[i].Reward - b[i].Reward
		if a[i].Step == b[i].Step && a[i].PolicyTokens == b[i].PolicyTokens && d <= 1e-9 && d >= -1e-9 {
			same++
		} else if first == 0 {
			first = a[i].Step
		}
	}
	if first == 0 && len(a) != len(b) {
		first = min(len(a), len(b)) + 1
	}
	return same, first
}

// killer sends SIGKILL to one child of each kind of a multi-process run.
// The kills come in a shuffled order, each 2 to 8 s after the one before.
type killer struct {
	rng   *rand.Rand
	order []string
	mu    sync.Mutex
	pids  map[string]int // the latest pid of each child, by the supervisor's name
}

func newKiller(seed uint64) *killer {
	k := &killer{rng: rand.New(rand.NewPCG(seed, 0x6b696c6c)), order: []string{"trainer", "env 1", "serve", "api"}, pids: map[string]int{}}
	k.rng.Shuffle(len(k.order), func(i, j int) { k.order[i], k.order[j] = k.order[j], k.order[i] })
	return k
}

func (k *killer) started(name string, pid int) {
	k.mu.Lock()
	k.pids[name] = pid
	k.mu.Unlock()
}

// run kills until every kind was killed or stop closes.
func (k *killer) run(stop <-chan struct{}) {
	for _, name := range k.order {
		wait := 2*time.Second + time.Duration(k.rng.Int64N(int64(6*time.Second)))
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
		k.mu.Lock()
		pid := k.pids[name]
		k.mu.Unlock()
		if pid == 0 {
			fmt.Printf("kill: %s not started yet, skipped\n", name)
			continue
		}
		proc, err := os.FindProcess(pid)
		if err == nil {
			err = proc.Kill() // SIGKILL on Unix
		}
		if err != nil {
			fmt.Printf("kill: %s (pid %d): %v\n", name, pid, err)
			continue
		}
		fmt.Printf("kill: SIGKILL to %s (pid %d)\n", name, pid)
	}
}
