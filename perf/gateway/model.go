package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/openai"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world"
	"github.com/delegatelab/delegate/world/transcript"
)

// The model workload. The backend is `delegate serve` on the shipped
// router and solver, a child process; its CPU is the engine's real work
// and counts on every path. The agent's calls are those the route
// strategy makes on seeded world problems, greedily. They are captured
// once, against the backend, then replayed as the same bytes on every
// path. Greedy decoding then gives every path the same completions,
// which the program checks.

// modelRun is the model workload's settings.
type modelRun struct {
	bin, config            string
	problems, reps, warmup int
	workers                int
	seed                   uint64
	// control puts a second delegate serve in the gateway's place
	// (inprocess only).
	control bool
}

// episode is one world problem as the route strategy ran it: the bodies
// of its calls, in the order they were sent, and each call's completion
// at capture.
type episode struct {
	task  delegate.Task
	calls [][]byte
	want  []string
}

func runModel(m modelRun) error {
	ctx := context.Background()
	serve, eps, calls, err := m.workload(ctx, fmt.Sprintf("model (delegate serve --config %s: the shipped router and solver, greedy)", m.config))
	if err != nil {
		return err
	}
	defer serve.stop()
	dir, err := os.MkdirTemp("", "perf-gateway")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	config := filepath.Join(dir, "gateway.yaml")
	yaml := fmt.Sprintf(`models:
  delegator: {kind: openai, base_url: "%[1]s/v1", model: delegator, token_ids: true, price: {input: 1.00, cached_input: 0.10, output: 5.00}}
  solver: {kind: openai, base_url: "%[1]s/v1", model: solver, token_ids: true, price: {input: 0.20, cached_input: 0.02, output: 1.00}}
`, serve.base)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		return err
	}
	gw, err := startGateway(m.bin, config, filepath.Join(dir, "out"), "delegator", "solver")
	if err != nil {
		return err
	}
	defer gw.stop()
	direct := serve.base + "/v1/chat/completions"
	fwd, err := startForwarder(direct, m.workers)
	if err != nil {
		return err
	}
	defer fwd.stop()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: m.workers * 2}}
	const viaDirect, viaForwarder, viaGateway = 0, 1, 2
	names := [3]string{"direct", "forwarder", "gateway"}
	arms := []arm{{name: names[viaDirect], base: serve.base}, {name: names[viaForwarder], base: fwd.base}, {name: names[viaGateway], base: gw.base, sessions: true}}
	// Each child's index in a tally's procs.
	const pServe, pFwd, pGw = 0, 1, 2
	ts, err := interleave(client, eps, arms, []*child{serve, fwd, gw}, m.reps, m.warmup, m.workers)
	if err != nil {
		return err
	}
	var lats [3][]time.Duration
	var cpus, backend, own [3]time.Duration
	var diffs []string
	for path, t := range ts {
		lats[path], backend[path], diffs = t.lat, t.procs[pServe], append(diffs, t.diffs...)
		cpus[path] = t.self + t.procs[pServe]
		switch path {
		case viaGateway:
			own[path] = t.procs[pGw]
		case viaForwarder:
			own[path] = t.procs[pFwd]
		}
	}
	n := time.Duration(calls * m.reps)
	per := func(d time.Duration) time.Duration { return (d / n).Round(time.Microsecond) }
	dCPU, fCPU, gCPU := cpus[viaDirect], cpus[viaForwarder]+own[viaForwarder], cpus[viaGateway]+own[viaGateway]
	fmt.Printf("CPU per call: direct (client+backend) %v, the backend's %v; through a bare forwarder %v (its own %v): %.2f×; through the gateway %v (its own %v, the backend's %v): %.2f×\n",
		per(dCPU), per(backend[viaDirect]), per(fCPU), per(own[viaForwarder]), float64(fCPU)/float64(dCPU),
		per(gCPU), per(own[viaGateway]), per(backend[viaGateway]), float64(gCPU)/float64(dCPU))
	dLat, fLat, gLat := lats[viaDirect], lats[viaForwarder], lats[viaGateway]
	dp50, dp99, gp50, gp99 := pct(dLat, 50), pct(dLat, 99), pct(gLat, 50), pct(gLat, 99)
	fmt.Printf("latency: direct p50 %v p99 %v; through the forwarder p50 %v p99 %v; through the gateway p50 %v p99 %v; gateway's added p50 %v p99 %v\n",
		dp50, dp99, pct(fLat, 50), pct(fLat, 99), gp50, gp99, gp50-dp50, gp99-dp99)
	total := calls * m.reps * len(names)
	printDiffs(diffs, total)
	fmt.Printf("%s CPU ≤ 1.1× direct (%.2f×)\n", verdict(float64(gCPU) <= 1.1*float64(dCPU)), float64(gCPU)/float64(dCPU))
	fmt.Printf("%s added p99 ≤ 2 ms (%v)\n", verdict(gp99-dp99 <= 2*time.Millisecond), gp99-dp99)
	fmt.Printf("load average at the end %s\n", loadavg())
	return nil
}

// workload starts delegate serve on m.config and captures the route
// strategy's calls against it. It prints the machine, the backend as
// backend says, and the workload. The caller stops serve.
func (m modelRun) workload(ctx context.Context, backend string) (serve *child, eps []episode, calls int, err error) {
	problems, err := world.Generate(world.DefaultConfig(), m.seed, world.Validation, m.problems)
	if err != nil {
		return nil, nil, 0, err
	}
	if serve, err = startServe(m.bin, m.config); err != nil {
		return nil, nil, 0, err
	}
	fmt.Printf("machine: %d CPUs, %s; load average %s\n", runtime.NumCPU(), runtime.Version(), loadavg())
	fmt.Printf("backend: %s\n", backend)
	capStart, cap0 := time.Now(), serve.cpu()
	eps, right, err := capture(ctx, serve.base+"/v1", problems, m.workers)
	if err != nil {
		serve.stop()
		return nil, nil, 0, fmt.Errorf("capture the route strategy's calls: %w", err)
	}
	for _, ep := range eps {
		calls += len(ep.calls)
	}
	fmt.Printf("workload: the route strategy's %d calls on %d world validation problems (seed %d; %d right), captured in %v (backend CPU %v); × %d repetitions per path (after %d unmeasured), %d clients, one session per problem through the gateway (verified at the end)\n",
		calls, len(eps), m.seed, right, time.Since(capStart).Round(time.Millisecond), serve.cpu()-cap0, m.reps, m.warmup, m.workers)
	return serve, eps, calls, nil
}

// printDiffs prints whether every one of total calls got the capture's
// completion, and the first few that did not.
func printDiffs(diffs []string, total int) {
	fmt.Printf("%s same completions on every path as at capture (%d of %d calls differ)\n", verdict(len(diffs) == 0), len(diffs), total)
	for i, d := range diffs {
		if i == 3 {
			fmt.Printf("  … and %d more\n", len(diffs)-i)
			break
		}
		fmt.Printf("  %s\n", d)
	}
}

// arm is one way the workload goes: to the server at base, each
// episode a verified gateway session with sessions.
type arm struct {
	name, base string
	sessions   bool
}

// tally is what an arm measured over all repetitions. self is this
// process's CPU (the clients'), procs each child's, in the order given.
type tally struct {
	lat   []time.Duration
	self  time.Duration
	procs []time.Duration
	diffs []string
}

// interleave replays eps on each arm, reps times, the arms' order
// reversed every other repetition. It measures the CPU of this process
// and of every child of procs while each arm runs, and checks each
// call's completion against the capture's. Each arm first replays eps
// warmup times unmeasured: a child's first calls pay its cold start
// (page faults, heap growth, a new store), which would count in its
// path's figures.
func interleave(c *http.Client, eps []episode, arms []arm, procs []*child, reps, warmup, workers int) ([]tally, error) {
	ts := make([]tally, len(arms))
	for i := range ts {
		ts[i].procs = make([]time.Duration, len(procs))
	}
	for range warmup {
		for _, a := range arms {
			if _, _, err := replay(c, eps, workers, a.base, a.sessions); err != nil {
				return nil, fmt.Errorf("%s path, unmeasured: %w", a.name, err)
			}
		}
	}
	for r := range reps {
		order := make([]int, len(arms))
		for i := range order {
			order[i] = i
		}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			a, t := arms[i], &ts[i]
			self0, procs0 := selfCPU(), make([]time.Duration, len(procs))
			for j, p := range procs {
				procs0[j] = p.cpu()
			}
			lat, got, err := replay(c, eps, workers, a.base, a.sessions)
			if err != nil {
				return nil, fmt.Errorf("%s path: %w", a.name, err)
			}
			t.self += selfCPU() - self0
			for j, p := range procs {
				t.procs[j] += p.cpu() - procs0[j]
			}
			t.lat = append(t.lat, lat...)
			t.diffs = append(t.diffs, differences(eps, got, a.name, r)...)
		}
	}
	return ts, nil
}

// startServe starts the delegate binary's server on config, on a
// loopback port, without an API key.
func startServe(bin, config string) (*child, error) {
	cmd := exec.Command(bin, "serve", "--config", config, "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DELEGATE_SERVE_API_KEY=")
	c, err := startChild(cmd, regexp.MustCompile(`serving .* on (http://\S+)/v1,`))
	if err != nil {
		return nil, fmt.Errorf("start delegate serve: %w", err)
	}
	return c, nil
}

// capture runs the route strategy on each problem against the server at
// base, workers at once, and records the bodies of the calls it sends and
// their completions. right counts the problems it answered right.
func capture(ctx context.Context, base string, problems []*world.Problem, workers int) (eps []episode, right int, err error) {
	cfg := transcript.StrategyConfig()
	cfg.Strong.Temperature, cfg.Weak.Temperature = 0, 0
	eps = make([]episode, len(problems))
	ok := make([]bool, len(problems))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i, p := range problems {
		g.Go(func() error {
			rec := &recorder{rt: http.DefaultTransport}
			model := func(name string) (delegate.Model, error) {
				c := openai.DefaultConfig()
				c.BaseURL, c.Model, c.MaxRetries = base, name, 0
				return openai.New(c, openai.WithHTTPClient(&http.Client{Transport: rec}))
			}
			strong, err := model("delegator")
			if err != nil {
				return err
			}
			weak, err := model("solver")
			if err != nil {
				return err
			}
			st, err := strategy.New(strategy.NameRoute, strategy.Roles{Strong: delegate.Agent{Model: strong}, Weak: delegate.Agent{Model: weak}}, cfg)
			if err != nil {
				return err
			}
			tr, err := st.Run(gctx, p.Text, nil)
			if err != nil {
				return fmt.Errorf("problem %s: %w", p.ID, err)
			}
			if tr.FailureKind == delegate.FailureCall {
				return fmt.Errorf("problem %s: %s", p.ID, tr.Failure)
			}
			v, err := world.Verify(p.Task(), tr.Answer)
			if err != nil {
				return err
			}
			ok[i] = v.Correct
			eps[i] = episode{task: p.Task(), calls: rec.bodies}
			for _, a := range rec.answers {
				s, err := completion(a)
				if err != nil {
					return fmt.Errorf("problem %s: %w", p.ID, err)
				}
				eps[i].want = append(eps[i].want, s)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	for _, o := range ok {
		if o {
			right++
		}
	}
	return eps, right, nil
}

// recorder is an http.RoundTripper that keeps the body of each request
// and of its answer, in the order the answers came.
type recorder struct {
	rt http.RoundTripper

	mu              sync.Mutex
	bodies, answers [][]byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.GetBody == nil {
		return nil, errors.New("recorder: a request without GetBody")
	}
	rc, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	resp, err := r.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies, r.answers = append(r.bodies, body), append(r.answers, out)
	return resp, nil
}

// answer is what the program reads of a chat completion: the work done.
type answer struct {
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
}

// completion is a chat completion body's choices as one string: finish
// reason, content and tool calls, without ids.
func completion(body []byte) (string, error) {
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return "", fmt.Errorf("decode a completion: %w", err)
	}
	return a.String(), nil
}

func (a *answer) String() string {
	var b strings.Builder
	for _, c := range a.Choices {
		b.WriteString(c.FinishReason + ": ")
		if c.Message.Content != nil {
			b.WriteString(fmt.Sprintf("%q", *c.Message.Content))
		}
		for _, tc := range c.Message.ToolCalls {
			b.WriteString(" " + tc.Function.Name + tc.Function.Arguments)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// replay sends each episode's calls in order to the server at base,
// workers episodes at once. With sessions each episode is a gateway
// session of its task, verified at the end. It returns each call's
// latency and each episode's completions.
func replay(c *http.Client, eps []episode, workers int, base string, sessions bool) ([]time.Duration, [][]string, error) {
	var lat []time.Duration
	got := make([][]string, len(eps))
	lats := make([][]time.Duration, len(eps))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(eps); i += workers {
				if errs[w] = replayOne(c, &eps[i], base, sessions, &lats[i], &got[i]); errs[w] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, l := range lats {
		lat = append(lat, l...)
	}
	return lat, got, errors.Join(errs...)
}

// replayOne replays one episode, appending to lat and got.
func replayOne(c *http.Client, ep *episode, base string, sessions bool, lat *[]time.Duration, got *[]string) error {
	url := base + "/v1/chat/completions"
	id := ""
	if sessions {
		var cr struct {
			SessionID string `json:"session_id"`
		}
		task, err := json.Marshal(map[string]any{"task": ep.task})
		if err != nil {
			return err
		}
		if err := post(c, base+"/sessions", token, task, &cr); err != nil {
			return err
		}
		id = cr.SessionID
		url = base + "/s/" + id + "/v1/chat/completions"
	}
	for _, body := range ep.calls {
		var a answer
		t := time.Now()
		if err := post(c, url, "", body, &a); err != nil {
			return err
		}
		*lat = append(*lat, time.Since(t))
		*got = append(*got, a.String())
	}
	if sessions {
		return post(c, base+"/sessions/"+id+"/reward", token, []byte(`{}`), nil)
	}
	return nil
}

// differences describes each call of got whose completion is not the
// capture's.
func differences(eps []episode, got [][]string, path string, rep int) []string {
	var out []string
	for i, ep := range eps {
		for j, want := range ep.want {
			if j >= len(got[i]) || got[i][j] != want {
				g := "nothing"
				if j < len(got[i]) {
					g = strings.TrimSpace(got[i][j])
				}
				out = append(out, fmt.Sprintf("%s, repetition %d, problem %s call %d: got %s, want %s", path, rep+1, ep.task.ID, j+1, g, strings.TrimSpace(want)))
			}
		}
	}
	return out
}
