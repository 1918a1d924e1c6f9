// Command soak runs `delegate process` against a faulty stand-in and kills it with SIGKILL at random.
// It restarts the process each time, then counts from the output files what became of every rollout.
// It exits 1 when a rollout was lost or duplicated.
// README.md gives the faults, the accounting and the figures.
//
//	soak -delegate ./delegate -work /tmp/soak -duration 10m
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/delegatelab/delegate/internal/host"
	"github.com/delegatelab/delegate/standin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// options are the soak's flags.
type options struct {
	delegate    string
	work        string
	duration    time.Duration
	seed        uint64
	faults      float64
	latency     time.Duration
	spread      float64
	timeout     time.Duration
	slowDelay   time.Duration
	maxRetries  int
	kills       int
	items       int
	group       int
	concurrency int
	strategy    string
	datasetSize int
	warm        time.Duration
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.delegate, "delegate", "", "the delegate binary (required)")
	fs.StringVar(&o.work, "work", "", "working directory for the dataset, config, outputs and logs (required)")
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "how long to run before the final interrupt")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the kill moments, the stand-in's answers, latencies and faults")
	fs.Float64Var(&o.faults, "faults", 0.02, "fraction of chat requests answered with a fault, spread evenly over the 6 kinds")
	fs.DurationVar(&o.latency, "latency", 200*time.Millisecond, "mean latency of the stand-in (lognormal)")
	fs.Float64Var(&o.spread, "spread", 0.5, "log-space sigma of the latency")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Second, "the client's per-attempt timeout")
	fs.DurationVar(&o.slowDelay, "slow-delay", 4*time.Second, "how late a slow fault answers (beyond -timeout)")
	fs.IntVar(&o.maxRetries, "max-retries", 1, "the client's retries per call")
	fs.IntVar(&o.kills, "kills", 3, "SIGKILLs at random moments during the run")
	fs.IntVar(&o.items, "items", 300, "items per epoch (one output directory)")
	fs.IntVar(&o.group, "g", 4, "rollouts per item")
	fs.IntVar(&o.concurrency, "concurrency", 16, "rollouts in flight")
	fs.StringVar(&o.strategy, "strategy", "decompose", "strategy rolled out")
	fs.IntVar(&o.datasetSize, "dataset-size", 2000, "records in the generated dataset")
	fs.DurationVar(&o.warm, "warm", 10*time.Second, "a life's start RSS is its first sample after this long")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var errs []error
	if o.delegate == "" || o.work == "" {
		errs = append(errs, errors.New("-delegate and -work are required"))
	}
	if o.duration <= 0 || o.items < 1 || o.group < 2 || o.concurrency < 1 || o.kills < 0 || o.datasetSize < o.items {
		errs = append(errs, errors.New("want -duration > 0, -items >= 1, -g >= 2, -concurrency >= 1, -kills >= 0, -dataset-size >= -items"))
	}
	if o.faults < 0 || o.faults > 1 {
		errs = append(errs, fmt.Errorf("-faults %v: want a fraction in [0, 1]", o.faults))
	}
	if o.slowDelay <= o.timeout {
		errs = append(errs, fmt.Errorf("-slow-delay %v must exceed -timeout %v", o.slowDelay, o.timeout))
	}
	return o, errors.Join(errs...)
}

// report is what the soak found, also written as report.json.
type report struct {
	Options   map[string]string `json:"options"`
	Machine   string            `json:"machine"`
	Wall      time.Duration     `json:"wall_ns"`
	Kills     int               `json:"kills"`
	Lives     []life            `json:"lives"`
	Account   Account           `json:"account"`
	Server    standin.Stats     `json:"server"`
	Memory    memoryVerdict     `json:"memory"`
	Rollouts  float64           `json:"rollouts_per_second"`
	SoakError string            `json:"error,omitempty"`
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	for _, d := range []string{"out", "logs"} {
		if err := os.MkdirAll(filepath.Join(o.work, d), 0o755); err != nil {
			return err
		}
	}
	data := filepath.Join(o.work, "gsm8k.jsonl")
	if err := writeDataset(data, o.datasetSize); err != nil {
		return err
	}
	sc := standin.DefaultConfig()
	sc.Latency, sc.Jitter, sc.Spread, sc.Seed = o.latency, standin.JitterLognormal, o.spread, o.seed
	sc.Faults, sc.SlowDelay = standin.Uniform(o.faults/6), o.slowDelay
	srv, err := standin.New(sc)
	if err != nil {
		return err
	}
	if err := srv.Start(""); err != nil {
		return err
	}
	defer srv.Close()
	cfg := filepath.Join(o.work, "delegate.yaml")
	if err := writeConfig(cfg, srv.URL(), o); err != nil {
		return err
	}

	rng := rand.New(rand.NewPCG(o.seed, 0x50a4))
	kills := killMoments(rng, o.kills, o.duration)
	fmt.Fprintf(stdout, "soak: %s for %s against the stand-in at %s (%.1f%% faults), kills at %s\n",
		o.delegate, o.duration, srv.URL(), 100*o.faults, fmtMoments(kills))

	rep := report{Options: describe(o), Machine: machine()}

	start := time.Now()
	deadline := start.Add(o.duration)
	epochDir := func(e int) string { return filepath.Join(o.work, "out", fmt.Sprintf("epoch-%03d", e)) }
	epoch := 0
	var soakErr error
loop:
	for {
		dir := epochDir(epoch)
		var killAt time.Time
		if len(kills) > 0 {
			killAt = start.Add(kills[0])
		}
		lf, err := live(ctx, o, cfg, data, dir, epoch, len(rep.Lives), killAt, deadline, stdout)
		rep.Lives = append(rep.Lives, lf)
		switch {
		case err != nil:
			soakErr = err
			break loop
		case lf.End == endKilled:
			kills = kills[1:]
			rep.Kills++
		case lf.End == endComplete:
			if time.Now().After(deadline) {
				break loop
			}
			epoch++
		case lf.End == endInterrupted:
			break loop
		}
	}
	rep.Wall = time.Since(start)
	for e := range epoch + 1 { // every epoch's output directory
		a, err := AccountDir(epochDir(e))
		if err != nil {
			soakErr = errors.Join(soakErr, err)
			continue
		}
		rep.Account.Add(a)
	}
	rep.Server = srv.Stats()
	rep.Memory = judgeMemory(rep.Lives, o.warm)
	rep.Rollouts = float64(rep.Account.Completed+rep.Account.FailedTotal()) / rep.Wall.Seconds()
	if soakErr != nil {
		rep.SoakError = soakErr.Error()
	}
	printReport(stdout, rep)
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.work, "report.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	return errors.Join(soakErr, rep.Account.Check())
}

// describe lists the options for the report.
func describe(o options) map[string]string {
	return map[string]string{
		"duration": o.duration.String(), "seed": fmt.Sprint(o.seed), "faults": fmt.Sprint(o.faults),
		"latency": o.latency.String(), "spread": fmt.Sprint(o.spread), "timeout": o.timeout.String(),
		"slow_delay": o.slowDelay.String(), "max_retries": fmt.Sprint(o.maxRetries), "kills": fmt.Sprint(o.kills),
		"items": fmt.Sprint(o.items), "g": fmt.Sprint(o.group), "concurrency": fmt.Sprint(o.concurrency),
		"strategy": o.strategy,
	}
}

// killMoments draws n moments in the middle 90% of d, sorted.
func killMoments(rng *rand.Rand, n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d/20 + time.Duration(rng.Int64N(int64(d*9/10)))
	}
	slices.Sort(out)
	return out
}

func fmtMoments(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.Round(time.Second).String()
	}
	return strings.Join(parts, ", ")
}

// writeDataset writes n GSM8K-format records: a question and a reference
// answer after "####".
func writeDataset(path string, n int) error {
	var b strings.Builder
	for i := range n {
		x, y := 17+i%83, 3+i%29
		fmt.Fprintf(&b, `{"question": "Soak item %d: a crate holds %d boxes of %d bolts. How many bolts are in the crate?", "answer": "%d * %d = %d\n#### %d"}`+"\n",
			i, x, y, x, y, x*y, x*y)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// writeConfig writes the delegate config: one model, the stand-in, in
// every role.
func writeConfig(path, url string, o options) error {
	doc := fmt.Sprintf(`models:
  standin:
    base_url: %s
    model: standin
    price: {input: 0.15, cached_input: 0.075, output: 0.60}
    timeout: %s
    max_retries: %d
roles:
  default: standin
`, url, o.timeout, o.maxRetries)
	return os.WriteFile(path, []byte(doc), 0o644)
}

// machine names the machine for the report.
func machine() string {
	cpu := host.CPUModel()
	if cpu == "" {
		cpu = "unknown CPU"
	}
	return fmt.Sprintf("%s, %d logical CPUs, %s/%s, %s", cpu, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// How a life ended.
const (
	endComplete    = "complete"    // the process finished its epoch
	endKilled      = "killed"      // SIGKILL at a kill moment
	endInterrupted = "interrupted" // SIGINT at the deadline
	endHung        = "hung"        // still running a minute after the SIGINT
)

// life is one run of the process.
type life struct {
	Epoch    int           `json:"epoch"`
	Index    int           `json:"index"`
	Duration time.Duration `json:"duration_ns"`
	End      string        `json:"end"`
	Exit     int           `json:"exit"`
	Log      string        `json:"log"`
	// Repairs counts the records cut short by an earlier kill that this
	// life found and removed at start.
	Repairs int         `json:"repairs"`
	Samples []rssSample `json:"rss"`
}

// rssSample is the process's resident memory at a moment of its life.
type rssSample struct {
	At  time.Duration `json:"at_ns"`
	RSS int64         `json:"rss_bytes"`
}

// live runs the process once on dir, sampling its RSS every second.
// It runs until the process exits, killAt comes with SIGKILL, or deadline comes with SIGINT.
func live(ctx context.Context, o options, cfg, data, dir string, epoch, index int, killAt, deadline time.Time, stdout io.Writer) (life, error) {
	lf := life{Epoch: epoch, Index: index, Log: filepath.Join(o.work, "logs", fmt.Sprintf("life-%03d.log", index))}
	logf, err := os.Create(lf.Log)
	if err != nil {
		return lf, err
	}
	defer logf.Close()
	cmd := exec.Command(o.delegate, "process", "--config", cfg, "--dataset", "gsm8k", "--data", data,
		"-n", fmt.Sprint(o.items), "--seed", fmt.Sprint(epoch+1), "-g", fmt.Sprint(o.group),
		"--concurrency", fmt.Sprint(o.concurrency), "--strategy", o.strategy, "--keep-ties",
		"--out", dir, "--progress", "plain")
	cmd.Stdout, cmd.Stderr = logf, logf
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		return lf, fmt.Errorf("start %s: %w", o.delegate, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	timer := func(t time.Time) <-chan time.Time {
		if t.IsZero() {
			return nil
		}
		return time.After(time.Until(t))
	}
	killC, stopC := timer(killAt), timer(deadline)
	var waitErr error
	sent := ""
wait:
	for {
		select {
		case waitErr = <-exited:
			break wait
		case <-tick.C:
			if rss, err := readRSS(cmd.Process.Pid); err == nil {
				lf.Samples = append(lf.Samples, rssSample{At: time.Since(begin), RSS: rss})
			}
		case <-killC:
			killC = nil
			if sent == endInterrupted {
				// It did not stop within a minute of the interrupt.
				sent = endHung
			} else {
				sent = endKilled
			}
			// The process dies at once, wherever it is.
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
				return lf, fmt.Errorf("kill: %w", err)
			}
		case <-stopC:
			stopC = nil
			if sent == "" {
				sent = endInterrupted
				if err := cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
					return lf, fmt.Errorf("interrupt: %w", err)
				}
				killC = time.After(time.Minute)
			}
		case <-ctx.Done():
			// The soak itself is stopping: stop the process the same way.
			if err := cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
				return lf, fmt.Errorf("interrupt: %w", err)
			}
			<-exited
			return lf, ctx.Err()
		}
	}
	lf.Duration = time.Since(begin)
	lf.Exit = cmd.ProcessState.ExitCode()
	if b, err := os.ReadFile(lf.Log); err == nil {
		lf.Repairs = countRepairs(string(b))
	}
	fmt.Fprintf(stdout, "  life %d (epoch %d): %s after %s, exit %d, RSS %s\n", index, epoch, endWord(sent, waitErr), lf.Duration.Round(time.Second), lf.Exit, rssRange(lf.Samples))
	switch {
	case sent == endKilled:
		lf.End = endKilled
	case waitErr == nil:
		lf.End = endComplete
	case sent == endInterrupted && lf.Exit == 1:
		lf.End = endInterrupted
	case sent == endHung:
		return lf, fmt.Errorf("life %d did not stop within a minute of SIGINT; see %s", index, lf.Log)
	default:
		return lf, fmt.Errorf("life %d exited %d (%v) unasked; see %s", index, lf.Exit, waitErr, lf.Log)
	}
	return lf, nil
}

// countRepairs counts the "repaired" lines of a process's output.
func countRepairs(log string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "repaired ") {
			n++
		}
	}
	return n
}

func endWord(sent string, waitErr error) string {
	switch {
	case sent != "":
		return sent
	case waitErr == nil:
		return endComplete
	}
	return "failed"
}

func rssRange(s []rssSample) string {
	if len(s) == 0 {
		return "not sampled"
	}
	return fmt.Sprintf("%s → %s", mib(s[0].RSS), mib(s[len(s)-1].RSS))
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// readRSS reads a process's resident set size from /proc.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseRSS(string(b))
}

// parseRSS reads the VmRSS line of /proc/PID/status.
func parseRSS(status string) (int64, error) {
	for _, l := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(l, "VmRSS:")
		if !ok {
			continue
		}
		var kb int64
		if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
			return 0, fmt.Errorf("parse VmRSS %q: %w", strings.TrimSpace(rest), err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("no VmRSS line")
}

// memoryVerdict compares the longest life's RSS once warm with its RSS at the end.
// It also compares the first life's warm RSS with the last life's end.
type memoryVerdict struct {
	LongestLife   int           `json:"longest_life"`
	LongestFor    time.Duration `json:"longest_for_ns"`
	Start         int64         `json:"start_rss_bytes"`
	End           int64         `json:"end_rss_bytes"`
	Peak          int64         `json:"peak_rss_bytes"`
	FirstStart    int64         `json:"first_life_start_rss_bytes"`
	LastEnd       int64         `json:"last_life_end_rss_bytes"`
	Flat          bool          `json:"flat"`
	GrowthAllowed int64         `json:"growth_allowed_bytes"`
}

// Growth allowed between a warm process and its end: the larger of 10% and 8 MiB.
// The Go runtime and SQLite's page cache settle within that.
const (
	flatFraction = 0.10
	flatBytes    = 8 << 20
)

// warmRSS is the first sample at or after warm, or the last one when the
// life was shorter.
func warmRSS(s []rssSample, warm time.Duration) int64 {
	for _, x := range s {
		if x.At >= warm {
			return x.RSS
		}
	}
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1].RSS
}

func judgeMemory(lives []life, warm time.Duration) memoryVerdict {
	var v memoryVerdict
	longest := -1
	for i, l := range lives {
		if len(l.Samples) > 0 && (longest < 0 || l.Duration > lives[longest].Duration) {
			longest = i
		}
	}
	if longest < 0 {
		return v
	}
	l := lives[longest]
	v.LongestLife, v.LongestFor = l.Index, l.Duration
	v.Start, v.End = warmRSS(l.Samples, warm), l.Samples[len(l.Samples)-1].RSS
	for _, x := range l.Samples {
		v.Peak = max(v.Peak, x.RSS)
	}
	v.GrowthAllowed = max(int64(flatFraction*float64(v.Start)), flatBytes)
	v.Flat = v.End-v.Start <= v.GrowthAllowed
	for _, l := range lives {
		if len(l.Samples) > 0 {
			if v.FirstStart == 0 {
				v.FirstStart = warmRSS(l.Samples, warm)
			}
			v.LastEnd = l.Samples[len(l.Samples)-1].RSS
		}
	}
	return v
}

func printReport(w io.Writer, r report) {
	a := r.Account
	fmt.Fprintf(w, "\nsoak report (%s)\n", r.Machine)
	repairs := 0
	for _, l := range r.Lives {
		repairs += l.Repairs
	}
	fmt.Fprintf(w, "  wall time            %s, %d lives, %d SIGKILLs, %d epochs (%d complete)\n", r.Wall.Round(time.Second), len(r.Lives), r.Kills, a.Dirs, a.Complete)
	fmt.Fprintf(w, "  repairs at restart   %d files cut back to their last recorded record\n", repairs)
	fmt.Fprintf(w, "  server               %d requests, faults %d (rate limit %d, 500 %d, reset %d, truncated %d, slow %d, garbage %d)\n",
		r.Server.Requests, r.Server.Faults.Total(), r.Server.Faults.RateLimit, r.Server.Faults.ServerError, r.Server.Faults.Reset,
		r.Server.Faults.Truncated, r.Server.Faults.Slow, r.Server.Faults.Garbage)
	fmt.Fprintf(w, "  rollouts completed   %d (%.1f rollouts/s)\n", a.Completed, r.Rollouts)
	fmt.Fprintf(w, "  rollouts retried     %d (%d retried calls, baselines included)\n", a.RetriedRollouts, a.Retries)
	fmt.Fprintf(w, "  rollouts failed      %d: %s\n", a.FailedTotal(), failedLine(a.Failed))
	fmt.Fprintf(w, "  rollouts skipped     %d (their baseline failed)\n", a.Skipped)
	fmt.Fprintf(w, "  groups               %d decided, %d written\n", a.Groups, a.GroupsWritten)
	fmt.Fprintf(w, "  lost                 %d%s\n", a.Lost, verdict(a.Lost == 0))
	fmt.Fprintf(w, "  duplicated           %d%s\n", a.Duplicated, verdict(a.Duplicated == 0))
	if a.Torn+a.Extra > 0 {
		fmt.Fprintf(w, "  torn / unrecorded    %d / %d  FAIL\n", a.Torn, a.Extra)
	}
	m := r.Memory
	fmt.Fprintf(w, "  memory (RSS)         longest life %d (%s): %s once warm, %s at the end, peak %s%s\n",
		m.LongestLife, m.LongestFor.Round(time.Second), mib(m.Start), mib(m.End), mib(m.Peak), verdict(m.Flat))
	fmt.Fprintf(w, "                       first life once warm %s, last life at the end %s\n", mib(m.FirstStart), mib(m.LastEnd))
	for _, p := range a.Problems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
	if r.SoakError != "" {
		fmt.Fprintf(w, "  error: %s\n", r.SoakError)
	}
}

func verdict(ok bool) string {
	if ok {
		return "  ok"
	}
	return "  FAIL"
}
