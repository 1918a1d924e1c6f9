package main

import (
	"compress/gzip"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver that keeps the spans of
// each protobuf ExportTraceServiceRequest, after sleeping delay.
type otlpReceiver struct {
	*httptest.Server
	delay time.Duration

	mu    sync.Mutex
	spans []*tracepb.Span
	auth  string // the last request's Authorization header
}

func newOTLPReceiver(t *testing.T, delay time.Duration) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{delay: delay}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &msg)
		}
		if err != nil || req.URL.Path != "/v1/traces" {
			http.Error(w, "want an ExportTraceServiceRequest on /v1/traces", http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(r.delay):
		case <-req.Context().Done():
			return
		}
		r.mu.Lock()
		r.auth = req.Header.Get("Authorization")
		for _, rs := range msg.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{}) // an empty message always marshals
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out) // the exporter reads it or has gone
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) received() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

const worldQuestion = "Dot has 91 jars of 23 coins. Gus has 19 jars of 83 coins. Gus gets 49 more. How many coins do they have in all?"

// timings matches the figures of a run's output that change between runs.
// Those are latencies, with the spaces that align them in a table.
var timings = regexp.MustCompile(` *\d+(\.\d+)?(ms|s)\b`)

// stable returns a run's output without its timings, its lines sorted
// (parallel calls finish in any order).
func stable(out string) []string {
	lines := strings.Split(timings.ReplaceAllString(out, " T"), "\n")
	slices.Sort(lines)
	return lines
}

func runWorld(t *testing.T, getenv env, extra ...string) (string, time.Duration) {
	t.Helper()
	args := append([]string{"run", "--config", "../../examples/world.yaml", "--strategy", "route"}, extra...)
	start := time.Now()
	out, err := execute(t, getenv, append(args, worldQuestion)...)
	if err != nil {
		t.Fatalf("run %q: %v\n%s", extra, err, out)
	}
	return out, time.Since(start)
}

// run --otlp sends the shipped models' route run to an OTLP/HTTP receiver
// as GenAI spans. A receiver that is down or slow changes neither the
// output nor, beyond the exporter's bounded close, the time.
func TestRunOTLP(t *testing.T) {
	base, baseTime := runWorld(t, testEnv)
	if !strings.Contains(base, "answer:\n3719\n") {
		t.Fatalf("the shipped models' answer changed:\n%s", base)
	}

	rcv := newOTLPReceiver(t, 0)
	withAuth := func(name string) string {
		if name == otlpHeadersEnv {
			return "Authorization=Basic%20cGs6c2s=,X-Empty="
		}
		return testEnv(name)
	}
	out, _ := runWorld(t, withAuth, "--otlp", rcv.URL)
	if got, want := stable(out), stable(base); !slices.Equal(got, want) {
		t.Errorf("output with --otlp:\n%s\nwithout:\n%s", out, base)
	}
	rcv.mu.Lock()
	if rcv.auth != "Basic cGs6c2s=" {
		t.Errorf("Authorization %q, want the one of %s", rcv.auth, otlpHeadersEnv)
	}
	rcv.mu.Unlock()
	names := map[string]int{}
	for _, s := range rcv.received() {
		names[s.Name]++
		a := map[string]string{}
		for _, kv := range s.Attributes {
			a[kv.Key] = kv.Value.GetStringValue()
		}
		switch s.Name {
		case "chat solver", "chat delegator":
			if a["gen_ai.operation.name"] != "chat" || a["gen_ai.provider.name"] != "delegate" ||
				"chat "+a["gen_ai.request.model"] != s.Name {
				t.Errorf("%s: attributes %v", s.Name, a)
			}
		case "execute_tool delegate":
			if a["gen_ai.operation.name"] != "execute_tool" || a["gen_ai.tool.name"] != "delegate" || a["gen_ai.tool.call.id"] == "" {
				t.Errorf("%s: attributes %v", s.Name, a)
			}
		case "invoke_agent route", "invoke_agent weak":
			if a["gen_ai.operation.name"] != "invoke_agent" {
				t.Errorf("%s: attributes %v", s.Name, a)
			}
		}
	}
	// The README's run: four delegator turns, four solver calls.
	want := map[string]int{"invoke_agent route": 1, "chat delegator": 4, "execute_tool delegate": 4,
		"invoke_agent weak": 4, "chat solver": 4, "turn 1": 1, "turn 4": 1}
	for name, n := range want {
		if names[name] != n {
			t.Errorf("%d spans %q, want %d (got %v)", names[name], name, n, names)
		}
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	slow := newOTLPReceiver(t, time.Minute)
	for _, tt := range []struct{ name, url string }{{"down", down}, {"slow", slow.URL}} {
		t.Run(tt.name, func(t *testing.T) {
			out, took := runWorld(t, testEnv, "--otlp", tt.url)
			if got, want := stable(out), stable(base); !slices.Equal(got, want) {
				t.Errorf("output with a receiver %s:\n%s\nwithout:\n%s", tt.name, out, base)
			}
			// Generous against a loaded machine: the bound is the close's.
			if limit := 2*baseTime + otlpCloseTimeout + 5*time.Second; took > limit {
				t.Errorf("run took %v with a receiver %s, want under %v (%v without --otlp)", took, tt.name, limit, baseTime)
			}
		})
	}
}

// process, bench and train --otlp export their runs' traces too.
func TestRunOTLPOnEveryCommand(t *testing.T) {
	endToEnd(t)
	dir := t.TempDir()
	solver, delegator := tinyModels(t, dir)
	world := "../../examples/world.yaml"
	tests := []struct {
		name string
		args []string
		want string // a span every export of the command has
	}{
		{"process", []string{"process", "--config", world, "--dataset", "world", "-n", "1", "-g", "2", "--strategy", "route",
			"--keep-ties", "--out", filepath.Join(dir, "process")}, "invoke_agent route"},
		{"bench", []string{"bench", "--config", world, "--dataset", "world", "--strategies", "route", "--n", "2",
			"--out", filepath.Join(dir, "bench")}, "invoke_agent route"},
		{"train", tinyTrainArgs(solver, delegator, filepath.Join(dir, "train"), "--steps", "1", "--eval-items", "2"), "invoke_agent route"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcv := newOTLPReceiver(t, 0)
			out, err := execute(t, testEnv, append(tt.args, "--otlp", rcv.URL)...)
			if err != nil {
				t.Fatalf("%s: %v\n%s", tt.name, err, out)
			}
			names, chats := map[string]int{}, 0
			for _, s := range rcv.received() {
				names[s.Name]++
				if strings.HasPrefix(s.Name, "chat ") {
					chats++
				}
			}
			if names[tt.want] == 0 || chats == 0 {
				t.Errorf("%s --otlp: spans %v, want %q and chat spans", tt.name, names, tt.want)
			}
		})
	}
}

func TestParseHeaders(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]string
		err  bool
	}{
		{"", map[string]string{}, false},
		{"Authorization=Basic%20a2V5,x-team = blue ", map[string]string{"Authorization": "Basic a2V5", "x-team": "blue"}, false},
		{"novalue", nil, true},
		{"=v", nil, true},
		{"k=%zz", nil, true},
	}
	for _, tt := range tests {
		got, err := parseHeaders(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("parseHeaders(%q) error %v, want error %v", tt.in, err, tt.err)
			continue
		}
		if !tt.err && !maps.Equal(got, tt.want) {
			t.Errorf("parseHeaders(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "zz") {
			t.Errorf("error %q shows the value", err)
		}
	}
}
