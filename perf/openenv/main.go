// Command openenv measures what serving the delegation environment over OpenEnv's protocol costs.
// It compares that with running the same episodes in process.
// The sub-agent is the stand-in API of package standin on loopback, the same for every arm.
// It runs in a child process, as a remote API would run elsewhere: its CPU is not the episodes'.
// Each arm runs episodes of seeds 0 to N-1 from -concurrency workers.
// An episode delegates every step of the problem, then answers.
// The arms are in process, over the WebSocket with one session a worker reset per episode,
// and over HTTP MCP with one MCP session a worker.
// Each transport has a floor arm: the in-process episode, and per reset and step one
// round trip of the real messages' sizes on the same transport with a bare server
// (floor.go). Its CPU over in process is the least any implementation of the transport adds here.
// The arms run interleaved, -rounds times, each round in a rotated order, after one untimed warm-up round.
// Every arm must make the same sub-agent calls and earn the same reward on each episode as in process.
// Each round prints each arm's steps per second, the cores busy (the stand-in's included),
// step latency p50 and p99, CPU time, heap allocations and bytes on the wire per episode, and the load average.
// CPU time and allocations are this process's: the environment, the server and the client.
// CPU ratios compare an arm with the in-process arm of the same round.
// Allocations do not depend on the machine's load; CPU time does.
// The targets are at least 5,000 steps/s on each transport
// and at most 1.2× the in-process CPU per episode, PASS or MISS each on the medians over the rounds.
// The summary says what each floor adds, whether it leaves 1.2× reachable, and how much of ours sits above it.
//
//	go run ./perf/openenv -episodes 2000 -concurrency 32 -rounds 5
//	go run ./perf/openenv -standin-here
//	go run ./perf/openenv -arm websocket,websocket-floor -rounds 3
//	go run ./perf/openenv -arm websocket -rounds 1 -cpuprofile /tmp/ws.pprof
//	go run ./perf/openenv -arm websocket -rounds 1 -memprofile /tmp/ws.mem
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/openai"
	"github.com/delegatelab/delegate/standin"
	"github.com/delegatelab/delegate/trajectory/openenv"
)

// Targets.
const (
	minStepsPerSecond = 5000
	maxCPURatio       = 1.2
)

func main() {
	var o options
	flag.IntVar(&o.episodes, "episodes", 2000, "episodes per arm and round")
	flag.IntVar(&o.conc, "concurrency", 32, "workers running episodes at once")
	flag.IntVar(&o.rounds, "rounds", 5, "rounds of every arm, interleaved")
	flag.DurationVar(&o.latency, "latency", 0, "the stand-in's latency per sub-agent call")
	flag.StringVar(&o.only, "arm", "", "run in-process and these arms only, comma-separated (websocket, websocket-floor, http-mcp, http-mcp-floor); default all")
	flag.BoolVar(&o.standinHere, "standin-here", false, "run the stand-in in this process, its CPU counted as the episodes'; default a child process, as a remote API")
	serveStandin := flag.Bool("serve-standin", false, "serve the stand-in for a parent run, until stdin closes")
	flag.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of the timed rounds, the in-process arm's included, to this file")
	memProfile := flag.String("memprofile", "", "write the allocations of the whole run to this file (go tool pprof -sample_index=alloc_objects)")
	flag.Parse()
	if *serveStandin {
		if err := serveChild(o.latency); err != nil {
			fmt.Fprintln(os.Stderr, "openenv stand-in:", err)
			os.Exit(1)
		}
		return
	}
	if *memProfile != "" {
		runtime.MemProfileRate = 4096 // finer than the default, for allocation counts
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "openenv:", err)
		os.Exit(1)
	}
	if *memProfile != "" {
		if err := writeHeapProfile(*memProfile); err != nil {
			fmt.Fprintln(os.Stderr, "openenv:", err)
			os.Exit(1)
		}
	}
}

// options are the command's flags.
type options struct {
	episodes, conc, rounds int
	latency                time.Duration
	only, profile          string
	standinHere            bool
}

// writeHeapProfile writes the allocations so far to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// arm is one way of running an episode's steps. open returns a worker's
// stepper: an in-process environment, a WebSocket session, an MCP
// session or a floor session. host is the server whose bytes on the
// wire count as the arm's; "" in process.
type arm struct {
	name string
	host string
	open func(ctx context.Context) (openenv.Stepper, error)
}

// result is one arm's figures in one round.
type result struct {
	name     string
	episodes int
	steps    int
	wall     time.Duration
	cpu      time.Duration
	allocs   uint64          // heap objects allocated, the stand-in's included when it runs here
	calls    int64           // the stand-in's requests: the sub-agent calls
	wire     int64           // bytes the clients sent and received on the arm's connections
	subCPU   time.Duration   // the stand-in child's CPU time, not in cpu
	rewards  []float64       // each episode's last reward, by seed
	lat      []time.Duration // every step's, sorted
	load     string          // the load average after the round
}

func (r result) stepsPerSecond() float64 { return float64(r.steps) / r.wall.Seconds() }
func (r result) cpuPerEpisode() time.Duration {
	return r.cpu / time.Duration(r.episodes)
}

// cores is the CPU time over the wall time, the stand-in child's
// included: the cores the arm kept busy.
func (r result) cores() float64                   { return (r.cpu + r.subCPU).Seconds() / r.wall.Seconds() }
func (r result) allocsPerEpisode() uint64         { return r.allocs / uint64(r.episodes) }
func (r result) wirePerEpisode() int64            { return r.wire / int64(r.episodes) }
func (r result) tripsPerEpisode() float64         { return float64(r.steps)/float64(r.episodes) + 1 } // the reset's, then the steps'
func (r result) quantile(q float64) time.Duration { return r.lat[int(q*float64(len(r.lat)-1))] }

// work is what every arm runs: the episodes' questions and answers, drawn once.
type work struct {
	questions [][]string
	answers   []string
}

func run(o options) error {
	if o.episodes <= 0 || o.conc <= 0 || o.rounds <= 0 {
		return fmt.Errorf("-episodes %d, -concurrency %d and -rounds %d must be positive", o.episodes, o.conc, o.rounds)
	}
	st, err := start(o)
	if err != nil {
		return err
	}
	defer st.close()
	sv, d, srv, c := st.standin, st.d, st.srv, st.client
	// The problems' questions, drawn once: each arm delegates the same.
	w := work{questions: make([][]string, o.episodes), answers: make([]string, o.episodes)}
	for i := range o.episodes {
		p, err := d.Problem(int64(i))
		if err != nil {
			return err
		}
		for _, s := range p.Steps {
			w.questions[i] = append(w.questions[i], s.Expr())
		}
		w.answers[i] = fmt.Sprint(p.Answer)
	}
	var sizes []episodeSizes // the floors', recorded below
	host := strings.TrimPrefix(c.BaseURL, "http://")
	arms := []arm{
		{"in-process", "", func(context.Context) (openenv.Stepper, error) { return inProcess(d) }},
		{"websocket", host, func(ctx context.Context) (openenv.Stepper, error) { return c.Dial(ctx) }},
		{"websocket-floor", "", func(ctx context.Context) (openenv.Stepper, error) {
			return openFloor(ctx, d, st.floor, sizes, c.HTTP, false)
		}},
		{"http-mcp", host, func(context.Context) (openenv.Stepper, error) { return c.OpenMCP(), nil }},
		{"http-mcp-floor", "", func(ctx context.Context) (openenv.Stepper, error) {
			return openFloor(ctx, d, st.floor, sizes, c.HTTP, true)
		}},
	}
	arms, err = pick(arms, o.only)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(arms, func(a arm) bool { return strings.HasSuffix(a.name, "-floor") }) {
		if sizes, err = record(d, o.conc, w, sv); err != nil {
			return err
		}
		size := 0
		for _, es := range sizes {
			for _, rt := range slices.Concat(es.ws, es.mcp) {
				size = max(size, rt.req, rt.resp)
			}
		}
		if st.floor, err = startFloor(o.conc, size+20); err != nil { // 20: room for an episode number's digits
			return err
		}
		st.closers = append([]func() error{st.floor.close}, st.closers...)
		for i := range arms {
			if strings.HasSuffix(arms[i].name, "-floor") {
				arms[i].host = st.floor.addr
			}
		}
	}
	where := "in a child process, its CPU not counted"
	if o.standinHere {
		where = "in this process, its CPU counted"
	}
	fmt.Printf("%d episodes an arm and round, %d workers, %d rounds, stand-in %s, latency %v, GOMAXPROCS %d, %d CPUs, load average %s\n\n",
		o.episodes, o.conc, o.rounds, where, o.latency, runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAverage())
	// One untimed round warms the connections, the heap and the caches.
	warm := work{questions: w.questions[:min(o.episodes, 4*o.conc)], answers: w.answers[:min(o.episodes, 4*o.conc)]}
	for _, a := range arms {
		if _, err := measure(a, o.conc, warm, sv, st.wire); err != nil {
			return fmt.Errorf("warm-up %s: %w", a.name, err)
		}
	}
	if o.profile != "" {
		f, err := os.Create(o.profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rounds, err := runRounds(arms, o, w, sv, st.wire)
	if err != nil {
		return err
	}
	printSummary(arms, rounds)
	printFloors(arms, rounds)
	stats, err := sv.stats()
	if err != nil {
		return err
	}
	fmt.Printf("\nstand-in: %d requests, %d bad; sessions open at the end: %d; load average %s\n", stats.Requests, stats.BadRequests, srv.Active(), loadAverage())
	return nil
}

// pick returns the in-process arm and those named in only, a
// comma-separated list; all when only is empty.
func pick(arms []arm, only string) ([]arm, error) {
	if only == "" {
		return arms, nil
	}
	picked := arms[:1]
	for name := range strings.SplitSeq(only, ",") {
		i := slices.IndexFunc(arms, func(a arm) bool { return a.name == strings.TrimSpace(name) })
		if i <= 0 {
			return nil, fmt.Errorf("-arm %q: want websocket, websocket-floor, http-mcp or http-mcp-floor", name)
		}
		picked = append(picked, arms[i])
	}
	return picked, nil
}

// record runs every episode of w in process once, untimed, and returns
// its messages' sizes on each transport, by seed.
func record(d *openenv.Delegation, conc int, w work, sv *subagent) ([]episodeSizes, error) {
	start := time.Now()
	sizes := make([]episodeSizes, len(w.answers))
	rec := arm{name: "record", open: func(context.Context) (openenv.Stepper, error) {
		l, err := inProcess(d)
		return &recorder{local: l, sizes: sizes}, err
	}}
	if _, err := measure(rec, conc, w, sv, nil); err != nil {
		return nil, fmt.Errorf("record the messages' sizes: %w", err)
	}
	fmt.Printf("recorded the messages' sizes of %d episodes for the floors in %v\n", len(sizes), time.Since(start).Round(time.Millisecond))
	return sizes, nil
}

// stack is what the arms run on: the stand-in, the delegation
// environment on it, the environment's server on loopback and a client.
// floor is the floor arms' server, once started.
type stack struct {
	standin *subagent
	d       *openenv.Delegation
	srv     *openenv.Server
	client  *openenv.Client
	floor   *floor
	wire    *wire
	closers []func() error // in the order to call
}

func (st *stack) close() {
	for _, c := range st.closers {
		_ = c() // the run is over; a failed close changes no figure
	}
}

// start starts the stand-in and the environment's server behind the edge.
func start(o options) (*stack, error) {
	st := &stack{}
	sv, err := startSubagent(o)
	if err != nil {
		return nil, err
	}
	st.standin, st.closers = sv, []func() error{sv.close}
	oc := openai.DefaultConfig()
	oc.BaseURL, oc.Model, oc.MaxRetries = sv.url, "standin", 0
	sub, err := openai.New(oc)
	if err == nil {
		st.d, err = openenv.NewDelegation(openenv.DelegationConfig{Subagent: sub, MaxSteps: 64})
	}
	if err != nil {
		st.close()
		return nil, err
	}
	ec := openenv.DefaultConfig()
	ec.New, ec.Name, ec.Metadata, ec.Schema, ec.Tools = st.d.New, "delegation", st.d.Metadata(), st.d.Schema(), st.d.Tools()
	ec.MaxSessions, ec.MaxMCPEpisodes = 2*o.conc, o.episodes
	st.srv, err = openenv.NewServer(ec)
	if err != nil {
		st.close()
		return nil, err
	}
	st.closers = append([]func() error{st.srv.Close}, st.closers...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.close()
		return nil, err
	}
	hs := edge.Server(edge.Config{}.Handler(st.srv), edge.DefaultTimeouts(), slog.New(slog.DiscardHandler), slog.LevelWarn)
	go func() { _ = hs.Serve(ln) }() // ends at hs.Close
	st.closers = append([]func() error{hs.Close}, st.closers...)
	st.wire = &wire{}
	var dialer net.Dialer // the Transport's default
	tr := &http.Transport{MaxIdleConnsPerHost: o.conc, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return st.wire.count(conn, addr), nil
	}}
	st.client = &openenv.Client{BaseURL: "http://" + ln.Addr().String(), HTTP: &http.Client{Transport: tr}}
	return st, nil
}

// subagent is the stand-in the episodes call, in this process or in a
// child process. A remote API's CPU is not the episode's: by default the
// stand-in runs in a child, whose CPU the run does not count.
type subagent struct {
	url   string
	stats func() (childStats, error)
	close func() error
}

// childStats are the stand-in's counters and, in a child, its CPU time.
type childStats struct {
	standin.Stats
	CPU time.Duration `json:"cpu_ns"` // zero in this process, where the run's CPU holds it
}

// startSubagent starts the stand-in where o says.
func startSubagent(o options) (*subagent, error) {
	if o.standinHere {
		sc := standin.DefaultConfig()
		sc.Latency = o.latency
		sv, err := standin.New(sc)
		if err != nil {
			return nil, err
		}
		if err := sv.Start("127.0.0.1:0"); err != nil {
			return nil, err
		}
		return &subagent{url: sv.URL(), stats: func() (childStats, error) { return childStats{Stats: sv.Stats()}, nil }, close: sv.Close}, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-serve-standin", "-latency", o.latency.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the stand-in: %w", err)
	}
	stop := func() error {
		stdin.Close() // the child serves until its stdin closes
		return cmd.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start the stand-in: %w", err), stop())
	}
	url := strings.TrimSpace(line)
	hc := &http.Client{}
	stats := func() (childStats, error) {
		var st childStats
		resp, err := hc.Get(strings.TrimSuffix(url, "/v1") + "/stats")
		if err != nil {
			return st, fmt.Errorf("stand-in stats: %w", err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return st, fmt.Errorf("stand-in stats: %w", err)
		}
		return st, nil
	}
	return &subagent{url: url, stats: stats, close: stop}, nil
}

// serveChild serves the stand-in for a parent run: its URL on stdout,
// then the API and GET /stats until stdin closes.
func serveChild(latency time.Duration) error {
	sc := standin.DefaultConfig()
	sc.Latency = latency
	sv, err := standin.New(sc)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/", sv)
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(childStats{Stats: sv.Stats(), CPU: cpuTime()}) // a failed write means the parent went away
	})
	if err := sv.StartHandler("127.0.0.1:0", mux); err != nil {
		return err
	}
	fmt.Println(sv.URL())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it or exits
	return sv.Close()
}

// runRounds runs every arm o.rounds times, interleaved, and prints each
// round. Round r starts with arm r mod len(arms), so that no arm always
// runs first. It fails when an arm's sub-agent calls or rewards differ
// from the in-process arm's.
func runRounds(arms []arm, o options, w work, sv *subagent, wr *wire) ([][]result, error) {
	fmt.Printf("| round | arm | steps | steps/s | cores busy | step p50 | step p99 | CPU/episode | CPU ratio | allocs/episode | wire B/episode | load after |\n|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	var rounds [][]result // by round, then arm
	for r := range o.rounds {
		res := make([]result, len(arms))
		for k := range arms {
			i := (r + k) % len(arms)
			m, err := measure(arms[i], o.conc, w, sv, wr)
			if err != nil {
				return nil, fmt.Errorf("round %d: %s: %w", r+1, arms[i].name, err)
			}
			res[i] = m
		}
		for i, m := range res[1:] {
			if m.calls != res[0].calls || !slices.Equal(m.rewards, res[0].rewards) {
				return nil, fmt.Errorf("round %d: %s made %d sub-agent calls, in process %d; rewards equal: %v",
					r+1, arms[i+1].name, m.calls, res[0].calls, slices.Equal(m.rewards, res[0].rewards))
			}
		}
		for _, m := range res {
			fmt.Printf("| %d | %s | %d | %.0f | %.2f | %v | %v | %v | %.2f | %d | %d | %s |\n", r+1, m.name, m.steps, m.stepsPerSecond(), m.cores(),
				m.quantile(0.5).Round(time.Microsecond), m.quantile(0.99).Round(time.Microsecond),
				m.cpuPerEpisode().Round(time.Microsecond), ratio(m, res[0]), m.allocsPerEpisode(), m.wirePerEpisode(), m.load)
		}
		rounds = append(rounds, res)
	}
	return rounds, nil
}

// ratio is r's CPU per episode over base's.
func ratio(r, base result) float64 {
	return float64(r.cpuPerEpisode()) / float64(base.cpuPerEpisode())
}

// printSummary prints each arm's medians over the rounds, with the range
// of its CPU ratio, and the verdicts on the targets.
func printSummary(arms []arm, rounds [][]result) {
	fmt.Printf("\nMedians over %d rounds (CPU ratio: median of the rounds' ratios, min to max):\n\n", len(rounds))
	fmt.Printf("| arm | steps/s | max steps/s | cores busy | CPU/episode | CPU ratio | allocs/episode |\n|---|--:|--:|--:|--:|---|--:|\n")
	var verdicts []string
	for i, a := range arms {
		var sps, cores, cpu, ratios, allocs []float64
		for _, res := range rounds {
			m := res[i]
			sps, cores, cpu = append(sps, m.stepsPerSecond()), append(cores, m.cores()), append(cpu, float64(m.cpuPerEpisode()))
			ratios, allocs = append(ratios, ratio(m, res[0])), append(allocs, float64(m.allocsPerEpisode()))
		}
		fmt.Printf("| %s | %.0f | %.0f | %.2f | %v | %.2f (%.2f to %.2f) | %.0f |\n", a.name, median(sps), slices.Max(sps), median(cores),
			time.Duration(median(cpu)).Round(time.Microsecond), median(ratios), slices.Min(ratios), slices.Max(ratios), median(allocs))
		if i == 0 {
			continue
		}
		verdicts = append(verdicts, fmt.Sprintf("%s: %s %.0f steps/s (target >= %d); %s CPU per episode %.2fx in-process (target <= %.1fx)", a.name,
			verdict(median(sps) >= minStepsPerSecond), median(sps), minStepsPerSecond,
			verdict(median(ratios) <= maxCPURatio), median(ratios), maxCPURatio))
	}
	fmt.Printf("\n%s\n", strings.Join(verdicts, "\n"))
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// median is the middle of v, or the mean of the two middle values.
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// measure runs every episode of w on the arm from conc workers. wr,
// when set, counts the bytes on the arm's connections.
func measure(a arm, conc int, w work, sv *subagent, wr *wire) (result, error) {
	ctx := context.Background()
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	errs := make([]error, conc)
	rewards := make([]float64, len(w.answers))
	steps := atomic.Int64{}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	st0, err := sv.stats()
	if err != nil {
		return result{}, err
	}
	wire0 := wr.bytes(a.host)
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	for wk := range conc {
		wg.Go(func() {
			s, err := a.open(ctx)
			if err != nil {
				errs[wk] = err
				return
			}
			defer s.Close()
			var mine []time.Duration
			for {
				i := int(next.Add(1) - 1)
				if i >= len(w.answers) {
					break
				}
				n, reward, err := episode(ctx, s, int64(i), w.questions[i], w.answers[i], &mine)
				steps.Add(int64(n))
				if err != nil {
					errs[wk] = fmt.Errorf("episode %d: %w", i, err)
					return
				}
				rewards[i] = reward
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	wall := time.Since(start)
	cpu := cpuTime() - cpu0
	wire := wr.bytes(a.host) - wire0
	runtime.ReadMemStats(&m1)
	st1, err := sv.stats()
	if err != nil {
		return result{}, err
	}
	calls, subCPU := st1.Requests-st0.Requests, st1.CPU-st0.CPU
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	slices.Sort(lat)
	return result{name: a.name, episodes: len(w.answers), steps: int(steps.Load()), wall: wall, cpu: cpu, allocs: m1.Mallocs - m0.Mallocs,
		calls: calls, wire: wire, subCPU: subCPU, rewards: rewards, lat: lat, load: loadAverage()}, nil
}

// episode resets seed and runs its steps, timing each; it returns the
// steps it ran and the last reward.
func episode(ctx context.Context, s openenv.Stepper, seed int64, questions []string, answer string, lat *[]time.Duration) (int, float64, error) {
	if _, err := s.Reset(ctx, openenv.ResetRequest{Seed: &seed}); err != nil {
		return 0, 0, err
	}
	n := 0
	step := func(tool string, args map[string]string) (openenv.Result, error) {
		b, _ := json.Marshal(args) // strings always encode
		t := time.Now()
		res, err := s.Step(ctx, openenv.ToolAction{Type: openenv.ActionCallTool, ToolName: tool, Arguments: b})
		*lat = append(*lat, time.Since(t))
		n++
		return res, err
	}
	for _, q := range questions {
		res, err := step(openenv.ToolDelegate, map[string]string{"question": q})
		if err != nil {
			return n, 0, err
		}
		if res.Done {
			return n, 0, errors.New("done before the answer")
		}
	}
	res, err := step(openenv.ToolAnswer, map[string]string{"answer": answer})
	switch {
	case err != nil:
		return n, 0, err
	case !res.Done || res.Reward == nil:
		return n, 0, errors.New("not done, or no reward, after the answer")
	}
	return n, *res.Reward, nil
}

// loadAverage is the machine's load over 1, 5 and 15 minutes, as Linux
// reports it; "unknown" elsewhere. The CPU ratio moves with it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// local runs an in-process environment as a Stepper: the action encoded,
// as Environment.Step takes it, and the observation not.
type local struct {
	env openenv.Environment
}

func inProcess(d *openenv.Delegation) (*local, error) {
	env, err := d.New()
	if err != nil {
		return nil, err
	}
	return &local{env: env}, nil
}

func (l *local) Reset(ctx context.Context, req openenv.ResetRequest) (openenv.Result, error) {
	obs, err := l.env.Reset(ctx, req.Seed, "")
	return openenv.Result{Reward: obs.Reward, Done: obs.Done}, err
}

func (l *local) Step(ctx context.Context, action any) (openenv.Result, error) {
	b, err := json.Marshal(action)
	if err != nil {
		return openenv.Result{}, err
	}
	obs, err := l.env.Step(ctx, b)
	return openenv.Result{Reward: obs.Reward, Done: obs.Done}, err
}

func (l *local) State(context.Context) (json.RawMessage, error) {
	return json.Marshal(l.env.State())
}

func (l *local) Close() error { return l.env.Close() }

// wire counts the bytes the clients send and receive, by server.
// A connection counts its own, so that workers do not share a counter.
type wire struct {
	mu    sync.Mutex
	conns []*countedConn
}

// countedConn is a client's connection to addr that counts its bytes.
type countedConn struct {
	net.Conn
	addr string
	n    atomic.Int64
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// count returns conn, to addr, counting its bytes.
func (wr *wire) count(conn net.Conn, addr string) net.Conn {
	c := &countedConn{Conn: conn, addr: addr}
	wr.mu.Lock()
	wr.conns = append(wr.conns, c)
	wr.mu.Unlock()
	return c
}

// bytes is the bytes so far on the connections to addr; 0 for a nil wr
// or an empty addr.
func (wr *wire) bytes(addr string) int64 {
	if wr == nil || addr == "" {
		return 0
	}
	wr.mu.Lock()
	defer wr.mu.Unlock()
	var n int64
	for _, c := range wr.conns {
		if c.addr == addr {
			n += c.n.Load()
		}
	}
	return n
}

// printFloors prints, for each transport whose floor arm ran, what the
// floor adds to the in-process episode, what ours adds, and how much of
// ours sits above the floor. Each figure is the median over the rounds
// of a difference within a round. It then says whether the targets are
// within reach above the floor.
func printFloors(arms []arm, rounds [][]result) {
	at := func(name string) int { return slices.IndexFunc(arms, func(a arm) bool { return a.name == name }) }
	us := func(ns float64) time.Duration { return time.Duration(ns).Round(time.Microsecond) }
	var c0 []float64 // the in-process CPU per episode
	for _, res := range rounds {
		c0 = append(c0, float64(res[0].cpuPerEpisode()))
	}
	var lines []string
	for _, t := range []string{"websocket", "http-mcp"} {
		ours, fl := at(t), at(t+"-floor")
		if fl < 0 {
			continue
		}
		if len(lines) == 0 {
			fmt.Printf("\nFloors: the in-process episode plus a bare round trip of the real sizes for each reset and step.\n")
			fmt.Printf("Medians over the rounds of each round's differences with in-process; \"above\" is ours less the floor.\n\n")
			fmt.Printf("| transport | round trips/episode | wire B/episode floor (ours) | floor adds/episode | per round trip | floor CPU ratio | floor steps/s | ours adds/episode | ours above the floor | step p50 added floor (ours) |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		}
		var trips, wireF, addF, ratioF, spsF, p50F, wireO, addO, above, p50O []float64
		for _, res := range rounds {
			base, f := res[0], res[fl]
			trips, wireF = append(trips, f.tripsPerEpisode()), append(wireF, float64(f.wirePerEpisode()))
			addF = append(addF, float64(f.cpuPerEpisode()-base.cpuPerEpisode()))
			ratioF, spsF = append(ratioF, ratio(f, base)), append(spsF, f.stepsPerSecond())
			p50F = append(p50F, float64(f.quantile(0.5)-base.quantile(0.5)))
			if ours >= 0 {
				o := res[ours]
				wireO = append(wireO, float64(o.wirePerEpisode()))
				addO = append(addO, float64(o.cpuPerEpisode()-base.cpuPerEpisode()))
				above = append(above, float64(o.cpuPerEpisode()-f.cpuPerEpisode()))
				p50O = append(p50O, float64(o.quantile(0.5)-base.quantile(0.5)))
			}
		}
		oursCell := func(v []float64, f func(float64) string) string {
			if len(v) == 0 {
				return "–"
			}
			return f(median(v))
		}
		dur := func(v float64) string { return us(v).String() }
		fmt.Printf("| %s | %.2f | %.0f (%s) | %v | %v | %.2f | %.0f | %s | %s | %v (%s) |\n", t, median(trips), median(wireF),
			oursCell(wireO, func(v float64) string { return fmt.Sprintf("%.0f", v) }), us(median(addF)), us(median(addF)/median(trips)),
			median(ratioF), median(spsF), oursCell(addO, dur), oursCell(above, dur), us(median(p50F)), oursCell(p50O, dur))
		room := (maxCPURatio-1)*median(c0) - median(addF) // CPU an implementation may add above the floor
		reach := fmt.Sprintf("1.2x is within reach: it leaves %v an episode above the floor", us(room))
		if room <= 0 {
			reach = fmt.Sprintf("1.2x is out of reach on this stack: the floor alone is %v an episode over it", us(-room))
		}
		line := fmt.Sprintf("%s floor: at least %v CPU an episode added, %.2fx in-process; %s", t, us(median(addF)), median(ratioF), reach)
		if len(above) > 0 {
			line += fmt.Sprintf("; ours adds %v above the floor", us(median(above)))
			if median(addO) > 0 {
				line += fmt.Sprintf(", %.0f%% of the %v it adds", 100*median(above)/median(addO), us(median(addO)))
			}
		}
		sps := "within reach"
		if median(spsF) < minStepsPerSecond {
			sps = "out of reach at this load"
		}
		lines = append(lines, line, fmt.Sprintf("%s floor: %.0f steps/s (best %.0f); %d steps/s is %s", t, median(spsF), slices.Max(spsF), minStepsPerSecond, sps))
	}
	if len(lines) > 0 {
		fmt.Printf("\n%s\n", strings.Join(lines, "\n"))
	}
}
