// Command fanout measures what the route strategy over the openai client spends per rollout.
// It compares that with a bare net/http client making the same requests to the stand-in server.
// It prints CPU, peak memory and wall time per arm, their ratios, and PASS or MISS per target.
// README.md gives the method and the figures.
//
//	fanout -standin ./standin -latency 50ms -c 16,64,512 -rounds 10
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/delegatelab/delegate/internal/host"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
}

// The orchestration targets, printed as PASS or MISS.
const (
	targetCPURatio     = 1.2
	targetBytesPerRoll = 0.3 * (1 << 20)
	targetWallRatio    = 1.15
	targetWallC        = 64
)

type options struct {
	standin     string
	url         string
	latency     time.Duration
	cs          []int
	rounds, n   int
	serverCPU   int
	idlePerHost int
	repeat      int
	cpuProfile  string
	// sharedTransport runs the strategy arm on the openai package's default transport.
	// Otherwise both arms use transports with the same settings.
	sharedTransport bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("fanout", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.standin, "standin", "./standin", "`path` of the perf/standin binary to start")
	fs.StringVar(&o.url, "url", "", "base `URL` of a stand-in already running (then -standin is not started and -latency must match it)")
	fs.DurationVar(&o.latency, "latency", 50*time.Millisecond, "the stand-in's latency")
	cs := fs.String("c", "16,64,512", "rollouts in flight, comma-separated")
	fs.IntVar(&o.rounds, "rounds", 10, "rollouts per worker: N = rounds × C (unless -n)")
	fs.IntVar(&o.n, "n", 0, "rollouts per C (0: rounds × C)")
	fs.IntVar(&o.serverCPU, "server-cpu", 1, "core to pin the stand-in to with taskset (-1: do not pin)")
	fs.IntVar(&o.idlePerHost, "idle-per-host", 4096, "idle connections kept per host by both arms' transport")
	fs.IntVar(&o.repeat, "repeat", 3, "measured runs of each arm per C, interleaved; the figures are medians")
	fs.BoolVar(&o.sharedTransport, "openai-default-transport", false, "run the route arm on the openai package's default shared transport (its dials are then not counted)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured runs of both arms to `file`")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, f := range strings.Split(*cs, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 {
			return o, fmt.Errorf("-c: %q is not a positive integer", f)
		}
		o.cs = append(o.cs, c)
	}
	switch {
	case o.latency <= 0:
		return o, fmt.Errorf("-latency: %v, want > 0", o.latency)
	case o.rounds < 1:
		return o, fmt.Errorf("-rounds: %d, want >= 1", o.rounds)
	case o.n < 0:
		return o, fmt.Errorf("-n: %d, want >= 0", o.n)
	case o.repeat < 1:
		return o, fmt.Errorf("-repeat: %d, want >= 1", o.repeat)
	case o.idlePerHost < 1:
		return o, fmt.Errorf("-idle-per-host: %d, want >= 1", o.idlePerHost)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	baseURL, placement := o.url, "external (-url)"
	var srv *serverProc
	if baseURL == "" {
		srv, err = startStandin(o.standin, o.latency, o.serverCPU)
		if err != nil {
			return err
		}
		defer srv.stop()
		baseURL, placement = srv.url, srv.placement
	}
	printMachine(stdout, placement)
	if o.sharedTransport {
		fmt.Fprintln(stdout, "route arm: the openai package's default transport (dials not counted); bare arm: -idle-per-host", o.idlePerHost)
	}
	fmt.Fprintf(stdout, "stand-in: %s, latency %v fixed; rollout = 1 + 4 parallel + 1 requests; figures are medians of %d interleaved runs per arm (errors and dials summed)\n\n", baseURL, o.latency, o.repeat)

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	cpuOf := func() (time.Duration, error) { return serverCPUOf(baseURL) }
	var all [][2]result
	for _, c := range o.cs {
		n := o.n
		if n == 0 {
			n = o.rounds * c
		}
		pair, err := measureC(ctx, baseURL, n, c, o.idlePerHost, o.repeat, o.sharedTransport, cpuOf)
		if err != nil {
			return err
		}
		all = append(all, pair)
	}
	report(stdout, all, o.latency)
	return nil
}

// measureC runs both arms at concurrency c, repeat times interleaved, and returns each arm's median figures.
// Each arm first runs an unmeasured warm-up round that fills its connection pool.
func measureC(ctx context.Context, baseURL string, n, c, idle, repeat int, sharedTransport bool, cpuOf func() (time.Duration, error)) ([2]result, error) {
	var out [2]result
	var arms [2]arm
	var dials [2]atomic.Int64
	for i, mk := range []func(*http.Client) (arm, error){
		func(hc *http.Client) (arm, error) { return newBareArm(baseURL, hc) },
		func(hc *http.Client) (arm, error) {
			if sharedTransport {
				return newStrategyArm(baseURL, nil)
			}
			return newStrategyArm(baseURL, hc)
		},
	} {
		tr := newTransport(idle, &dials[i])
		defer tr.CloseIdleConnections()
		a, err := mk(&http.Client{Transport: tr})
		if err != nil {
			return out, err
		}
		if _, err := runArm(ctx, a, c, c, nil); err != nil {
			return out, fmt.Errorf("warm up %s at C=%d: %w", a.name(), c, err)
		}
		arms[i] = a
	}
	var runs [2][]result
	for range repeat {
		for i, a := range arms {
			before := dials[i].Load()
			r, err := runArm(ctx, a, n, c, cpuOf)
			r.dials = dials[i].Load() - before
			if err != nil {
				return out, fmt.Errorf("%s at C=%d: %w", a.name(), c, err)
			}
			runs[i] = append(runs[i], r)
		}
	}
	for i := range out {
		out[i] = median(runs[i])
	}
	return out, nil
}

// median returns the median of each figure over runs of one arm, and the
// sums of errors and dials.
func median(runs []result) result {
	m := runs[0]
	med := func(f func(result) int64) int64 {
		v := make([]int64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	m.wall = time.Duration(med(func(r result) int64 { return int64(r.wall) }))
	m.cpu = time.Duration(med(func(r result) int64 { return int64(r.cpu) }))
	m.peakRSS = med(func(r result) int64 { return r.peakRSS })
	m.rssGrowth = med(func(r result) int64 { return r.rssGrowth })
	m.heapGrowth = med(func(r result) int64 { return r.heapGrowth })
	m.serverCPU = time.Duration(med(func(r result) int64 { return int64(r.serverCPU) }))
	m.errors, m.dials, m.runs = 0, 0, len(runs)
	for _, r := range runs {
		m.errors += r.errors
		m.dials += r.dials
		m.hwmReset = m.hwmReset && r.hwmReset
		if m.firstErr == nil {
			m.firstErr = r.firstErr
		}
	}
	return m
}

func mb(b float64) string { return strconv.FormatFloat(b/(1<<20), 'f', 1, 64) }
func kb(b float64) string { return strconv.FormatFloat(b/(1<<10), 'f', 1, 64) }

func report(w io.Writer, all [][2]result, latency time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "C\tN\tarm\twall s\tfloor s\twall/floor\tCPU ms/rollout\tpeak RSS MB\tRSS KB/in-flight\theap KB/in-flight\tstand-in CPU %\tdials\terrors\t")
	for _, pair := range all {
		for _, r := range pair {
			floor := floorOf(r, latency)
			srv := "?"
			if r.serverCPU >= 0 {
				srv = strconv.FormatFloat(100*r.serverCPU.Seconds()/r.wall.Seconds(), 'f', 0, 64)
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%.2f\t%.2f\t%.3f\t%.3f\t%s\t%s\t%s\t%s\t%d\t%d\t\n", r.c, r.n, r.arm,
				r.wall.Seconds(), floor.Seconds(), r.wall.Seconds()/floor.Seconds(),
				float64(r.cpuPerRollout().Microseconds())/1000, mb(float64(r.peakRSS)), kb(r.rssPerInFlight()),
				kb(r.heapPerInFlight()), srv, r.dials, r.errors)
		}
		b, s := pair[0], pair[1]
		fmt.Fprintf(tw, "%d\t\troute/bare\t%.2f\t\t\t%.2f\t%.2f\t%s\t%s\t\t\t\t\n", b.c, s.wall.Seconds()/b.wall.Seconds(),
			ratio(s.cpu.Seconds()/float64(s.n), b.cpu.Seconds()/float64(b.n)),
			ratio(float64(s.peakRSS), float64(b.peakRSS)), ratioS(s.rssPerInFlight(), b.rssPerInFlight()), ratioS(s.heapPerInFlight(), b.heapPerInFlight()))
	}
	_ = tw.Flush() // w is stdout; a failed write has nowhere to be reported
	for _, pair := range all {
		for _, r := range pair {
			if r.firstErr != nil {
				fmt.Fprintf(w, "C=%d %s: %d failed rollouts, first: %v\n", r.c, r.arm, r.errors, r.firstErr)
			}
			if !r.hwmReset {
				fmt.Fprintf(w, "C=%d %s: VmHWM could not be reset: peak RSS is the process's lifetime peak\n", r.c, r.arm)
			}
		}
	}

	fmt.Fprintln(w, "\ntargets (route strategy over the openai client against the bare client):")
	for _, pair := range all {
		b, s := pair[0], pair[1]
		cr := (s.cpu.Seconds() / float64(s.n)) / (b.cpu.Seconds() / float64(b.n))
		fmt.Fprintf(w, "  C=%-4d CPU per rollout %.2fx bare (<= %.2fx)  %s\n", s.c, cr, targetCPURatio, verdict(cr <= targetCPURatio))
		fmt.Fprintf(w, "  C=%-4d memory per in-flight rollout: %.3f MB RSS growth  %s; %.3f MB heap+stacks growth  %s (<= %.1f MB)\n", s.c,
			s.rssPerInFlight()/(1<<20), verdict(s.rssPerInFlight() <= targetBytesPerRoll),
			s.heapPerInFlight()/(1<<20), verdict(s.heapPerInFlight() <= targetBytesPerRoll), targetBytesPerRoll/(1<<20))
		if s.c == targetWallC {
			wr := s.wall.Seconds() / floorOf(s, latency).Seconds()
			fmt.Fprintf(w, "  C=%-4d wall %.3fx the floor (<= %.2fx)  %s\n", s.c, wr, targetWallRatio, verdict(wr <= targetWallRatio))
		}
		if s.errors > 0 || b.errors > 0 {
			fmt.Fprintf(w, "  C=%-4d failed rollouts: bare %d, route %d  MISS\n", s.c, b.errors, s.errors)
		}
	}
}

// floorOf is the latency floor of r: ceil(N/C) rounds of 3 sequential
// latencies.
func floorOf(r result, latency time.Duration) time.Duration {
	rounds := (r.n + r.c - 1) / r.c
	return time.Duration(rounds) * 3 * latency
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func ratioS(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64)
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// printMachine prints the CPU, cores, this process's placement and load.
func printMachine(w io.Writer, placement string) {
	orUnknown := func(s, unknown string) string {
		if s == "" {
			return unknown
		}
		return s
	}
	load := "?"
	if avg, ok := host.LoadAverage(); ok {
		load = fmt.Sprintf("%.2f %.2f %.2f", avg[0], avg[1], avg[2])
	}
	fmt.Fprintf(w, "machine: %s, CPUs online %s, %s, load average %s\n", orUnknown(host.CPUModel(), "unknown CPU"), orUnknown(host.OnlineCPUs(), "?"), runtime.Version(), load)
	fmt.Fprintf(w, "client: this process on CPUs %s, GOMAXPROCS %d; stand-in: %s\n", orUnknown(host.AllowedCPUs(), "?"), runtime.GOMAXPROCS(0), placement)
}

// serverProc is the stand-in running as a child process.
type serverProc struct {
	cmd       *exec.Cmd
	url       string
	placement string
	waitErr   chan error
}

// startStandin starts the stand-in binary and waits for its URL.
// It pins it to core cpu with taskset where that core exists and taskset is installed.
func startStandin(bin string, latency time.Duration, cpu int) (*serverProc, error) {
	args := []string{"-addr", "127.0.0.1:0", "-latency", latency.String()}
	name, placement := bin, "not pinned"
	if cpu >= 0 {
		if _, err := os.Stat("/sys/devices/system/cpu/cpu" + strconv.Itoa(cpu)); err != nil {
			placement = fmt.Sprintf("not pinned (no CPU %d)", cpu)
		} else if ts, err := exec.LookPath("taskset"); err != nil {
			placement = "not pinned (no taskset)"
		} else {
			args = append([]string{"-c", strconv.Itoa(cpu), bin}, args...)
			name, placement = ts, fmt.Sprintf("separate process pinned to CPU %d", cpu)
		}
	}
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start stand-in: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start stand-in %s: %w", bin, err)
	}
	p := &serverProc{cmd: cmd, placement: placement, waitErr: make(chan error, 1)}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		for sc.Scan() { // the exit report: not needed
		}
		p.waitErr <- cmd.Wait()
	}()
	select {
	case line, ok := <-lines:
		url, found := strings.CutPrefix(line, "standin listening on ")
		if !ok || !found {
			p.stop()
			return nil, fmt.Errorf("start stand-in %s: no listening line (got %q)", bin, line)
		}
		p.url = url
		return p, nil
	case <-time.After(10 * time.Second):
		p.stop()
		return nil, fmt.Errorf("start stand-in %s: no listening line after 10s", bin)
	}
}

// stop ends the stand-in with SIGTERM (SIGKILL after 5 s) and waits.
func (p *serverProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // it may have exited already
	select {
	case <-p.waitErr:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill() // it ignored SIGTERM; nothing more to do
		<-p.waitErr
	}
}

// serverCPUOf asks the stand-in at baseURL for its CPU time (GET /stats of
// perf/standin).
func serverCPUOf(baseURL string) (time.Duration, error) {
	resp, err := http.Get(strings.TrimSuffix(strings.TrimRight(baseURL, "/"), "/v1") + "/stats")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("stand-in /stats: status %d", resp.StatusCode)
	}
	var st struct {
		User float64 `json:"cpu_user_s"`
		Sys  float64 `json:"cpu_sys_s"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("stand-in /stats: %w", err)
	}
	return time.Duration((st.User + st.Sys) * float64(time.Second)), nil
}
