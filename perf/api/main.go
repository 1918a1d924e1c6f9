// Command api measures the trajectory API under a trainer-sized load.
// Environments push groups while one trainer pulls batches,
// against the JetStream-backed server and an in-memory floor, each in a child process.
// It prints throughput, latency, server memory and CPU per sequence, and PASS or MISS per target.
// README.md gives the method; docs/api.md the figures.
//
//	go run ./perf/api -duration 60s
//	go run ./perf/api -duration 10m   # the long run
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/delegatelab/delegate/trajectory/atropos"

	"github.com/delegatelab/delegate/internal/host"
)

type options struct {
	duration  time.Duration
	envs      int
	groupSize int
	tokens    int
	batch     int
	offpolicy int
	gzip      bool
	rate      float64
}

func main() {
	serve := flag.String("serve", "", "internal: run a server (memory or jetstream) and print its address")
	profile := flag.String("cpuprofile", "", "write the JetStream server's CPU profile to this file")
	memProfile := flag.String("memprofile", "", "write the JetStream server's heap profile at the end to this file")
	data := flag.String("data", "", "internal: JetStream store directory for -serve jetstream")
	var o options
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "load time per server (10m for the long run)")
	flag.IntVar(&o.envs, "envs", 4, "environments pushing")
	flag.IntVar(&o.groupSize, "group", 16, "sequences per group")
	flag.IntVar(&o.tokens, "tokens", 4096, "tokens per sequence")
	flag.IntVar(&o.batch, "batch", 512, "trainer batch size in sequences")
	flag.IntVar(&o.offpolicy, "offpolicy", 3, "BaseEnv's max_batches_offpolicy: environments pause while the queue holds this many batches")
	flag.BoolVar(&o.gzip, "gzip", true, "environments gzip their bodies, as BaseEnv does (false: plain JSON)")
	flag.Float64Var(&o.rate, "rate", 0, "sequences/s the environments offer together, on a fixed schedule (0: each pushes as fast as it can)")
	flag.Parse()
	if *serve != "" {
		if err := runServer(*serve, *data, *profile, *memProfile); err != nil {
			fmt.Fprintln(os.Stderr, "perf/api server:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, *profile, *memProfile); err != nil {
		fmt.Fprintln(os.Stderr, "perf/api:", err)
		os.Exit(1)
	}
}

// runServer is the child: one API server on a loopback port, until
// SIGTERM.
func runServer(kind, data, profile, memProfile string) error {
	if profile != "" {
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var srv *atropos.Server
	var err error
	switch kind {
	case "memory":
		srv, err = atropos.NewInMemory(ctx, atropos.DefaultConfig(), log)
	case "jetstream":
		ec := atropos.DefaultEmbeddedConfig()
		ec.Dir = data
		emb, eerr := atropos.StartEmbedded(ec)
		if eerr != nil {
			return eerr
		}
		defer emb.Shutdown()
		nc, cerr := emb.Connect()
		if cerr != nil {
			return cerr
		}
		defer nc.Close()
		pc, cerr := emb.Connect()
		if cerr != nil {
			return cerr
		}
		defer pc.Close()
		srv, err = atropos.New(ctx, nc, atropos.DefaultConfig(), log, atropos.WithPublishConn(pc))
	default:
		return fmt.Errorf("unknown server kind %q", kind)
	}
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := srv.HTTPServer(srv.Handler())
	fmt.Printf("listening %s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if memProfile != "" { // the heap under load, before shutting down
		if err := writeHeap(memProfile); err != nil {
			fmt.Fprintln(os.Stderr, "memprofile:", err)
		}
	}
	// Wait for the handlers to end before the deferred closes of the NATS
	// connection and server run: a handler still pruning needs them.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}

func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// result is one server's measurement.
type result struct {
	kind                string
	accepted, delivered int64 // sequences
	elapsed             time.Duration
	p50, p99            time.Duration
	rssStart            int64
	rssPeak1, rssPeak2  int64 // peaks over the first and the second half of the load
	rssEnd              int64
	cpu                 time.Duration
	loadCPU             time.Duration // this process's: the environments and the trainer
}

// cpuPerSeq is the server's CPU time per sequence accepted.
// Each sequence is also validated, stored and, in steady state, sent to the trainer.
func (r result) cpuPerSeq() time.Duration {
	if r.accepted == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.accepted)
}

// loadCPUPerSeq is the load generator's CPU time per sequence accepted.
func (r result) loadCPUPerSeq() time.Duration {
	if r.accepted == 0 {
		return 0
	}
	return r.loadCPU / time.Duration(r.accepted)
}

func run(ctx context.Context, o options, profile, memProfile string) error {
	offered := "each as fast as it can"
	if o.rate > 0 {
		offered = fmt.Sprintf("offering %.0f sequences/s together", o.rate)
	}
	fmt.Printf("perf/api: %d environments x groups of %d sequences x %d tokens (with inference_logprobs, gzip %v), %s; trainer batches of %d; %v per server\n",
		o.envs, o.groupSize, o.tokens, o.gzip, offered, o.batch, o.duration)
	fmt.Printf("load average at start: %s\n", loadAvg())
	bodies := make([]*template, o.envs)
	for e := range bodies {
		bodies[e] = newTemplate(e, o.groupSize, o.tokens)
	}
	fmt.Printf("group body: %.1f MB of JSON\n", float64(len(bodies[0].body))/1e6)
	var results []result
	for _, kind := range []string{"memory", "jetstream"} {
		p, mp := "", ""
		if kind == "jetstream" {
			p, mp = profile, memProfile
		}
		r, err := measure(ctx, o, kind, bodies, p, mp)
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		results = append(results, r)
	}
	fmt.Printf("load average at end: %s\n\n", loadAvg())
	fmt.Printf("%-22s %12s %12s %9s %9s %10s %10s %10s %10s %10s %13s\n", "server", "accepted/s", "delivered/s", "push p50", "push p99",
		"RSS start", "peak 1st", "peak 2nd", "RSS end", "CPU/seq", "load CPU/seq")
	for _, r := range results {
		secs := r.elapsed.Seconds()
		fmt.Printf("%-22s %12.0f %12.0f %9s %9s %9.0fM %9.0fM %9.0fM %9.0fM %10s %13s\n", name(r.kind),
			float64(r.accepted)/secs, float64(r.delivered)/secs, r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond),
			mb(r.rssStart), mb(r.rssPeak1), mb(r.rssPeak2), mb(r.rssEnd), r.cpuPerSeq().Round(time.Microsecond), r.loadCPUPerSeq().Round(time.Microsecond))
	}
	fmt.Println("(CPU/seq: the server process's CPU time per sequence accepted; load CPU/seq: this process's, the environments' and the trainer's)")
	floor, dur := results[0], results[1]
	ratio := 0.0
	if floor.cpuPerSeq() > 0 {
		ratio = float64(dur.cpuPerSeq()) / float64(floor.cpuPerSeq())
	}
	fmt.Printf("\nCPU per sequence, durable / floor: %.2fx\n\n", ratio)
	delivered := float64(dur.delivered) / dur.elapsed.Seconds()
	// Flat: the second half's peak is within 25% (plus 64 MiB of slack) of
	// the first half's: memory does not grow with the data that went
	// through.
	flat := float64(dur.rssPeak2) <= 1.25*float64(dur.rssPeak1)+64<<20
	if o.rate > 0 {
		// The load is capped: throughput says whether the server kept up,
		// not how much it can take.
		fmt.Printf("----  delivered (offered %.0f sequences/s)                   %.0f/s\n", o.rate, delivered)
		verdict(fmt.Sprintf("p99 of /scored_data <= 50 ms at %.0f sequences/s", o.rate), dur.p99 <= 50*time.Millisecond, dur.p99.Round(100*time.Microsecond).String())
	} else {
		verdict("delivered >= 1,000 sequences/s with durability on", delivered >= 1000, fmt.Sprintf("%.0f/s", delivered))
		verdict("p99 of /scored_data <= 50 ms (at saturation)", dur.p99 <= 50*time.Millisecond, dur.p99.Round(100*time.Microsecond).String())
	}
	verdict("server memory flat", flat, fmt.Sprintf("peak %.0f MB in the first half, %.0f MB in the second", mb(dur.rssPeak1), mb(dur.rssPeak2)))
	verdict("durable CPU per sequence <= 2x the floor's", ratio > 0 && ratio <= 2, fmt.Sprintf("%.2fx", ratio))
	return nil
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func name(kind string) string {
	if kind == "memory" {
		return "in-memory (floor)"
	}
	return "JetStream (durable)"
}

func verdict(what string, ok bool, got string) {
	v := "MISS"
	if ok {
		v = "PASS"
	}
	fmt.Printf("%s  %-52s %s\n", v, what, got)
}

// template is an environment's group body with a fixed-width env_id and group id at its end.
// Each push rewrites them, so that every push is a new group.
type template struct {
	body  []byte
	envAt int // a 6-byte field of the env_id, right-aligned; the rest of the body follows it
	idAt  int
	idLen int
}

func newTemplate(env, n, tokens int) *template {
	rng := rand.New(rand.NewPCG(uint64(env), 7))
	var b strings.Builder
	list := func(key string, f func(i, j int) string) {
		b.WriteString(`"` + key + `": [`)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('[')
			for j := range tokens {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString(f(i, j))
			}
			b.WriteByte(']')
		}
		b.WriteString("], ")
	}
	prompt := tokens / 4
	toks := make([][]int, n)
	for i := range toks {
		toks[i] = make([]int, tokens)
		for j := range toks[i] {
			toks[i][j] = rng.IntN(150000)
		}
	}
	b.WriteByte('{')
	list("tokens", func(i, j int) string { return strconv.Itoa(toks[i][j]) })
	list("masks", func(i, j int) string {
		if j < prompt {
			return "-100"
		}
		return strconv.Itoa(toks[i][j])
	})
	b.WriteString(`"scores": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatFloat(float64(i%2), 'f', 1, 64))
	}
	b.WriteString("], ")
	list("inference_logprobs", func(i, j int) string {
		if j < prompt {
			return "1.0"
		}
		return strconv.FormatFloat(-rng.ExpFloat64(), 'g', -1, 64)
	})
	b.WriteString(`"env_id": `)
	t := &template{envAt: b.Len(), idLen: 24}
	b.WriteString(`     0, "group_overrides": {"group_id": "`)
	t.idAt = b.Len()
	b.WriteString(strings.Repeat("0", t.idLen))
	b.WriteString(`"}}`)
	t.body = []byte(b.String())
	return t
}

// pusher sends one environment's groups. Its body is encoded once: each
// push only rewrites the env_id and group id in place. With gzip, the
// body is compressed as BaseEnv compresses it (gzip.compress, level 9),
// also once: the fixed part before env_id is one gzip member made at the
// start, and each push appends a second, small member holding the rest
// (a gzip body may be several members; the server inflates all 2 MB as
// before). The load generator's CPU then stays off the server's cores.
type pusher struct {
	t      *template
	env    int
	body   []byte // the template with this environment's env_id
	gz     bool
	head   []byte // gzip member of body[:envAt]
	out    bytes.Buffer
	zw     *gzip.Writer
	idText []byte
}

func newPusher(t *template, env int, gz bool) (*pusher, error) {
	p := &pusher{t: t, env: env, body: slices.Clone(t.body), gz: gz}
	copy(p.body[t.envAt:t.envAt+6], fmt.Sprintf("%6d", env))
	if !gz {
		return p, nil
	}
	var head bytes.Buffer
	zw, err := gzip.NewWriterLevel(&head, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(p.body[:t.envAt]); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	p.head = head.Bytes()
	p.zw = zw
	return p, nil
}

// next returns the body of a group with id id: JSON, or gzip.
func (p *pusher) next(id string) ([]byte, error) {
	p.idText = fmt.Appendf(p.idText[:0], "%*s", p.t.idLen, id)
	copy(p.body[p.t.idAt:p.t.idAt+p.t.idLen], p.idText)
	if !p.gz {
		return p.body, nil
	}
	p.out.Reset()
	p.out.Write(p.head)
	p.zw.Reset(&p.out)
	if _, err := p.zw.Write(p.body[p.t.envAt:]); err != nil {
		return nil, err
	}
	if err := p.zw.Close(); err != nil {
		return nil, err
	}
	return p.out.Bytes(), nil
}

func measure(ctx context.Context, o options, kind string, bodies []*template, profile, memProfile string) (result, error) {
	r := result{kind: kind}
	dir, err := os.MkdirTemp("", "perf-api-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return r, err
	}
	cmd := exec.Command(self, "-serve", kind, "-data", filepath.Join(dir, "js"), "-cpuprofile", profile, "-memprofile", memProfile)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return r, err
	}
	if err := cmd.Start(); err != nil {
		return r, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // then wait below
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return r, fmt.Errorf("server start: %w", err)
	}
	url := "http://" + strings.TrimSpace(strings.TrimPrefix(line, "listening "))
	pid := cmd.Process.Pid
	r.rssStart = rss(pid)
	cpu0 := cpuTime(pid)

	tr := atropos.DefaultTrainerClient()
	tr.URL, tr.Poll = url, 20*time.Millisecond
	if err := tr.Register(ctx, atropos.Registration{BatchSize: o.batch, MaxTokenLen: o.tokens, NumSteps: 1 << 30, CheckpointDir: dir}); err != nil {
		return r, err
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var accepted, delivered atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	errc := make(chan error, o.envs+1)
	for e := range o.envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ec := atropos.DefaultEnvClient()
			ec.URL, ec.Plain, ec.Poll, ec.MaxBatchesOffpolicy = url, true, 20*time.Millisecond, o.offpolicy
			ec.Env = atropos.RegisterEnv{MaxTokenLength: o.tokens, DesiredName: "perf", Weight: 1, GroupSize: o.groupSize}
			if err := ec.Register(lctx); err != nil {
				errc <- err
				return
			}
			p, err := newPusher(bodies[e], ec.ID, o.gzip)
			if err != nil {
				errc <- err
				return
			}
			// With a rate, pushes start on a fixed schedule and latency counts from the scheduled start.
			// A push delayed by a slow one before it then counts the delay too.
			var interval time.Duration
			if o.rate > 0 {
				interval = time.Duration(float64(time.Second) * float64(o.envs*o.groupSize) / o.rate)
			}
			next := time.Now().Add(interval * time.Duration(e) / time.Duration(o.envs))
			for k := 0; lctx.Err() == nil; k++ {
				var t0 time.Time
				if interval > 0 {
					select {
					case <-time.After(time.Until(next)):
					case <-lctx.Done():
						return
					}
					t0, next = next, next.Add(interval)
				}
				if _, err := ec.Wait(lctx); err != nil {
					break
				}
				body, err := p.next(fmt.Sprintf("%s-%d-%d", kind, e, k))
				if err != nil {
					errc <- err
					return
				}
				push := ec.PushRaw
				if o.gzip {
					push = ec.PushGzip
				}
				if interval == 0 {
					t0 = time.Now()
				}
				if _, err := push(lctx, body); err != nil {
					if lctx.Err() == nil {
						errc <- err
					}
					return
				}
				d := time.Since(t0)
				accepted.Add(int64(o.groupSize))
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for lctx.Err() == nil {
			_, raw, err := tr.NextRaw(lctx)
			if err != nil {
				if lctx.Err() == nil {
					errc <- err
				}
				return
			}
			// Every stored group starts with {"tokens":[ and every group
			// here has groupSize sequences; counting groups this way keeps
			// the trainer's CPU (which shares the machine) off a full decode.
			n := bytes.Count(raw, []byte(`{"tokens":[`)) * o.groupSize
			if n != o.batch {
				errc <- fmt.Errorf("step %d: %d sequences, want %d", tr.Last, n, o.batch)
				return
			}
			delivered.Add(int64(n))
		}
	}()
	start := time.Now()
	load0 := cpuNow()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := time.After(o.duration)
sample:
	for {
		select {
		case <-tick.C:
			m := rss(pid)
			if time.Since(start) < o.duration/2 {
				r.rssPeak1 = max(r.rssPeak1, m)
			} else {
				r.rssPeak2 = max(r.rssPeak2, m)
			}
		case <-end:
			break sample
		case err := <-errc:
			return r, err
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
	r.elapsed = time.Since(start)
	r.accepted, r.delivered = accepted.Load(), delivered.Load()
	r.rssEnd = rss(pid)
	r.cpu = cpuTime(pid) - cpu0
	r.loadCPU = cpuNow() - load0
	cancel()
	wg.Wait()
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50 = lat[len(lat)/2]
		r.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return r, nil
}

// rss is a process's resident memory in bytes (Linux /proc).
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpuTime is a process's user+system CPU time (Linux /proc, 100 ticks/s).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func loadAvg() string {
	avg, ok := host.LoadAverage()
	if !ok {
		return "unknown"
	}
	return fmt.Sprintf("%.2f %.2f %.2f (%d cores)", avg[0], avg[1], avg[2], runtime.NumCPU())
}

// cpuNow is this process's CPU time so far; 0 when the system cannot tell.
func cpuNow() time.Duration {
	d, _ := host.ProcessCPU()
	return d
}
