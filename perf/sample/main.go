// Command sample compares this module's sampling speed with llama2.c's runomp at equal thread counts.
// Both run identical seeded weights, at batch 1 and, for this module, batch 32.
// It prints tokens per second, the ratios, memory bandwidth and whether each target is met.
// run.sh builds runomp and calls this program; README.md explains the method.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/delegatelab/delegate/internal/host"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/nn/kernel"
	"github.com/delegatelab/delegate/perf/internal/runc"
	"github.com/delegatelab/delegate/tokenizer"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sample:", err)
		os.Exit(1)
	}
}

// shape is a model size to compare on.
type shape struct {
	name  string
	cfg   nn.Config
	named bool // run only when -shapes names it: minutes a repetition
}

// shapes are llama2.c's model sizes.
// stories15M comes with its 32000-token vocabulary and with our 512-token
// one. stories42M and stories110M have the configs of llama2.c's
// checkpoints (hidden_dim 1376 and 2048, seq_len 1024). They run only when
// -shapes names them.
var shapes = []shape{
	{"stories260K", nn.Config{Vocab: 512, Dim: 64, Layers: 5, Heads: 8, KVHeads: 4, Hidden: 172, Context: 512}, false},
	{"stories15M", nn.Config{Vocab: 32000, Dim: 288, Layers: 6, Heads: 6, KVHeads: 6, Hidden: 768, Context: 256, TiedOutput: true}, false},
	{"stories15M-v512", nn.Config{Vocab: 512, Dim: 288, Layers: 6, Heads: 6, KVHeads: 6, Hidden: 768, Context: 256}, false},
	{"stories42M", nn.Config{Vocab: 32000, Dim: 512, Layers: 8, Heads: 8, KVHeads: 8, Hidden: 1376, Context: 1024, TiedOutput: true}, true},
	{"stories110M", nn.Config{Vocab: 32000, Dim: 768, Layers: 12, Heads: 12, KVHeads: 12, Hidden: 2048, Context: 1024, TiedOutput: true}, true},
}

// The targets: batch 1 at least runomp's tokens per second at equal threads.
// The batch's total is at least batchTarget times runomp's batch-1 rate.
const batchTarget = 5

// options are the command's settings.
type options struct {
	runBin string // llama2.c run binary; empty measures our side only
	work   string // directory for the exported files
	steps  int    // positions per sequence, as run.c's -n
	batch  int    // sequences decoded together in the batched measurement
	reps   int    // repetitions of each measurement
	best   bool   // report each figure's best repetition instead of its median
	procs  []int  // thread counts: GOMAXPROCS for ours, OMP_NUM_THREADS for runomp
	bwMiB  int    // size of the bandwidth probe's buffer
	seed   uint64
	scale  float32
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sample", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.runBin, "run", "", "path to llama2.c's runomp binary (run.c built with gcc -Ofast -fopenmp -march=native); empty: our side only")
	fs.StringVar(&o.work, "work", "", "directory for model.bin and tokenizer.bin (default: a temporary directory, removed at exit)")
	fs.IntVar(&o.steps, "n", 256, "positions per sequence, prompt included (run.c's -n)")
	fs.IntVar(&o.batch, "batch", 32, "sequences decoded together in the batched measurement")
	fs.IntVar(&o.reps, "reps", 5, "repetitions of each measurement")
	stat := fs.String("stat", "median", "which repetition each figure reports: median or best")
	procs := fs.String("procs", "1,2", "comma-separated thread counts: GOMAXPROCS for ours, OMP_NUM_THREADS for runomp")
	fs.IntVar(&o.bwMiB, "bw-mib", 1024, "MiB streamed by the memory bandwidth probe (far more than the caches); 0 skips it")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the created models")
	scale := fs.Float64("scale", 8, "multiplier on the models' initial weights, so that greedy choices are clear-cut")
	only := fs.String("shapes", "", "comma-separated shape names to run (default: "+shapeNames(false)+"; also "+shapeNames(true)+", minutes a repetition)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.scale = float32(*scale)
	var err error
	switch *stat {
	case "median":
	case "best":
		o.best = true
	default:
		return fmt.Errorf("-stat %q: want median or best", *stat)
	}
	if o.steps < 2 || o.batch < 1 || o.reps < 1 || o.bwMiB < 0 {
		return fmt.Errorf("-n %d must be at least 2; -batch %d and -reps %d at least 1; -bw-mib %d not negative", o.steps, o.batch, o.reps, o.bwMiB)
	}
	if o.procs, err = parseProcs(*procs); err != nil {
		return err
	}
	todo, err := pickShapes(*only)
	if err != nil {
		return err
	}
	if o.work == "" {
		dir, err := os.MkdirTemp("", "bench-sample-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.work = dir
	}
	readMachine().print(stdout)
	fmt.Fprintf(stdout, "ours: infer.Engine (kernel %s), greedy, %s of %d; llama2.c: %s -t 0 -n %d, OMP_NUM_THREADS as GOMAXPROCS, %[2]s of %[3]d\n",
		kernel.Impl(), *stat, o.reps, orNone(o.runBin), o.steps)
	var probe *bwProbe
	if o.bwMiB > 0 {
		probe = newBWProbe(o.bwMiB << 20)
	}
	var rows []result
	for _, procs := range o.procs {
		runtime.GOMAXPROCS(procs)
		first := len(rows)
		for _, s := range todo {
			load := "unknown"
			if avg, ok := host.LoadAverage(); ok {
				load = fmt.Sprintf("%.2f", avg[0])
			}
			r, err := measure(context.Background(), s, o, procs, probe, stderr)
			if err != nil {
				return fmt.Errorf("shape %s, %d threads: %w", s.name, procs, err)
			}
			r.load = load
			rows = append(rows, r)
			// progress, so that a long run shows where it is
			fmt.Fprintf(stderr, "sample: %s, %d threads, load %s: runomp %.0f tok/s, ours b1 %.0f, b%d %.0f\n", s.name, procs, load, r.ref, r.one, o.batch, r.many)
		}
		// The bandwidth at procs threads is the best of all its probes.
		top := 0.0
		for _, r := range rows[first:] {
			top = max(top, r.bw)
		}
		for i := range rows[first:] {
			rows[first+i].bw = top
		}
	}
	fmt.Fprintln(stdout)
	printTable(stdout, rows, o.batch)
	fmt.Fprintln(stdout)
	printBandwidth(stdout, rows)
	return nil
}

// parseProcs reads -procs: positive thread counts separated by commas.
func parseProcs(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-procs %q: %q is not a positive thread count", list, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// shapeNames lists the shapes that run by default, or those run only when named.
func shapeNames(named bool) string {
	var names []string
	for _, s := range shapes {
		if s.named == named {
			names = append(names, s.name)
		}
	}
	return strings.Join(names, ",")
}

// pickShapes reads -shapes: the default shapes when list is empty.
func pickShapes(list string) ([]shape, error) {
	if list == "" {
		var out []shape
		for _, s := range shapes {
			if !s.named {
				out = append(out, s)
			}
		}
		return out, nil
	}
	var out []shape
	for _, name := range strings.Split(list, ",") {
		found := false
		for _, s := range shapes {
			if s.name == name {
				out = append(out, s)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown shape %q (have %s,%s)", name, shapeNames(false), shapeNames(true))
		}
	}
	return out, nil
}

func orNone(s string) string {
	if s == "" {
		return "(not run)"
	}
	return s
}

// result is one shape's row of the table.
type result struct {
	shape    string
	procs    int     // threads on both sides
	load     string  // one-minute load average before the shape ran
	weights  int64   // bytes of weights a batch-1 step reads
	bw       float64 // measured memory bandwidth at procs threads, bytes/s; 0 when not measured
	steps    int     // positions per sequence
	ref      float64 // runomp tok/s; 0 when not run
	refMatch bool    // run.c printed exactly our greedy text, so it ran every step
	one      float64 // ours, batch 1, generated tok/s
	oneCPU   float64 // ours, batch 1, generated tokens per CPU second; 0 when not measured
	refCPU   float64 // runomp's generated tokens per CPU second of all its threads; 0 when not measured
	many     float64 // ours, batch N, generated tok/s over all sequences
	manyCPU  float64 // ours, batch N, generated tokens per CPU second; 0 when not measured
}

// measure exports s's model, runs llama2.c on it, and times our engine on
// the same Params.
func measure(ctx context.Context, s shape, o options, procs int, probe *bwProbe, log io.Writer) (result, error) {
	c := s.cfg.WithDefaults()
	steps := min(o.steps, c.Context)
	res := result{shape: s.name, procs: procs, steps: steps, weights: weightBytes(c)}
	p, err := runc.ScaledModel(c, o.seed, o.scale)
	if err != nil {
		return res, err
	}
	dir := filepath.Join(o.work, s.name)
	if err := runc.Export(dir, p); err != nil {
		return res, err
	}
	ec := infer.DefaultEngineConfig()
	ec.MaxBatch = o.batch
	e, err := infer.NewEngine(p, ec)
	if err != nil {
		return res, err
	}
	defer e.Close()

	// batch 1: BOS then steps-1 greedy tokens, as run.c with no prompt
	one := []infer.GenRequest{{Prompt: []int{tokenizer.BOS}, MaxNew: steps - 1}}
	warm, err := e.GenerateAll(ctx, one) // also warms the engine up
	if err != nil {
		return res, err
	}
	toks := warm[0].Tokens
	if len(toks) != steps-1 {
		return res, fmt.Errorf("greedy run stopped after %d of %d tokens", len(toks), steps-1)
	}
	for i, id := range toks {
		if id == tokenizer.BOS {
			// run.c would stop here and time a shorter run than ours
			return res, fmt.Errorf("greedy token %d is BOS, where run.c stops; pick another -seed or -scale", i)
		}
	}
	// batch N: N sequences of steps positions; each prompt is BOS and one
	// distinct byte, so the sequences differ as a server's would
	many := make([]infer.GenRequest, o.batch)
	for i := range many {
		many[i] = infer.GenRequest{Prompt: []int{tokenizer.BOS, tokenizer.ByteOffset + 'a' + i%26 + i/26*32}, MaxNew: steps - 2}
	}

	// run.c samples one token more than it times: -n steps feeds positions
	// 0..steps-1 and prints the steps tokens they predict, reporting
	// (steps-1)/time from the second on. We time the same steps-1 forward
	// passes and compare run.c's text with ours plus its one extra token,
	// which proves it ran every step.
	seq := append([]int{tokenizer.BOS}, toks...)
	want := runc.Text(seq)
	wantOne := func(text string) bool { return oneMoreToken(text, want, seq[len(seq)-1], c.Vocab) }
	res.refMatch = o.runBin != ""
	var got string
	// The repetitions interleave the two programs and the bandwidth probe.
	// Both programs then see the same spells of load from other processes on a shared machine.
	// Each figure is the median or the best of its own; the bandwidth is always the best.
	var refs, refCPUs, ones, oneCPUs, manys, manyCPUs []float64
	for range o.reps {
		if o.runBin != "" {
			text, rate, cpu, err := runLlama2C(ctx, o.runBin, dir, steps, procs)
			if err != nil {
				return res, err
			}
			refs = append(refs, rate)
			if !wantOne(text) {
				res.refMatch, got = false, text
			}
			// CPU time of the generation alone: a run of one step
			// costs the loading and one forward pass
			_, _, start, err := runLlama2C(ctx, o.runBin, dir, 1, procs)
			if err != nil {
				return res, err
			}
			if cpu > start {
				refCPUs = append(refCPUs, float64(steps-1)/(cpu-start).Seconds())
			}
		}
		rate, cpu, err := bestRate(ctx, e, one, 1)
		if err != nil {
			return res, err
		}
		ones, oneCPUs = append(ones, rate), append(oneCPUs, cpu)
		if rate, cpu, err = bestRate(ctx, e, many, 1); err != nil {
			return res, err
		}
		manys, manyCPUs = append(manys, rate), append(manyCPUs, cpu)
		if probe != nil {
			res.bw = max(res.bw, probe.rate(procs))
		}
	}
	pick := median
	if o.best {
		pick = best
	}
	res.ref, res.refCPU = pick(refs), pick(refCPUs)
	res.one, res.oneCPU, res.many, res.manyCPU = pick(ones), pick(oneCPUs), pick(manys), pick(manyCPUs)
	if o.runBin != "" && !res.refMatch {
		at := firstDiff(got, want)
		fmt.Fprintf(log, "sample: %s: run.c's greedy text (%d bytes) differs from ours (%d bytes) from byte %d (%q vs %q), so its step count is unchecked\n",
			s.name, len(got), len(want), at, clip(got[at:]), clip(want[at:]))
	}
	return res, nil
}

// bestRate runs reqs reps times and returns the best generated tokens per wall-clock second.
// It also returns them per second of this process's user and system CPU time.
// That is meaningful at GOMAXPROCS=1, where it is the time the scheduler gave the one core to us.
// The best run is the one least disturbed by other processes; llama2.c's figure is taken the same way.
func bestRate(ctx context.Context, e *infer.Engine, reqs []infer.GenRequest, reps int) (wall, cpu float64, err error) {
	for range reps {
		start, cpu0 := time.Now(), cpuNow()
		out, err := e.GenerateAll(ctx, reqs)
		if err != nil {
			return 0, 0, err
		}
		sec, cpuSec := time.Since(start).Seconds(), (cpuNow() - cpu0).Seconds()
		n := 0
		for _, r := range out {
			n += len(r.Tokens)
		}
		wall = max(wall, float64(n)/sec)
		if cpuSec > 0 {
			cpu = max(cpu, float64(n)/cpuSec)
		}
	}
	return wall, cpu, nil
}

// median is the middle of xs (the mean of the two middle values for an
// even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// best is the largest of xs; 0 for none.
func best(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

var achieved = regexp.MustCompile(`achieved tok/s: ([0-9.eE+-]+|inf|nan)`)

// runLlama2C runs llama2.c's run binary greedily on dir's model.bin with OMP_NUM_THREADS=procs.
// It returns what it printed on stdout and its "achieved tok/s".
func runLlama2C(ctx context.Context, bin, dir string, steps, procs int) (text string, rate float64, cpu time.Duration, err error) {
	cmd := exec.CommandContext(ctx, bin, filepath.Join(dir, "model.bin"), "-z", filepath.Join(dir, "tokenizer.bin"), "-t", "0", "-n", strconv.Itoa(steps))
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS="+strconv.Itoa(procs), "OMP_PROC_BIND=false")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", 0, 0, fmt.Errorf("run %s: %w: %s", bin, err, lastLine(errOut.String()))
	}
	cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if steps < 2 {
		return out.String(), 0, cpu, nil // too short for run.c to time
	}
	rate, err = parseAchieved(errOut.String())
	if err != nil {
		return "", 0, 0, fmt.Errorf("run %s: %w", bin, err)
	}
	return out.String(), rate, cpu, nil
}

// parseAchieved reads run.c's "achieved tok/s: X" line.
func parseAchieved(stderr string) (float64, error) {
	m := achieved.FindStringSubmatch(stderr)
	if m == nil {
		return 0, fmt.Errorf("no \"achieved tok/s\" line in its stderr %q", lastLine(stderr))
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || v <= 0 || v > 1e12 {
		// inf: the run took under run.c's 1 ms clock resolution
		return 0, fmt.Errorf("achieved tok/s %q is not a usable rate (run too short for run.c's millisecond clock?)", m[1])
	}
	return v, nil
}

// firstDiff is the index of the first byte where a and b differ.
func firstDiff(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

func clip(s string) string { return s[:min(len(s), 40)] }

// oneMoreToken reports whether text, run.c's output, is want followed by one more token and a newline.
// The extra token is the one printed after last.
func oneMoreToken(text, want string, last, vocab int) bool {
	rest, ok := strings.CutPrefix(text, want)
	if !ok {
		return false
	}
	rest, ok = strings.CutSuffix(rest, "\n")
	if !ok {
		return false
	}
	for id := range vocab {
		if id != tokenizer.BOS && runc.Text([]int{last, id}) == rest {
			return true
		}
	}
	return false
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// printTable writes one row per shape and thread count with the ratios and verdicts.
// Then, for one thread, it writes the same comparison over CPU time.
func printTable(w io.Writer, rows []result, batch int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "shape\tthreads\tload\tsteps\trunomp tok/s\tsame text\tours b1 tok/s\tb1/runomp\tours b%d tok/s\tb%d/runomp\tb1 target\tb%d target\t\n", batch, batch, batch)
	for _, r := range rows {
		if r.ref == 0 {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t-\t-\t%.0f\t-\t%.0f\t-\t-\t-\t\n", r.shape, r.procs, r.load, r.steps, r.one, r.many)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%.0f\t%s\t%.0f\t%.2f\t%.0f\t%.2f\t%s\t%s\t\n", r.shape, r.procs, r.load, r.steps, r.ref, yesNo(r.refMatch),
			r.one, r.one/r.ref, r.many, r.many/r.ref, verdict(r.one >= r.ref), verdict(r.many >= batchTarget*r.ref))
	}
	tw.Flush() // writes to w; an error there has nowhere better to go
	fmt.Fprintf(w, "targets: b1 >= runomp at equal threads; b%d total >= %dx runomp (PASS/MISS)\n", batch, batchTarget)

	// Per CPU second of all threads: what each program does with the time the scheduler gives it.
	// Other processes on a shared machine disturb that less than wall-clock time.
	// On several threads it counts a thread's spinning too, so it is a cost, not a speed.
	// runomp's time excludes its loading: a one-step run's CPU time is subtracted.
	var cpuRows []result
	for _, r := range rows {
		if r.oneCPU > 0 {
			cpuRows = append(cpuRows, r)
		}
	}
	if len(cpuRows) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "shape\tthreads\trunomp tok/cpu-s\tours b1 tok/cpu-s\tb1/runomp (CPU time)\tours b%d tok/cpu-s\tb%d/runomp (CPU time)\t\n", batch, batch)
	for _, r := range cpuRows {
		if r.refCPU == 0 {
			fmt.Fprintf(tw, "%s\t%d\t-\t%.0f\t-\t%.0f\t-\t\n", r.shape, r.procs, r.oneCPU, r.manyCPU)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.2f\t%.0f\t%.2f\t\n", r.shape, r.procs, r.refCPU, r.oneCPU, r.oneCPU/r.refCPU, r.manyCPU, r.manyCPU/r.refCPU)
	}
	tw.Flush() // as above
}

// printBandwidth writes the measured memory bandwidth and the fraction that batch-1 decoding reaches.
// It does so for the shape with the most weights.
// Decoding's share is weight bytes per token times tokens per second.
func printBandwidth(w io.Writer, rows []result) {
	var big int64
	for _, r := range rows {
		big = max(big, r.weights)
	}
	for _, r := range rows {
		if r.weights != big || r.bw == 0 {
			continue
		}
		reached := float64(r.weights) * r.one
		fmt.Fprintf(w, "memory bandwidth, %d threads: %.1f GB/s streaming read; %s batch 1 reads %.1f MB of weights per token: %.1f GB/s, %.0f%% of it",
			r.procs, r.bw/1e9, r.shape, float64(r.weights)/1e6, reached/1e9, 100*reached/r.bw)
		if r.ref > 0 {
			fmt.Fprintf(w, " (runomp: %.0f%%)", 100*float64(r.weights)*r.ref/r.bw)
		}
		fmt.Fprintln(w)
	}
}

// weightBytes is what one batch-1 decode step reads of the weights.
// That is every matrix once, as the engine packs them with rows rounded up to 16,
// and one row of the embedding.
func weightBytes(c nn.Config) int64 {
	pad := func(n int) int64 { return int64((n + 15) / 16 * 16) }
	d, kv, h := c.Dim, c.KVDim(), c.Hidden
	per := pad(d+2*kv)*int64(d) + pad(d)*int64(d) + pad(2*h)*int64(d) + pad(d)*int64(h)
	n := int64(c.Layers)*per + pad(c.Vocab)*int64(d) + int64(d)
	return 4 * n
}

// bwProbe measures memory bandwidth.
// procs goroutines each scan their share of a buffer far larger than the caches for a byte that is not there.
// bytes.IndexByte reads with the widest vector loads the runtime has.
// The buffer is written when made, so that its pages are real memory, not the shared zero page.
type bwProbe struct{ buf []byte }

func newBWProbe(size int) *bwProbe {
	p := &bwProbe{buf: make([]byte, size)}
	for i := range p.buf {
		p.buf[i] = 0x5a
	}
	return p
}

// rate returns bytes per second of one pass with procs goroutines.
func (p *bwProbe) rate(procs int) float64 {
	size := len(p.buf)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range procs {
		part := p.buf[g*size/procs : (g+1)*size/procs]
		wg.Go(func() {
			if bytes.IndexByte(part, 0) >= 0 {
				panic("bandwidth probe: the buffer holds a zero byte")
			}
		})
	}
	wg.Wait()
	return float64(size) / time.Since(start).Seconds()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// cpuNow is this process's CPU time so far; 0 when the system cannot tell.
func cpuNow() time.Duration {
	d, _ := host.ProcessCPU()
	return d
}
