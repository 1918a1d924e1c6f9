// Command serve loads `delegate serve` over loopback as a hostile or busy crowd would.
// It reports whether the server's bounds on memory, health and queueing hold, as PASS or MISS.
// README.md gives the load and the properties checked; docs/serve.md the figures.
//
//	go build -o /tmp/delegate ./cmd/delegate
//	go run ./perf/serve -delegate /tmp/delegate -config examples/world.yaml -duration 20s
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type options struct {
	delegate, config string
	duration         time.Duration
	clients          int
	big, slow        int
	maxConcurrent    int
	maxQueue         int
	queueTimeout     time.Duration
	maxBody          int64
	readTimeout      time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.delegate, "delegate", "", "the delegate binary (go build -o /tmp/delegate ./cmd/delegate)")
	flag.StringVar(&o.config, "config", "examples/world.yaml", "config serving the shipped models")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "how long to load the server")
	flag.IntVar(&o.clients, "clients", 100, "clients asking short questions in a loop")
	flag.IntVar(&o.big, "big", 30, "clients sending near-limit and over-limit bodies in a loop")
	flag.IntVar(&o.slow, "slow", 200, "clients trickling their body a byte a second")
	flag.IntVar(&o.maxConcurrent, "max-concurrent", 32, "the server's --max-concurrent")
	flag.IntVar(&o.maxQueue, "max-queue", 64, "the server's --max-queue")
	flag.DurationVar(&o.queueTimeout, "queue-timeout", 5*time.Second, "the server's --queue-timeout")
	flag.Int64Var(&o.maxBody, "max-body", 1<<20, "the server's --max-body")
	flag.DurationVar(&o.readTimeout, "read-timeout", 5*time.Second, "the server's --read-timeout")
	flag.Parse()
	if o.delegate == "" {
		fmt.Fprintln(os.Stderr, "serve: -delegate is required (go build -o /tmp/delegate ./cmd/delegate)")
		os.Exit(2)
	}
	if o.duration <= 0 || o.duration > 10*time.Minute || o.clients < 0 || o.big < 0 || o.slow < 0 || o.clients+o.big+o.slow > 5000 {
		fmt.Fprintln(os.Stderr, "serve: -duration must be in (0, 10m] and the clients at most 5000 in all")
		os.Exit(2)
	}
	allPass, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	if !allPass {
		os.Exit(1)
	}
}

// stats collects what the load saw. Safe for concurrent use.
type stats struct {
	mu        sync.Mutex
	byStatus  map[int]int
	errors    map[string]int // requests with no HTTP answer, by kind
	latencies []time.Duration
	slow503   time.Duration // slowest 503
	health    struct{ ok, bad int }
	healthMax time.Duration
	queueMax  int
}

func (s *stats) answer(status int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byStatus[status]++
	s.latencies = append(s.latencies, d)
	if status == http.StatusServiceUnavailable {
		s.slow503 = max(s.slow503, d)
	}
}

func (s *stats) fail(kind string) {
	s.mu.Lock()
	s.errors[kind]++
	s.mu.Unlock()
}

func (s *stats) line() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	codes := make([]int, 0, len(s.byStatus))
	for c := range s.byStatus {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	var b strings.Builder
	for _, c := range codes {
		fmt.Fprintf(&b, " %d:%d", c, s.byStatus[c])
	}
	n := 0
	for _, v := range s.errors {
		n += v
	}
	fmt.Fprintf(&b, " no-answer:%d health ok/bad %d/%d", n, s.health.ok, s.health.bad)
	return b.String()
}

func run(o options) (bool, error) {
	key := make([]byte, 16)
	_, _ = rand.Read(key) // crypto/rand.Read never fails
	apiKey := "sk-load-" + hex.EncodeToString(key)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.Command(o.delegate, "serve", "--config", o.config, "--addr", "127.0.0.1:0",
		"--max-concurrent", strconv.Itoa(o.maxConcurrent), "--max-queue", strconv.Itoa(o.maxQueue),
		"--queue-timeout", o.queueTimeout.String(), "--max-body", strconv.FormatInt(o.maxBody, 10),
		"--read-timeout", o.readTimeout.String())
	cmd.Env = append(os.Environ(), "DELEGATE_SERVE_API_KEY="+apiKey)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return false, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("start %s: %w", o.delegate, err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt) // it may have exited already; Wait says
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }() // the exit status of an interrupted server is not ours to judge
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill() // it ignored the interrupt
			<-done
		}
	}()
	base, err := serverURL(stdout)
	if err != nil {
		return false, err
	}
	fmt.Printf("server pid %d at %s: max-concurrent %d, max-queue %d, queue-timeout %v, max-body %d, read-timeout %v\n",
		cmd.Process.Pid, base, o.maxConcurrent, o.maxQueue, o.queueTimeout, o.maxBody, o.readTimeout)

	// Warm up: one answer from each model, then the idle RSS.
	client := &http.Client{Timeout: o.queueTimeout + 2*time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: o.clients + o.big}}
	for _, body := range []string{solverBody(1), delegatorBody(1)} {
		if status, _, err := post(ctx, client, base, apiKey, strings.NewReader(body)); err != nil || status != 200 {
			return false, fmt.Errorf("warm-up request: status %d, %v", status, err)
		}
	}
	idle, err := rss(cmd.Process.Pid)
	if err != nil {
		return false, err
	}
	bound := idle + int64(o.maxConcurrent+o.maxQueue)*o.maxBody*4
	fmt.Printf("idle RSS %s; memory bound %s = idle + (%d + %d) × %d bytes × 4\n", mib(idle), mib(bound), o.maxConcurrent, o.maxQueue, o.maxBody)

	st := &stats{byStatus: map[int]int{}, errors: map[string]int{}}
	loadCtx, stopLoad := context.WithTimeout(ctx, o.duration)
	defer stopLoad()
	var wg sync.WaitGroup
	for i := range o.clients {
		wg.Go(func() { asker(loadCtx, client, base, apiKey, i, st) })
	}
	for i := range o.big {
		wg.Go(func() { bigSender(loadCtx, client, base, apiKey, o.maxBody, i, st) })
	}
	var slowCut, slowOpened atomic.Int64
	for range o.slow {
		wg.Go(func() { slowSender(loadCtx, base, apiKey, o.readTimeout, &slowOpened, &slowCut, st) })
	}
	wg.Go(func() { prober(loadCtx, base, apiKey, st) })

	var peak int64 = idle
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	fmt.Println("  t   RSS        answered by status")
sample:
	for {
		select {
		case <-loadCtx.Done():
			break sample
		case <-tick.C:
			r, err := rss(cmd.Process.Pid)
			if err != nil {
				return false, err
			}
			peak = max(peak, r)
			fmt.Printf("%3.0fs %-10s%s\n", time.Since(start).Seconds(), mib(r), st.line())
		}
	}
	wg.Wait()

	counts := st.line()
	st.mu.Lock()
	defer st.mu.Unlock()
	answered, ok := 0, 0
	for c, n := range st.byStatus {
		answered += n
		if c == 200 {
			ok += n
		}
	}
	noAnswer := 0
	for _, n := range st.errors {
		noAnswer += n
	}
	total := answered + noAnswer
	slices.Sort(st.latencies)
	q := func(p float64) time.Duration {
		if len(st.latencies) == 0 {
			return 0
		}
		return st.latencies[min(len(st.latencies)-1, int(p*float64(len(st.latencies))))]
	}
	fmt.Printf("\nrequests (asker and big-body clients): %d sent, %d answered with an HTTP status (%.1f%%), %d answered 200 (%.1f%%), %d without an answer %v\n",
		total, answered, pct(answered, total), ok, pct(ok, total), noAnswer, st.errors)
	fmt.Printf("status counts:%s\n", counts)
	fmt.Printf("latency p50 %v p90 %v p99 %v max %v; slowest 503 %v\n", q(0.5), q(0.9), q(0.99), q(1), st.slow503)
	fmt.Printf("slow-body connections: %d opened by %d clients, %d cut by the server within read-timeout + 3s (the rest were open when the load stopped)\n", slowOpened.Load(), o.slow, slowCut.Load())
	fmt.Printf("peak RSS %s (idle %s)\n\n", mib(peak), mib(idle))

	all := true
	verdict := func(pass bool, what string) {
		word := "PASS"
		if !pass {
			word, all = "MISS", false
		}
		fmt.Printf("%s  %s\n", word, what)
	}
	verdict(peak <= bound, fmt.Sprintf("memory bounded: peak RSS %s <= bound %s", mib(peak), mib(bound)))
	verdict(st.health.bad == 0 && st.healthMax < time.Second && st.health.ok > 0,
		fmt.Sprintf("/health answered throughout: %d ok, %d failed, slowest %v (want all ok, < 1s)", st.health.ok, st.health.bad, st.healthMax.Round(time.Millisecond)))
	verdict(st.slow503 <= o.queueTimeout+time.Second && st.queueMax <= o.maxQueue && noAnswer == 0,
		fmt.Sprintf("no request waits beyond the queue bound: slowest 503 %v (<= %v + 1s), peak queue depth %d (<= %d), %d requests without an answer",
			st.slow503.Round(time.Millisecond), o.queueTimeout, st.queueMax, o.maxQueue, noAnswer))
	return all, nil
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// serverURL reads the child's startup lines up to the one with its URL;
// the rest of its output is drained.
func serverURL(r io.Reader) (string, error) {
	re := regexp.MustCompile(`serving \[.*\] on (http://\S+)/v1`)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fmt.Println("server:", sc.Text())
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, r) }() // nothing more to read from it
			return m[1], nil
		}
	}
	return "", errors.New("the server exited before printing its address")
}

// rss reads a process's resident set size from /proc.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read the server's memory: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS %q: %w", rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

func post(ctx context.Context, c *http.Client, base, key string, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func solverBody(i int) string {
	return fmt.Sprintf(`{"model":"solver","temperature":0,"max_tokens":48,"messages":[{"role":"user","content":"%d*%d"}]}`, 11+i%89, 12+(i*7)%87)
}

func delegatorBody(i int) string {
	return fmt.Sprintf(`{"model":"delegator","temperature":0,"max_tokens":64,"messages":[{"role":"user","content":"Ann has %d boxes of %d pens. How many pens does Ann have?"}],"tools":[{"type":"function","function":{"name":"delegate"}}]}`, 11+i%89, 12+(i*7)%87)
}

// asker asks short questions in a loop until ctx ends.
func asker(ctx context.Context, c *http.Client, base, key string, id int, st *stats) {
	for i := id; ctx.Err() == nil; i += 1000 {
		body := solverBody(i)
		if i%5 == 0 {
			body = delegatorBody(i)
		}
		if !ask(ctx, c, base, key, strings.NewReader(body), st) {
			return
		}
	}
}

// ask posts one request and counts its answer.
// On a 503 it backs off a second, as Retry-After says.
// It returns false when the request failed, counted unless ctx ended, and the caller stops.
func ask(ctx context.Context, c *http.Client, base, key string, body io.Reader, st *stats) bool {
	start := time.Now()
	status, _, err := post(ctx, c, base, key, body)
	if err != nil {
		if ctx.Err() == nil {
			st.fail(errKind(err))
		}
		return false
	}
	st.answer(status, time.Since(start))
	if status == http.StatusServiceUnavailable {
		sleep(ctx, time.Second)
	}
	return true
}

// bigSender sends, in turn, a body just under the limit and one just over it.
// The body under the limit holds a prompt far over any shipped model's context.
func bigSender(ctx context.Context, c *http.Client, base, key string, maxBody int64, id int, st *stats) {
	head := `{"model":"solver","messages":[{"role":"user","content":"`
	tail := `"}]}`
	under := []byte(head + strings.Repeat("7", int(maxBody)-len(head)-len(tail)-16) + tail)
	over := []byte(head + strings.Repeat("7", int(maxBody)+16) + tail)
	for i := id; ctx.Err() == nil; i++ {
		body := under
		if i%2 == 1 {
			body = over
		}
		if !ask(ctx, c, base, key, bytes.NewReader(body), st) {
			return
		}
	}
}

// slowSender opens a connection, sends headers promising a body, and trickles it a byte a second.
// It counts the connections the server cut before the body was done, then opens another.
// The read timeout should cut all of them.
func slowSender(ctx context.Context, base, key string, readTimeout time.Duration, opened, cut *atomic.Int64, st *stats) {
	addr := strings.TrimPrefix(base, "http://")
	for ctx.Err() == nil {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			if ctx.Err() == nil {
				st.fail("slow dial: " + errKind(err))
			}
			return
		}
		opened.Add(1)
		start := time.Now()
		_, err = fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", addr, key)
		for err == nil && ctx.Err() == nil {
			sleep(ctx, time.Second)
			_, err = conn.Write([]byte("7"))
		}
		if err != nil && time.Since(start) <= readTimeout+3*time.Second {
			cut.Add(1)
		}
		conn.Close()
	}
}

// prober asks /health every 100 ms.
func prober(ctx context.Context, base, key string, st *stats) {
	c := &http.Client{Timeout: 5 * time.Second}
	for ctx.Err() == nil {
		start := time.Now()
		resp, err := c.Get(base + "/health")
		d := time.Since(start)
		st.mu.Lock()
		if err == nil && resp.StatusCode == 200 {
			st.health.ok++
		} else if ctx.Err() == nil {
			st.health.bad++
		}
		st.healthMax = max(st.healthMax, d)
		st.mu.Unlock()
		if err == nil {
			resp.Body.Close()
		}
		if depth, err := queueDepth(c, base, key); err == nil {
			st.mu.Lock()
			st.queueMax = max(st.queueMax, depth)
			st.mu.Unlock()
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

func queueDepth(c *http.Client, base, key string) (int, error) {
	req, err := http.NewRequest("GET", base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "delegate_serve_queue_depth "); ok {
			// The text format writes every value as a float.
			f, err := strconv.ParseFloat(v, 64)
			return int(f), err
		}
	}
	return 0, errors.New("no queue depth in /metrics")
}

func errKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	}
	return "other"
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
