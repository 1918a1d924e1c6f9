// Command gateway measures what `delegate gateway` adds to an agent's calls.
// The same chat completions run directly against a backend, through a bare forwarder
// (one HTTP hop and nothing else: the floor of any gateway) and through the gateway, interleaved.
// The forwarder is this program again and the gateway the delegate binary, each a child process.
// It prints the CPU per call of each path, counting a child's process with this one.
// It also prints the added p50 and p99 latency.
// The targets are at most 1.1 times the CPU and 2 ms of added p99, PASS or MISS.
//
// Three backends, by -backend. standin is package standin's server, in this process, answering at once.
// Its run also prints the gateway's memory per session and per call, and the sessions per second recorded and grouped.
// model is `delegate serve` on the shipped router and solver, a child process whose CPU counts on every path.
// Its workload is the calls the route strategy makes on world problems, greedily (model.go).
// inprocess runs that workload against delegate serve and against a gateway that hosts the same models
// in its own process, with no extra hop (inprocess.go).
// Each path first runs the workload once unmeasured (-warmup), so that no child's cold start is in its figures.
// With -control, inprocess puts a second delegate serve in the gateway's place: the ratio is then the program's own bias.
//
// Usage: go run ./perf/gateway -bin ./delegate [-backend model|inprocess [-control]] [-warmup N]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/delegatelab/delegate/standin"
)

const token = "perf-gateway-token"

func main() {
	bin := flag.String("bin", "./delegate", "the delegate binary to measure")
	calls := flag.Int("calls", 2000, "with -backend standin: calls per repetition and path")
	reps := flag.Int("reps", 5, "repetitions of each path, interleaved")
	warmup := flag.Int("warmup", 1, "unmeasured repetitions of each path before the measured ones, so that no path pays its cold start in its figures")
	control := flag.Bool("control", false, "with -backend inprocess: a second delegate serve in the gateway's place, to measure the program's own bias")
	workers := flag.Int("workers", 4, "concurrent clients")
	perSession := flag.Int("session-calls", 10, "with -backend standin: calls of one session before it ends")
	forwardTo := flag.String("forward-to", "", "be the bare forwarder child: forward every request to this URL")
	backend := flag.String("backend", "standin", "the backend: standin (answers at once, in this process), model (delegate serve on the shipped router) or inprocess (serve against a gateway hosting the same models)")
	serveConfig := flag.String("serve-config", "examples/world.yaml", "with -backend model or inprocess: the config delegate serve (and the inprocess gateway) runs")
	problems := flag.Int("problems", 24, "with -backend model or inprocess: world problems, one session each per repetition and path")
	seed := flag.Uint64("seed", 1, "with -backend model or inprocess: seed of the world problems")
	flag.Parse()
	if *forwardTo != "" {
		if err := serveForwarder(*forwardTo, *workers); err != nil {
			fmt.Fprintln(os.Stderr, "perf/gateway:", err)
			os.Exit(1)
		}
		return
	}
	var err error
	switch *backend {
	case "standin":
		err = run(*bin, *calls, *reps, *warmup, *workers, *perSession)
	case "model", "inprocess":
		m := modelRun{bin: *bin, config: *serveConfig, problems: *problems, seed: *seed, reps: *reps, warmup: *warmup, workers: *workers, control: *control}
		if *backend == "model" {
			err = runModel(m)
		} else {
			err = runInProcess(m)
		}
	default:
		err = fmt.Errorf("-backend %q: want standin, model or inprocess", *backend)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "perf/gateway:", err)
		os.Exit(1)
	}
}

// body is every call's request: a short conversation, as an agent's.
var body = []byte(`{"model":"standin","messages":[{"role":"system","content":"Solve or delegate."},{"role":"user","content":"Dot has 91 jars of 23 coins. Gus has 19 jars of 83 coins. Gus gets 49 more. How many coins do they have in all?"}],"temperature":0}`)

func run(bin string, calls, reps, warmup, workers, perSession int) error {
	sb, err := standin.New(standin.DefaultConfig())
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	backend := &http.Server{Handler: sb}
	go backend.Serve(ln)
	defer backend.Close()
	dir, err := os.MkdirTemp("", "perf-gateway")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	config := filepath.Join(dir, "gateway.yaml")
	yaml := fmt.Sprintf("models:\n  sb:\n    base_url: http://%s/v1\n    model: standin\n    price: {input: 1, output: 5}\n", ln.Addr())
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		return err
	}
	// The default bound is 1,000 calls a session. The memory figure
	// records memoryCalls in one session; at 2.6 KiB a call, 1 GiB
	// holds a session of 100,000.
	args := []string{"sb", "--max-session-calls", strconv.Itoa(max(perSession, memoryCalls)), "--max-session-bytes", "1073741824"}
	gw, err := startGateway(bin, config, filepath.Join(dir, "out"), args...)
	if err != nil {
		return err
	}
	defer gw.stop()
	fmt.Printf("machine: %d CPUs, %s; load average %s\n", runtime.NumCPU(), runtime.Version(), loadavg())
	fmt.Printf("backend: standin\n")
	fmt.Printf("workload: %d calls × %d repetitions per path (after %d unmeasured), %d clients, sessions of %d calls (reward at the end), stand-in answering at once\n",
		calls, reps, warmup, workers, perSession)

	// The floor: a bare forwarder, one HTTP hop and nothing else, in a
	// child process as the gateway is.
	direct := "http://" + ln.Addr().String() + "/v1/chat/completions"
	fwd, err := startForwarder(direct, workers)
	if err != nil {
		return err
	}
	defer fwd.stop()
	forwarded := fwd.base + "/v1/chat/completions"

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers * 2}}
	const viaDirect, viaForwarder, viaGateway = 0, 1, 2
	var lats [3][]time.Duration
	var cpus [3]time.Duration
	var gOwn, fOwn time.Duration
	pass := func(path int) ([]time.Duration, error) {
		switch path {
		case viaGateway:
			return gatewayLoad(client, gw.base, calls, workers, perSession)
		case viaForwarder:
			return load(client, func(int) string { return forwarded }, calls, workers)
		}
		return load(client, func(int) string { return direct }, calls, workers)
	}
	for range warmup {
		for path := range lats {
			if _, err := pass(path); err != nil {
				return err
			}
		}
	}
	for r := range reps {
		paths := []int{viaDirect, viaForwarder, viaGateway}
		if r%2 == 1 {
			slices.Reverse(paths)
		}
		for _, path := range paths {
			self0, gw0, fwd0 := selfCPU(), gw.cpu(), fwd.cpu()
			lat, err := pass(path)
			if err != nil {
				return err
			}
			self, own, fwdOwn := selfCPU()-self0, gw.cpu()-gw0, fwd.cpu()-fwd0
			lats[path], cpus[path] = append(lats[path], lat...), cpus[path]+self
			switch path {
			case viaGateway:
				cpus[path] += own
				gOwn += own
			case viaForwarder:
				cpus[path] += fwdOwn
				fOwn += fwdOwn
			}
		}
	}
	n := time.Duration(calls * reps)
	dCPU, fCPU, gCPU := cpus[viaDirect], cpus[viaForwarder], cpus[viaGateway]
	fmt.Printf("CPU per call: direct (client+backend) %v; through a bare forwarder %v (its own %v): %.2f×; through the gateway %v (its own %v): %.2f×\n",
		(dCPU / n).Round(time.Microsecond), (fCPU / n).Round(time.Microsecond), (fOwn / n).Round(time.Microsecond), float64(fCPU)/float64(dCPU),
		(gCPU / n).Round(time.Microsecond), (gOwn / n).Round(time.Microsecond), float64(gCPU)/float64(dCPU))
	dLat, fLat, gLat := lats[viaDirect], lats[viaForwarder], lats[viaGateway]
	dp50, dp99, gp50, gp99 := pct(dLat, 50), pct(dLat, 99), pct(gLat, 50), pct(gLat, 99)
	fmt.Printf("latency: direct p50 %v p99 %v; through the forwarder p50 %v p99 %v; through the gateway p50 %v p99 %v; gateway's added p50 %v p99 %v\n",
		dp50, dp99, pct(fLat, 50), pct(fLat, 99), gp50, gp99, gp50-dp50, gp99-dp99)
	fmt.Printf("%s CPU ≤ 1.1× direct (%.2f×)\n", verdict(float64(gCPU) <= 1.1*float64(dCPU)), float64(gCPU)/float64(dCPU))
	fmt.Printf("%s added p99 ≤ 2 ms (%v)\n", verdict(gp99-dp99 <= 2*time.Millisecond), gp99-dp99)

	// Memory: open sessions without calls, then calls in one session.
	const sessions, recorded = 2000, memoryCalls
	rss0 := gw.rss()
	for range sessions {
		if _, err := newSession(client, gw.base, "mem"); err != nil {
			return err
		}
	}
	rss1 := gw.rss()
	fmt.Printf("memory per open session: %.1f KiB (RSS %d → %d MiB over %d sessions)\n", float64(rss1-rss0)/1024/sessions, rss0>>20, rss1>>20, sessions)
	id, err := newSession(client, gw.base, "calls")
	if err != nil {
		return err
	}
	if _, err := load(client, func(int) string { return gw.base + "/s/" + id + "/v1/chat/completions" }, recorded, workers); err != nil {
		return err
	}
	rss2 := gw.rss()
	fmt.Printf("memory per recorded call: %.1f KiB (RSS %d → %d MiB over %d calls in one session)\n", float64(rss2-rss1)/1024/recorded, rss1>>20, rss2>>20, recorded)

	// Sessions recorded and grouped: one call each, rewarded, groups of 4.
	const rounds = 1000
	start := time.Now()
	if err := sessionLoad(client, gw.base, rounds, workers); err != nil {
		return err
	}
	d := time.Since(start)
	fmt.Printf("sessions recorded and grouped: %.0f/s (%d sessions of one call, rewarded, groups of 4, %d clients)\n", rounds/d.Seconds(), rounds, workers)
	fmt.Printf("load average at the end %s\n", loadavg())
	return nil
}

// verdict is PASS when a target is met, else MISS.
func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// serveForwarder serves standin.Forwarder on a loopback port until killed.
// It prints the address first, as the gateway does.
func serveForwarder(url string, workers int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("forwarder on http://%s: to %s\n", ln.Addr(), url)
	return http.Serve(ln, standin.Forwarder(url, workers*2))
}

// startForwarder starts this program again as the bare forwarder to url.
func startForwarder(url string, workers int) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return startChild(exec.Command(self, "-forward-to", url, "-workers", strconv.Itoa(workers)), regexp.MustCompile(`forwarder on (http://\S+):`))
}

// load makes calls POSTs of body to url(i) from workers clients and
// returns each call's latency.
func load(c *http.Client, url func(i int) string, calls, workers int) ([]time.Duration, error) {
	lat := make([]time.Duration, calls)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < calls; i += workers {
				t := time.Now()
				if err := post(c, url(i), "", body, nil); err != nil {
					errs[w] = err
					return
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	return lat, errors.Join(errs...)
}

// gatewayLoad is load through the gateway.
// Each client opens a session, makes perSession calls in it and rewards it, then opens the next.
func gatewayLoad(c *http.Client, base string, calls, workers, perSession int) ([]time.Duration, error) {
	lat := make([]time.Duration, calls)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, n := "", 0
			end := func() error {
				if id == "" {
					return nil
				}
				return post(c, base+"/sessions/"+id+"/reward", token, []byte(`{"reward":1}`), nil)
			}
			for i := w; i < calls; i += workers {
				if n%perSession == 0 {
					if err := end(); err != nil {
						errs[w] = err
						return
					}
					var err error
					if id, err = newSession(c, base, "load"); err != nil {
						errs[w] = err
						return
					}
				}
				n++
				t := time.Now()
				if err := post(c, base+"/s/"+id+"/v1/chat/completions", "", body, nil); err != nil {
					errs[w] = err
					return
				}
				lat[i] = time.Since(t)
			}
			errs[w] = end()
		}()
	}
	wg.Wait()
	return lat, errors.Join(errs...)
}

// sessionLoad runs n sessions of one call each, rewarded, from workers
// clients.
func sessionLoad(c *http.Client, base string, n, workers int) error {
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				id, err := newSession(c, base, "g"+strconv.Itoa(i/4))
				if err == nil {
					err = post(c, base+"/s/"+id+"/v1/chat/completions", "", body, nil)
				}
				if err == nil {
					err = post(c, base+"/sessions/"+id+"/reward", token, []byte(`{"reward":`+strconv.Itoa(i%2)+`}`), nil)
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func newSession(c *http.Client, base, group string) (string, error) {
	var cr struct {
		SessionID string `json:"session_id"`
	}
	err := post(c, base+"/sessions", token, []byte(`{"group":"`+group+`"}`), &cr)
	return cr.SessionID, err
}

// post sends b and decodes a 200 answer into v (nil: discards it).
func post(c *http.Client, url, bearer string, b []byte, v any) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d %s", strings.SplitN(url, "sess-", 2)[0], resp.StatusCode, out)
	}
	if v != nil {
		return json.Unmarshal(out, v)
	}
	return nil
}

// child is a child process serving HTTP: the gateway, the forwarder or
// delegate serve.
type child struct {
	cmd       *exec.Cmd
	base, log string // log: the file of its stderr
}

// startGateway starts the delegate binary's gateway on config's models
// names, in groups of 4.
// memoryCalls is how many calls the memory figure records in one session.
const memoryCalls = 4000

func startGateway(bin, config, out string, names ...string) (*child, error) {
	args := append([]string{"gateway", "--config", config, "--addr", "127.0.0.1:0", "--out", out, "--group", "4"}, names...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DELEGATE_GATEWAY_TOKEN="+token)
	return startChild(cmd, regexp.MustCompile(`gateway on (http://\S+):`))
}

// startChild starts cmd and waits for the line of its stdout that re
// matches, whose first group is its base URL.
func startChild(cmd *exec.Cmd, re *regexp.Regexp) (*child, error) {
	// The log, an access line a request, goes to a file, as a service's
	// would: no pipe to this process, whose CPU would count it.
	logf, err := os.CreateTemp("", "perf-gateway-*.log")
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, stdout) // the rest of its output
			return &child{cmd: cmd, base: m[1], log: logf.Name()}, nil
		}
	}
	_ = cmd.Process.Kill()
	err = cmd.Wait()
	b, _ := os.ReadFile(logf.Name()) // what it said, if it can be read
	_ = os.Remove(logf.Name())
	return nil, fmt.Errorf("%s exited without listening: %v: %s", cmd.Path, err, bytes.TrimSpace(b[max(0, len(b)-2000):]))
}

// stop interrupts the child and waits for it; after 10 seconds it kills
// it. A child started in the background of a shell without job control
// ignores SIGINT.
func (g *child) stop() {
	done := make(chan struct{})
	go func() {
		_ = g.cmd.Wait() // interrupted or killed: its status tells nothing
		close(done)
	}()
	_ = g.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = g.cmd.Process.Kill()
		<-done
	}
	_ = os.Remove(g.log)
}

// cpu is the user and system time of the child so far (/proc, 10 ms
// ticks).
func (g *child) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", g.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// rss is the child's resident set in bytes.
func (g *child) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// selfCPU is this process's user and system time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// pct is the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(time.Microsecond)
}
