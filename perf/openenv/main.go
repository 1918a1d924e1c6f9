// Command openenv measures what serving the delegation environment over OpenEnv's protocol costs.
// It compares that with running the same episodes in process.
// The sub-agent is the stand-in API of package standin on loopback, the same for every arm.
// Each arm runs episodes of seeds 0 to N-1 from -concurrency workers.
// An episode delegates every step of the problem, then answers.
// The arms are in process, over the WebSocket with one session a worker reset per episode,
// and over HTTP MCP with one MCP session a worker.
// It prints each arm's steps per second, step latency p50 and p99, and what the transport adds to p50.
// It also prints CPU time and heap allocations per episode, the stand-in's included.
// Allocations do not depend on the machine's load; CPU time does.
// The targets are at least 5,000 steps/s on each transport
// and at most 1.2× the in-process CPU per episode, PASS or MISS each.
//
//	go run ./perf/openenv -episodes 2000 -concurrency 32
//	go run ./perf/openenv -arm websocket -cpuprofile /tmp/ws.pprof
//	go run ./perf/openenv -arm websocket -memprofile /tmp/ws.mem
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
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
	episodes := flag.Int("episodes", 2000, "episodes per arm")
	conc := flag.Int("concurrency", 32, "workers running episodes at once")
	latency := flag.Duration("latency", 0, "the stand-in's latency per sub-agent call")
	only := flag.String("arm", "", "run in-process and this arm only (websocket or http-mcp); default all")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the transport arms to this file")
	memProfile := flag.String("memprofile", "", "write the allocations of the whole run to this file (go tool pprof -sample_index=alloc_objects)")
	flag.Parse()
	if *memProfile != "" {
		runtime.MemProfileRate = 4096 // finer than the default, for allocation counts
	}
	if err := run(*episodes, *conc, *latency, *only, *profile); err != nil {
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
// stepper: an in-process environment, a WebSocket session or an MCP
// session.
type arm struct {
	name string
	open func(ctx context.Context) (openenv.Stepper, error)
}

// result is one arm's figures.
type result struct {
	name     string
	episodes int
	steps    int
	wall     time.Duration
	cpu      time.Duration
	allocs   uint64          // heap objects allocated, the stand-in's included
	lat      []time.Duration // every step's, sorted
}

func (r result) stepsPerSecond() float64 { return float64(r.steps) / r.wall.Seconds() }
func (r result) cpuPerEpisode() time.Duration {
	return r.cpu / time.Duration(r.episodes)
}
func (r result) allocsPerEpisode() uint64         { return r.allocs / uint64(r.episodes) }
func (r result) quantile(q float64) time.Duration { return r.lat[int(q*float64(len(r.lat)-1))] }

func run(episodes, conc int, latency time.Duration, only, profile string) error {
	if episodes <= 0 || conc <= 0 {
		return fmt.Errorf("-episodes %d and -concurrency %d must be positive", episodes, conc)
	}
	sc := standin.DefaultConfig()
	sc.Latency = latency
	sv, err := standin.New(sc)
	if err != nil {
		return err
	}
	if err := sv.Start("127.0.0.1:0"); err != nil {
		return err
	}
	defer sv.Close()
	oc := openai.DefaultConfig()
	oc.BaseURL, oc.Model, oc.MaxRetries = sv.URL(), "standin", 0
	sub, err := openai.New(oc)
	if err != nil {
		return err
	}
	d, err := openenv.NewDelegation(openenv.DelegationConfig{Subagent: sub, MaxSteps: 64})
	if err != nil {
		return err
	}
	ec := openenv.DefaultConfig()
	ec.New, ec.Name, ec.Metadata, ec.Schema, ec.Tools = d.New, "delegation", d.Metadata(), d.Schema(), d.Tools()
	ec.MaxSessions, ec.MaxMCPEpisodes = 2*conc, episodes
	srv, err := openenv.NewServer(ec)
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := edge.Server(edge.Config{}.Handler(srv), edge.DefaultTimeouts(), slog.New(slog.DiscardHandler), slog.LevelWarn)
	go func() { _ = hs.Serve(ln) }() // ends at Close below
	defer hs.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: conc}
	c := &openenv.Client{BaseURL: "http://" + ln.Addr().String(), HTTP: &http.Client{Transport: tr}}

	// The problems' questions, drawn once: each arm delegates the same.
	questions := make([][]string, episodes)
	answers := make([]string, episodes)
	for i := range episodes {
		p, err := d.Problem(int64(i))
		if err != nil {
			return err
		}
		for _, s := range p.Steps {
			questions[i] = append(questions[i], s.Expr())
		}
		answers[i] = fmt.Sprint(p.Answer)
	}
	arms := []arm{
		{"in-process", func(context.Context) (openenv.Stepper, error) { return inProcess(d) }},
		{"websocket", func(ctx context.Context) (openenv.Stepper, error) { return c.Dial(ctx) }},
		{"http-mcp", func(context.Context) (openenv.Stepper, error) { return c.OpenMCP(), nil }},
	}
	fmt.Printf("%d episodes an arm, %d workers, stand-in latency %v, GOMAXPROCS %d, %d CPUs, load average %s\n\n", episodes, conc, latency, runtime.GOMAXPROCS(0), runtime.NumCPU(), loadAverage())
	var results []result
	profiling := false // from the first transport arm run to the end
	for i, a := range arms {
		if i > 0 && only != "" && a.name != only {
			continue
		}
		if i > 0 && profile != "" && !profiling {
			profiling = true
			f, err := os.Create(profile)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		r, err := measure(a, conc, questions, answers)
		if err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
		results = append(results, r)
	}
	base := results[0]
	fmt.Printf("| arm | steps | steps/s | step p50 | step p99 | added p50 | CPU/episode | CPU ratio | allocs/episode |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range results {
		fmt.Printf("| %s | %d | %.0f | %v | %v | %v | %v | %.2f | %d |\n", r.name, r.steps, r.stepsPerSecond(), r.quantile(0.5).Round(time.Microsecond),
			r.quantile(0.99).Round(time.Microsecond), (r.quantile(0.5) - base.quantile(0.5)).Round(time.Microsecond),
			r.cpuPerEpisode().Round(time.Microsecond), float64(r.cpuPerEpisode())/float64(base.cpuPerEpisode()), r.allocsPerEpisode())
	}
	fmt.Println()
	for _, r := range results[1:] {
		verdict := func(ok bool) string {
			if ok {
				return "PASS"
			}
			return "MISS"
		}
		fmt.Printf("%s: %s %.0f steps/s (target >= %d); %s CPU per episode %.2fx in-process (target <= %.1fx)\n", r.name,
			verdict(r.stepsPerSecond() >= minStepsPerSecond), r.stepsPerSecond(), minStepsPerSecond,
			verdict(float64(r.cpuPerEpisode()) <= maxCPURatio*float64(base.cpuPerEpisode())), float64(r.cpuPerEpisode())/float64(base.cpuPerEpisode()), maxCPURatio)
	}
	st := sv.Stats()
	fmt.Printf("\nstand-in: %d requests, %d bad; sessions open at the end: %d; load average %s\n", st.Requests, st.BadRequests, srv.Active(), loadAverage())
	return nil
}

// measure runs every episode of the arm from conc workers.
func measure(a arm, conc int, questions [][]string, answers []string) (result, error) {
	ctx := context.Background()
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	errs := make([]error, conc)
	steps := atomic.Int64{}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range conc {
		wg.Go(func() {
			s, err := a.open(ctx)
			if err != nil {
				errs[w] = err
				return
			}
			defer s.Close()
			var mine []time.Duration
			for {
				i := int(next.Add(1) - 1)
				if i >= len(answers) {
					break
				}
				n, err := episode(ctx, s, int64(i), questions[i], answers[i], &mine)
				steps.Add(int64(n))
				if err != nil {
					errs[w] = fmt.Errorf("episode %d: %w", i, err)
					return
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	wall := time.Since(start)
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&m1)
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return result{name: a.name, episodes: len(answers), steps: int(steps.Load()), wall: wall, cpu: cpu, allocs: m1.Mallocs - m0.Mallocs, lat: lat}, nil
}

// episode resets seed and runs its steps, timing each; it returns the
// steps it ran.
func episode(ctx context.Context, s openenv.Stepper, seed int64, questions []string, answer string, lat *[]time.Duration) (int, error) {
	if _, err := s.Reset(ctx, openenv.ResetRequest{Seed: &seed}); err != nil {
		return 0, err
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
			return n, err
		}
		if res.Done {
			return n, errors.New("done before the answer")
		}
	}
	res, err := step(openenv.ToolAnswer, map[string]string{"answer": answer})
	if err != nil {
		return n, err
	}
	if !res.Done {
		return n, errors.New("not done after the answer")
	}
	return n, nil
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

func inProcess(d *openenv.Delegation) (openenv.Stepper, error) {
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
