package main

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/delegatelab/delegate/standin"
)

// TestNoGoroutineLeft runs route rollouts of both arms against an in-process stand-in.
// Once the transports' idle connections and the server are closed, no goroutine may be left behind.
func TestNoGoroutineLeft(t *testing.T) {
	defer goleak.VerifyNone(t)
	sc := standin.DefaultConfig()
	sc.Latency = time.Millisecond
	s, err := standin.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(""); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	for _, mk := range []func(string, *http.Client) (arm, error){
		func(u string, hc *http.Client) (arm, error) { return newBareArm(u, hc) },
		func(u string, hc *http.Client) (arm, error) { return newStrategyArm(u, hc) },
	} {
		var dials atomic.Int64
		tr := newTransport(64, &dials)
		a, err := mk(s.URL(), &http.Client{Transport: tr})
		if err != nil {
			t.Fatal(err)
		}
		r, err := runArm(context.Background(), a, 12, 4, nil)
		tr.CloseIdleConnections()
		if err != nil {
			t.Fatalf("%s: %v", a.name(), err)
		}
		if r.errors != 0 {
			t.Errorf("%s: %d failed rollouts, first: %v", a.name(), r.errors, r.firstErr)
		}
		if r.cpu <= 0 || r.wall <= 0 || r.peakRSS <= 0 {
			t.Errorf("%s: measured cpu %v wall %v peak RSS %d, want all > 0", a.name(), r.cpu, r.wall, r.peakRSS)
		}
	}
	st := s.Stats()
	if got, want := st.Requests, int64(2*12*callsPerRollout); got != want {
		t.Errorf("stand-in got %d requests, want %d", got, want)
	}
	if st.Answers[standin.KindRouteCalls] != 24 || st.Answers[standin.KindWeak] != 96 || st.Answers[standin.KindRouteFinal] != 24 {
		t.Errorf("answers by kind %v, want 24 route calls, 96 weak, 24 route final", st.Answers)
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string // "" ok, else part of the error
	}{
		{nil, ""},
		{[]string{"-c", "1,2", "-n", "10"}, ""},
		{[]string{"-c", "0"}, "-c"},
		{[]string{"-c", "x"}, "-c"},
		{[]string{"-latency", "0s"}, "-latency"},
		{[]string{"-rounds", "0"}, "-rounds"},
		{[]string{"-repeat", "0"}, "-repeat"},
		{[]string{"extra"}, "unexpected"},
	}
	for _, tt := range tests {
		var sb strings.Builder
		_, err := parseFlags(tt.args, &sb)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("parseFlags(%q) = %v, want %q", tt.args, err, tt.want)
		}
	}
}

func TestStatusBytes(t *testing.T) {
	for _, f := range []string{"VmRSS", "VmHWM"} {
		if b, err := statusBytes(f); err != nil || b <= 0 {
			t.Errorf("statusBytes(%s) = %d, %v", f, b, err)
		}
	}
	if _, err := statusBytes("NoSuchField"); err == nil {
		t.Errorf("statusBytes of a missing field: nil error")
	}
}

func TestMedian(t *testing.T) {
	runs := []result{
		{wall: 3, cpu: 10, peakRSS: 5, errors: 1, dials: 2, hwmReset: true},
		{wall: 1, cpu: 30, peakRSS: 7, hwmReset: true},
		{wall: 2, cpu: 20, peakRSS: 6, errors: 2, hwmReset: false},
	}
	m := median(runs)
	if m.wall != 2 || m.cpu != 20 || m.peakRSS != 6 || m.errors != 3 || m.dials != 2 || m.hwmReset || m.runs != 3 {
		t.Errorf("median = %+v, want wall 2, cpu 20, peak 6, errors 3, dials 2, hwmReset false, runs 3", m)
	}
}

// TestRunReports runs the whole comparison, small, against an in-process
// stand-in that also answers /stats, and checks the report's shape.
func TestRunReports(t *testing.T) {
	sc := standin.DefaultConfig()
	sc.Latency = 2 * time.Millisecond
	s, err := standin.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"cpu_user_s":1.5,"cpu_sys_s":0.5}`)) // a failed write fails the run below
	})
	mux.Handle("/", s)
	if err := s.StartHandler("", mux); err != nil {
		t.Fatal(err)
	}
	defer func() {
		http.DefaultClient.CloseIdleConnections() // serverCPUOf's
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	var out, errOut strings.Builder
	args := []string{"-url", s.URL(), "-latency", "2ms", "-c", "2,4", "-n", "8", "-repeat", "2", "-idle-per-host", "64"}
	if err := run(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{"machine:", "route/bare", "C=2 ", "C=4 ", "CPU per rollout", "memory per in-flight rollout"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "failed rollouts") {
		t.Errorf("failed rollouts:\n%s", out.String())
	}
	if got, want := s.Stats().Requests, int64(2*(2+8+8+4+8+8)*callsPerRollout); got != want {
		t.Errorf("%d requests, want %d (warm-up and measured runs of both arms)", got, want)
	}
}

// TestReportTargets checks the verdicts against the targets.
func TestReportTargets(t *testing.T) {
	const latency = 50 * time.Millisecond
	bare := result{arm: "bare", n: 640, c: 64, wall: 1600 * time.Millisecond, cpu: 640 * time.Millisecond,
		peakRSS: 30 << 20, rssGrowth: 64 * 100 << 10, heapGrowth: 64 * 100 << 10, serverCPU: -1, hwmReset: true}
	tests := []struct {
		name  string
		route result
		want  []string
	}{
		{"all pass", result{arm: "route", n: 640, c: 64, wall: 1700 * time.Millisecond, cpu: 740 * time.Millisecond,
			peakRSS: 32 << 20, rssGrowth: 64 * 200 << 10, heapGrowth: 64 * 250 << 10, serverCPU: -1, hwmReset: true},
			[]string{"CPU per rollout 1.16x bare (<= 1.20x)  PASS", "0.195 MB RSS growth  PASS; 0.244 MB heap+stacks growth  PASS", "wall 1.133x the floor (<= 1.15x)  PASS"}},
		{"all miss", result{arm: "route", n: 640, c: 64, wall: 1800 * time.Millisecond, cpu: 1000 * time.Millisecond,
			peakRSS: 60 << 20, rssGrowth: 64 * 400 << 10, heapGrowth: 64 * 400 << 10, serverCPU: -1, errors: 2, hwmReset: true},
			[]string{"CPU per rollout 1.56x bare (<= 1.20x)  MISS", "0.391 MB RSS growth  MISS; 0.391 MB heap+stacks growth  MISS", "wall 1.200x the floor (<= 1.15x)  MISS", "failed rollouts: bare 0, route 2  MISS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			report(&out, [][2]result{{bare, tt.route}}, latency)
			for _, want := range tt.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("report lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}
