package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// The in-process workload. `delegate gateway` hosts a config's local
// models in its own process, as `delegate serve` does. So a gateway in
// front of the shipped models needs no second server and no extra hop.
// The honest comparison is then the same calls answered by delegate
// serve (direct) and by delegate gateway on the same config, sessions
// recorded. What the gateway adds is its sessions: recording each call
// with its ids and logprobs, the session API, the store and the groups.

// runInProcess measures the gateway hosting the models against delegate
// serve hosting them, on the route strategy's calls, interleaved.
//
// With control, a second delegate serve takes the gateway's place, its
// calls without sessions: the ratio is then the program's own bias.
func runInProcess(m modelRun) error {
	ctx := context.Background()
	what := fmt.Sprintf("inprocess (direct: delegate serve --config %[1]s; gateway: delegate gateway --config %[1]s, the same models in its process, every call recorded; greedy)", m.config)
	if m.control {
		what = fmt.Sprintf("inprocess, control (direct: delegate serve --config %[1]s; in the gateway's place a second delegate serve on it, no sessions; greedy)", m.config)
	}
	captured, eps, calls, err := m.workload(ctx, what)
	if err != nil {
		return err
	}
	// The capture's server is not measured: it has served the capture,
	// the gateway nothing. Both measured servers start fresh and warm up
	// alike.
	captured.stop()
	serve, err := startServe(m.bin, m.config)
	if err != nil {
		return err
	}
	defer serve.stop()
	dir, err := os.MkdirTemp("", "perf-gateway")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "out")
	var gw *child
	if m.control {
		gw, err = startServe(m.bin, m.config)
	} else {
		gw, err = startGateway(m.bin, m.config, out, "delegator", "solver")
	}
	if err != nil {
		return err
	}
	defer gw.stop()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: m.workers * 2}}
	arms := []arm{{name: "direct", base: serve.base}, {name: "gateway", base: gw.base, sessions: !m.control}}
	const pServe, pGw = 0, 1
	ts, err := interleave(client, eps, arms, []*child{serve, gw}, m.reps, m.warmup, m.workers)
	if err != nil {
		return err
	}
	d, g := ts[0], ts[1]
	// Each deployment counts its own processes: the clients and the one
	// server. The other server idles meanwhile; its CPU is printed apart.
	dCPU, gCPU := d.self+d.procs[pServe], g.self+g.procs[pGw]
	n := time.Duration(calls * m.reps)
	per := func(d time.Duration) time.Duration { return (d / n).Round(time.Microsecond) }
	ratio := float64(gCPU) / float64(dCPU)
	fmt.Printf("CPU per call: direct (clients and delegate serve) %v, serve's %v; through the gateway, the models in its process, %v, the gateway's %v: %.2f×; idle meanwhile: the gateway %v, serve %v\n",
		per(dCPU), per(d.procs[pServe]), per(gCPU), per(g.procs[pGw]), ratio, per(d.procs[pGw]), per(g.procs[pServe]))
	dp50, dp99, gp50, gp99 := pct(d.lat, 50), pct(d.lat, 99), pct(g.lat, 50), pct(g.lat, 99)
	fmt.Printf("latency: direct p50 %v p99 %v; through the gateway p50 %v p99 %v; gateway's added p50 %v p99 %v\n",
		dp50, dp99, gp50, gp99, gp50-dp50, gp99-dp99)
	printDiffs(append(d.diffs, g.diffs...), calls*m.reps*len(arms))
	if !m.control {
		if err := printRecorded(client, gw.base, out, len(eps)*(m.reps+m.warmup)); err != nil {
			return err
		}
	}
	fmt.Printf("%s CPU ≤ 1.1× direct (%.2f×)\n", verdict(gCPU*10 <= dCPU*11), ratio)
	fmt.Printf("%s added p99 ≤ 2 ms (%v)\n", verdict(gp99-dp99 <= 2*time.Millisecond), gp99-dp99)
	fmt.Printf("load average at the end %s\n", loadavg())
	return nil
}

// printRecorded prints the sessions the gateway stored as finished and
// the group records it wrote to out. It checks that every one of want
// sessions was stored: the gateway's work was all done.
func printRecorded(c *http.Client, base, out string, want int) error {
	req, err := http.NewRequest(http.MethodGet, base+"/health", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("gateway health: %w", err)
	}
	defer resp.Body.Close()
	var h struct {
		Sessions map[string]int `json:"sessions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return fmt.Errorf("decode the gateway's health: %w", err)
	}
	f, err := os.Open(filepath.Join(out, "groups.jsonl"))
	if err != nil {
		return err
	}
	defer f.Close()
	records := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		records++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read the group records: %w", err)
	}
	got := h.Sessions["finished"]
	fmt.Printf("%s sessions stored with their reward: %d of %d; group records written: %d\n", verdict(got == want), got, want, records)
	return nil
}
