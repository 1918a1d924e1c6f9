package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegatelab/delegate/internal/host"
)

// result is what one arm measured at one concurrency.
type result struct {
	arm        string
	n, c       int
	wall       time.Duration
	cpu        time.Duration // user + system of this process
	peakRSS    int64         // VmHWM after the run, bytes
	rssGrowth  int64         // VmHWM minus VmRSS before the run, bytes
	heapGrowth int64         // peak of sampled heap objects + stacks minus before, bytes
	serverCPU  time.Duration // the stand-in process's CPU over the run; -1 if unknown
	dials      int64         // connections opened during the measured run
	errors     int
	firstErr   error
	hwmReset   bool // VmHWM was reset before the run (else it is the process's lifetime peak)
	runs       int  // how many runs the figures are the median of
}

func (r result) cpuPerRollout() time.Duration { return r.cpu / time.Duration(r.n) }
func (r result) rssPerInFlight() float64      { return float64(r.rssGrowth) / float64(r.c) }
func (r result) heapPerInFlight() float64     { return float64(r.heapGrowth) / float64(r.c) }

// rusage returns this process's user and system CPU time so far.
func rusage() (time.Duration, error) {
	d, ok := host.ProcessCPU()
	if !ok {
		return 0, errors.New("getrusage: this system does not say")
	}
	return d, nil
}

// statusBytes reads a "kB" field of /proc/self/status (VmRSS, VmHWM).
func statusBytes(field string) (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/self/status %s: %w", field, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("/proc/self/status: %w", err)
	}
	return 0, fmt.Errorf("/proc/self/status: no %s", field)
}

// resetHWM sets VmHWM to the current RSS (Linux: "5" to clear_refs). It
// reports whether that worked.
func resetHWM() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

var heapMetrics = []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/stacks:bytes"}

// heapInUse is the bytes of heap objects (live or not yet swept) plus
// goroutine stacks, read without stopping the world.
func heapInUse(s []metrics.Sample) int64 {
	metrics.Read(s)
	var n int64
	for _, v := range s {
		if v.Value.Kind() == metrics.KindUint64 {
			n += int64(v.Value.Uint64())
		}
	}
	return n
}

// runArm runs n rollouts of a, c at a time, and measures them. serverCPU,
// when not nil, reads the stand-in's CPU time.
func runArm(ctx context.Context, a arm, n, c int, serverCPU func() (time.Duration, error)) (result, error) {
	r := result{arm: a.name(), n: n, c: c, serverCPU: -1}
	runtime.GC()
	debug.FreeOSMemory()
	r.hwmReset = resetHWM()
	baseRSS, err := statusBytes("VmRSS")
	if err != nil {
		return r, err
	}
	samples := make([]metrics.Sample, len(heapMetrics))
	for i, name := range heapMetrics {
		samples[i].Name = name
	}
	baseHeap := heapInUse(samples)

	// The sampler records the peak heap every 2 ms; it is the same small
	// cost in both arms.
	var peakHeap atomic.Int64
	peakHeap.Store(baseHeap)
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		own := make([]metrics.Sample, len(heapMetrics))
		copy(own, samples)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if h := heapInUse(own); h > peakHeap.Load() {
					peakHeap.Store(h)
				}
			}
		}
	})

	var srv0 time.Duration
	if serverCPU != nil {
		if srv0, err = serverCPU(); err != nil {
			serverCPU = nil
		}
	}
	cpu0, err := rusage()
	if err != nil {
		close(stop)
		sampler.Wait()
		return r, err
	}
	start := time.Now()

	var next atomic.Int64
	var mu sync.Mutex
	var workers sync.WaitGroup
	for range c {
		workers.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := a.rollout(ctx, requestText(i)); err != nil {
					mu.Lock()
					r.errors++
					if r.firstErr == nil {
						r.firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	workers.Wait()

	r.wall = time.Since(start)
	cpu1, err := rusage()
	close(stop)
	sampler.Wait()
	if err != nil {
		return r, err
	}
	r.cpu = cpu1 - cpu0
	if serverCPU != nil {
		if srv1, err := serverCPU(); err == nil {
			r.serverCPU = srv1 - srv0
		}
	}
	if r.peakRSS, err = statusBytes("VmHWM"); err != nil {
		return r, err
	}
	r.rssGrowth = max(r.peakRSS-baseRSS, 0)
	if h := heapInUse(samples); h > peakHeap.Load() {
		peakHeap.Store(h)
	}
	r.heapGrowth = max(peakHeap.Load()-baseHeap, 0)
	if err := ctx.Err(); err != nil {
		return r, errors.New("interrupted")
	}
	return r, nil
}
