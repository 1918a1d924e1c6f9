// Command standin serves the stand-in OpenAI-compatible Chat Completions
// API of package standin on loopback, for benchmarks and load tests.
//
//	standin -addr 127.0.0.1:0 -latency 50ms -jitter lognormal -spread 0.3 -faults 0.02
//
// It prints "standin listening on http://HOST:PORT/v1" on stdout once it accepts connections.
// It writes the same URL to -url-file when given.
// It serves until SIGINT or SIGTERM, then prints its counters as JSON on stdout.
// Besides the API it answers GET /stats with the counters and the process's CPU time so far.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/delegatelab/delegate/standin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "standin:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("standin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	d := standin.DefaultConfig()
	cfg := d // every field is a flag; d holds the defaults they show
	addr := fs.String("addr", "127.0.0.1:0", "loopback `address` to listen on (port 0: a free one)")
	urlFile := fs.String("url-file", "", "write the base URL to this `file` once listening")
	fs.DurationVar(&cfg.Latency, "latency", 50*time.Millisecond, "mean latency of an answer")
	fs.StringVar(&cfg.Jitter, "jitter", d.Jitter, "latency distribution: fixed, uniform, exp or lognormal")
	fs.Float64Var(&cfg.Spread, "spread", 0, "jitter spread: a fraction for uniform and exp, sigma for lognormal")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of answers, latencies and faults")
	all := fs.Float64("faults", 0, "rate of every fault kind at once (each kind gets this `rate`)")
	fs.Float64Var(&cfg.Faults.RateLimit, "fault-rate-limit", 0, "rate of 429 with Retry-After")
	fs.Float64Var(&cfg.Faults.ServerError, "fault-server-error", 0, "rate of 500")
	fs.Float64Var(&cfg.Faults.Reset, "fault-reset", 0, "rate of connections reset mid-response")
	fs.Float64Var(&cfg.Faults.Truncated, "fault-truncated", 0, "rate of 200s cut mid-JSON")
	fs.Float64Var(&cfg.Faults.Slow, "fault-slow", 0, "rate of answers after -slow-delay")
	fs.Float64Var(&cfg.Faults.Garbage, "fault-garbage", 0, "rate of 200s that are not JSON")
	fs.DurationVar(&cfg.SlowDelay, "slow-delay", d.SlowDelay, "delay of a slow fault")
	fs.DurationVar(&cfg.RetryAfter, "retry-after", d.RetryAfter, "wait a 429 asks for")
	fs.StringVar(&cfg.Model, "model", d.Model, "model name served")
	fs.IntVar(&cfg.ToolCalls, "tool-calls", d.ToolCalls, "parallel delegate calls in route's first turn")
	fs.IntVar(&cfg.Subtasks, "subtasks", d.Subtasks, "subtasks in decompose's plan")
	fs.IntVar(&cfg.ReplyBytes, "reply-bytes", d.ReplyBytes, "approximate length of a full answer's reasoning")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *all > 0 {
		set := func(p *float64) {
			if *p == 0 {
				*p = *all
			}
		}
		set(&cfg.Faults.RateLimit)
		set(&cfg.Faults.ServerError)
		set(&cfg.Faults.Reset)
		set(&cfg.Faults.Truncated)
		set(&cfg.Faults.Slow)
		set(&cfg.Faults.Garbage)
	}
	s, err := standin.New(cfg)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(report(s)) // a client gone mid-write is the client's business
	})
	mux.Handle("/", s)
	if err := s.StartHandler(*addr, mux); err != nil {
		return err
	}
	url := s.URL()
	if *urlFile != "" {
		if err := os.WriteFile(*urlFile, []byte(url+"\n"), 0o644); err != nil {
			_ = s.Close() // the write error is the one to report
			return fmt.Errorf("write url file: %w", err)
		}
	}
	fmt.Fprintln(stdout, "standin listening on", url)

	<-ctx.Done()
	err = s.Close()
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if eerr := enc.Encode(report(s)); eerr != nil && err == nil {
		err = eerr
	}
	return err
}

// statsReport is what /stats and the exit report print.
type statsReport struct {
	standin.Stats
	AnswersByKind map[string]int64 `json:"answers_by_kind"`
	CPUUser       float64          `json:"cpu_user_s"`
	CPUSys        float64          `json:"cpu_sys_s"`
}

func report(s *standin.Server) statsReport {
	st := s.Stats()
	r := statsReport{Stats: st, AnswersByKind: map[string]int64{}}
	for k, n := range st.Answers {
		r.AnswersByKind[standin.Kind(k).String()] = n
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		r.CPUUser = time.Duration(ru.Utime.Nano()).Seconds()
		r.CPUSys = time.Duration(ru.Stime.Nano()).Seconds()
	}
	return r
}
