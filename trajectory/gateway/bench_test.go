package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/openai"
	"github.com/delegatelab/delegate/server"
	"github.com/delegatelab/delegate/standin"
	"github.com/delegatelab/delegate/trajectory/gateway"
	"github.com/delegatelab/delegate/world"
)

// BenchmarkCall measures one chat completion over loopback HTTP, with
// the process's CPU per call as cpu-ns/op. Everything runs in this
// process, so an arm's CPU is its client's, servers' and backend's.
//
// The first two arms serve a model that answers at once: package server
// alone, then the gateway, which also checks the session and records the
// call. The other three have the stand-in server as the backend, as
// perf/gateway does: called directly, through a bare forwarder (one HTTP
// hop and nothing else: the floor of any gateway), and through the
// gateway with an OpenAI client model.
func BenchmarkCall(b *testing.B) {
	fake := func() delegate.Model {
		return modeltest.New("m", func(context.Context, *delegate.Request) (*delegate.Response, error) {
			r := modeltest.Text("ok")
			r.PromptTokenIDs = []int{1, 2, 3}
			r.Choices[0].Logprobs = []delegate.TokenLogprob{{Token: "ok", TokenID: 4, Logprob: -0.1}}
			return r, nil
		})
	}
	b.Run("server", func(b *testing.B) {
		s, err := server.New(nil, fake())
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(s)
		defer srv.Close()
		runCalls(b, srv.URL+"/v1/chat/completions", "", `"m"`)
	})
	b.Run("gateway", func(b *testing.B) {
		base, id := openGateway(b, fake())
		runCalls(b, base+"/v1/chat/completions", id, `"m"`)
	})

	sb, err := standin.New(standin.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	backend := httptest.NewServer(sb)
	defer backend.Close()
	b.Run("standin/direct", func(b *testing.B) {
		runCalls(b, backend.URL+"/v1/chat/completions", "", `"standin"`)
	})
	b.Run("standin/proxy", func(b *testing.B) {
		proxy := httptest.NewServer(standin.Forwarder(backend.URL+"/v1/chat/completions", 16))
		defer proxy.Close()
		runCalls(b, proxy.URL+"/v1/chat/completions", "", `"standin"`)
	})
	b.Run("standin/gateway", func(b *testing.B) {
		cfg := openai.DefaultConfig()
		cfg.BaseURL, cfg.Model = backend.URL+"/v1", "standin"
		m, err := openai.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		base, id := openGateway(b, m)
		runCalls(b, base+"/v1/chat/completions", id, `"standin"`)
	})
}

// openGateway serves a gateway over m on loopback for the benchmark's
// life and opens one session. It returns the base URL and the session id.
// The session's bounds are lifted: it records every call of the run.
func openGateway(b *testing.B, m delegate.Model) (base, id string) {
	b.Helper()
	cfg := gateway.DefaultConfig()
	cfg.Dir, cfg.TTL = b.TempDir(), 1<<40
	cfg.MaxSessionCalls, cfg.MaxSessionBytes, cfg.MaxTotalBytes = 1<<30, 1<<40, 1<<40
	gw, err := gateway.Open(context.Background(), cfg, nil, m)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { gw.Close() })
	srv := httptest.NewServer(gw)
	b.Cleanup(srv.Close)
	resp, err := http.Post(srv.URL+"/sessions", "application/json", strings.NewReader(`{"group":"g"}`))
	if err != nil {
		b.Fatal(err)
	}
	var cr struct {
		SessionID string `json:"session_id"`
	}
	decode(b, resp, &cr)
	return srv.URL, cr.SessionID
}

// runCalls posts an agent's request for model to url, bodies read to the
// end so that the connection is kept, and reports CPU per call.
func runCalls(b *testing.B, url, key, model string) {
	body := `{"model":` + model + `,"messages":[{"role":"system","content":"Solve or delegate."},{"role":"user","content":"Dot has 91 jars of 23 coins. Gus has 19 jars of 83 coins. Gus gets 49 more. How many coins do they have in all?"}],"temperature":0}`
	cpu0 := processCPU()
	for b.Loop() {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is this process's user and system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func decode(b *testing.B, resp *http.Response, v any) {
	b.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSession measures one session through the gateway: it is
// opened, makes one call and is rewarded, and every fourth completes a
// group. The model answers at once. CPU per session is cpu-ns/op.
func BenchmarkSession(b *testing.B) {
	m := modeltest.New("m", func(context.Context, *delegate.Request) (*delegate.Response, error) {
		r := modeltest.Text("ok")
		r.PromptTokenIDs = []int{1, 2, 3}
		r.Choices[0].Logprobs = []delegate.TokenLogprob{{Token: "ok", TokenID: 4, Logprob: -0.1}}
		return r, nil
	})
	cfg := gateway.DefaultConfig()
	cfg.Dir = b.TempDir()
	gw, err := gateway.Open(context.Background(), cfg, nil, m)
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	srv := httptest.NewServer(gw)
	defer srv.Close()
	body := `{"model":"m","messages":[{"role":"system","content":"Solve or delegate."},{"role":"user","content":"Dot has 91 jars of 23 coins. Gus has 19 jars of 83 coins. Gus gets 49 more. How many coins do they have in all?"}],"temperature":0}`
	post := func(path, key, body string) []byte { return benchPost(b, srv.URL+path, key, body) }
	cpu0 := processCPU()
	i := 0
	for b.Loop() {
		var cr struct {
			SessionID string `json:"session_id"`
		}
		if err := json.Unmarshal(post("/sessions", "", `{"group":"g`+strconv.Itoa(i/4)+`"}`), &cr); err != nil {
			b.Fatal(err)
		}
		post("/v1/chat/completions", cr.SessionID, body)
		post("/sessions/"+cr.SessionID+"/reward", "", `{"reward":`+strconv.Itoa(i%2)+`}`)
		i++
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkOpen measures opening a session while every session opened
// before stays open, as with many agents at work. CPU per session is
// cpu-ns/op, in process: client and gateway.
func BenchmarkOpen(b *testing.B) {
	m := modeltest.New("m", func(context.Context, *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("ok"), nil
	})
	cfg := gateway.DefaultConfig()
	cfg.Dir = b.TempDir()
	gw, err := gateway.Open(context.Background(), cfg, nil, m)
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	srv := httptest.NewServer(gw)
	defer srv.Close()
	cpu0 := processCPU()
	for b.Loop() {
		benchPost(b, srv.URL+"/sessions", "", `{"group":"g"}`)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkModelSession measures one session of the route strategy's
// calls through the gateway, against a backend that answers as `delegate
// serve` answers the gateway: logprobs and token ids for every token,
// the prompt's ids (testdata/serve-*.json, the shipped models' answers,
// at once). The session is opened, makes the router's two turns and the
// solver's two calls, and is rewarded. CPU per session is cpu-ns/op, in
// process: client, gateway and canned backend.
func BenchmarkModelSession(b *testing.B) {
	router, err := os.ReadFile("testdata/serve-router.json")
	if err != nil {
		b.Fatal(err)
	}
	solver, err := os.ReadFile("testdata/serve-solver.json")
	if err != nil {
		b.Fatal(err)
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if bytes.Contains(body, []byte(`"model":"solver"`)) {
			w.Write(solver)
			return
		}
		w.Write(router)
	}))
	defer backend.Close()
	var models []delegate.Model
	for _, name := range []string{"delegator", "solver"} {
		cfg := openai.DefaultConfig()
		cfg.BaseURL, cfg.Model, cfg.TokenIDs = backend.URL+"/v1", name, true
		m, err := openai.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		models = append(models, m)
	}
	cfg := gateway.DefaultConfig()
	cfg.Dir = b.TempDir()
	gw, err := gateway.Open(context.Background(), cfg, nil, models...)
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	srv := httptest.NewServer(gw)
	defer srv.Close()
	calls := routeCalls
	post := func(path, body string) []byte { return benchPost(b, srv.URL+path, "", body) }
	cpu0 := processCPU()
	i := 0
	for b.Loop() {
		var cr struct {
			SessionID string `json:"session_id"`
		}
		if err := json.Unmarshal(post("/sessions", `{"group":"g`+strconv.Itoa(i/4)+`"}`), &cr); err != nil {
			b.Fatal(err)
		}
		for _, c := range calls {
			post("/s/"+cr.SessionID+"/v1/chat/completions", c)
		}
		post("/sessions/"+cr.SessionID+"/reward", `{"reward":`+strconv.Itoa(i%2)+`}`)
		i++
	}
	cpu := float64(processCPU()-cpu0) / float64(b.N)
	b.ReportMetric(cpu, "cpu-ns/op")
	b.ReportMetric(cpu/float64(len(calls)), "cpu-ns/call")
}

// routeCalls are a session of the route strategy's calls: the router's
// two turns around the solver's two calls.
var routeCalls = func() []string {
	const (
		problem = `{"role":"system","content":"Solve or delegate."},{"role":"user","content":"Dot has 91 jars of 23 coins. Gus has 19 jars of 83 coins. Gus gets 49 more. How many coins do they have in all?"}`
		tools   = `"tools":[{"type":"function","function":{"name":"delegate","description":"Send one self-contained question to a cheaper assistant.","parameters":{"type":"object","properties":{"question":{"type":"string"}},"required":["question"]}}}],"tool_choice":"auto"`
		called  = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_0_0_0","type":"function","function":{"name":"delegate","arguments":"{\"question\":\"91*23\"}"}},{"id":"call_0_0_1","type":"function","function":{"name":"delegate","arguments":"{\"question\":\"19*83\"}"}}]},{"role":"tool","tool_call_id":"call_0_0_0","content":"2093"},{"role":"tool","tool_call_id":"call_0_0_1","content":"1577"}`
	)
	return []string{
		`{"model":"delegator","messages":[` + problem + `],` + tools + `,"temperature":0,"max_tokens":768}`,
		`{"model":"solver","messages":[{"role":"system","content":"Compute."},{"role":"user","content":"91*23"}],"temperature":0,"max_tokens":64}`,
		`{"model":"solver","messages":[{"role":"system","content":"Compute."},{"role":"user","content":"19*83"}],"temperature":0,"max_tokens":64}`,
		`{"model":"delegator","messages":[` + problem + `,` + called + `],` + tools + `,"temperature":0,"max_tokens":768}`,
	}
}()

// BenchmarkLocalSession measures what the gateway adds when it hosts
// local models in process, as `delegate gateway` does with the shipped
// ones. The models answer at once with the shipped models' answers to
// routeCalls (canned), so that only the serving is measured. "server"
// is package server alone, as `delegate serve`: the four calls. "gateway"
// is one session of them: opened, called, verified, grouped by four.
// cpu-ns/call is the process's CPU per call: client, server and gateway.
func BenchmarkLocalSession(b *testing.B) {
	models := cannedModels(b)
	b.Run("server", func(b *testing.B) {
		cfg := server.DefaultConfig()
		cfg.System = system
		s, err := server.NewWithConfig(cfg, nil, models...)
		if err != nil {
			b.Fatal(err)
		}
		s.SetAccessLog(nil)
		srv := httptest.NewServer(s)
		defer srv.Close()
		cpu0 := processCPU()
		for b.Loop() {
			for _, c := range routeCalls {
				benchPost(b, srv.URL+"/v1/chat/completions", "", c)
			}
		}
		cpu := float64(processCPU()-cpu0) / float64(b.N)
		b.ReportMetric(cpu/float64(len(routeCalls)), "cpu-ns/call")
	})
	b.Run("gateway", func(b *testing.B) {
		cfg := gateway.DefaultConfig()
		cfg.Dir, cfg.Server.System, cfg.Verify = b.TempDir(), system, world.Verify
		hash := gateway.BuiltinTemplateHash()
		cfg.Templates = map[string]string{"delegator": hash, "solver": hash}
		cfg.Prices = map[string]delegate.Price{"delegator": {Input: 1, Output: 5}, "solver": {Input: 0.2, Output: 1}}
		gw, err := gateway.Open(context.Background(), cfg, nil, models...)
		if err != nil {
			b.Fatal(err)
		}
		defer gw.Close()
		srv := httptest.NewServer(gw)
		defer srv.Close()
		task := `"task":{"id":"p","dataset":"world","answer":"3719"}`
		cpu0 := processCPU()
		i := 0
		for b.Loop() {
			var cr struct {
				SessionID string `json:"session_id"`
			}
			if err := json.Unmarshal(benchPost(b, srv.URL+"/sessions", "", `{`+task+`,"group":"g`+strconv.Itoa(i/4)+`"}`), &cr); err != nil {
				b.Fatal(err)
			}
			for _, c := range routeCalls {
				benchPost(b, srv.URL+"/s/"+cr.SessionID+"/v1/chat/completions", "", c)
			}
			benchPost(b, srv.URL+"/sessions/"+cr.SessionID+"/reward", "", `{}`)
			i++
		}
		cpu := float64(processCPU()-cpu0) / float64(b.N)
		b.ReportMetric(cpu/float64(len(routeCalls)), "cpu-ns/call")
	})
}

// canned is a model that hands out, in turn, the answers its model gave
// once. A caller that did not ask for logprobs gets none, as from a
// local model. It is safe for concurrent use.
type canned struct {
	name    string
	answers []*delegate.Response
	next    atomic.Int64
}

func (c *canned) Name() string { return c.name }

func (c *canned) Chat(_ context.Context, req *delegate.Request) (*delegate.Response, error) {
	a := c.answers[int(c.next.Add(1)-1)%len(c.answers)]
	out := *a
	out.Choices = slices.Clone(a.Choices)
	if !req.Logprobs {
		for i := range out.Choices {
			out.Choices[i].Logprobs = nil
		}
	}
	return &out, nil
}

// cannedModels are the shipped delegator and solver as canned models:
// their answers to routeCalls, taken once through package server, with
// logprobs.
func cannedModels(b *testing.B) []delegate.Model {
	b.Helper()
	real := shipped(b)
	out := map[string]*canned{"delegator": {name: "delegator"}, "solver": {name: "solver"}}
	var models []delegate.Model
	for _, name := range []string{"delegator", "solver"} {
		c := out[name]
		models = append(models, modeltest.New(name, func(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
			r := *req
			r.Logprobs = true
			resp, err := real[name].Chat(ctx, &r)
			if err == nil {
				c.answers = append(c.answers, resp) // one call at a time
			}
			return resp, err
		}))
	}
	cfg := server.DefaultConfig()
	cfg.System = system
	s, err := server.NewWithConfig(cfg, nil, models...)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	for _, c := range routeCalls {
		benchPost(b, srv.URL+"/v1/chat/completions", "", c)
	}
	return []delegate.Model{out["delegator"], out["solver"]}
}

// benchPost posts body to url, with key as bearer token when not empty,
// and returns the answer, failing the benchmark unless it is 200.
func benchPost(b *testing.B, url, key, body string) []byte {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("POST %s: %d %s %v", url, resp.StatusCode, out, err)
	}
	return out
}
