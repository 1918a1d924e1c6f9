package view

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/trajectory/atropos"
	"github.com/delegatelab/delegate/trajectory/gateway"
	"github.com/delegatelab/delegate/trajectory/openenv"
)

// echoEnv is an environment whose episodes end at the first step.
type echoEnv struct{}

func (echoEnv) Reset(context.Context, *int64, string) (openenv.Observation, error) {
	return openenv.Observation{Value: map[string]any{}}, nil
}

func (echoEnv) Step(context.Context, json.RawMessage) (openenv.Observation, error) {
	return openenv.Observation{Value: map[string]any{}, Done: true}, nil
}

func (echoEnv) State() any   { return map[string]any{"step_count": 0} }
func (echoEnv) Close() error { return nil }

// liveServers starts a trajectory API, a gateway and an environment on loopback until the test ends.
// It returns them as the view polls them, and the gateway's base URL.
func liveServers(t testing.TB) ([]LiveServer, string) {
	t.Helper()
	acfg := atropos.DefaultConfig()
	acfg.Token = "api-token"
	as, err := atropos.NewInMemory(context.Background(), acfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := as.HTTPServer(as.Handler())
	go func() {
		_ = hs.Serve(ln) // ErrServerClosed after Close
	}()
	t.Cleanup(func() { hs.Close() })

	gcfg := gateway.DefaultConfig()
	gcfg.Dir, gcfg.Token = t.TempDir(), "admin"
	gw, err := gateway.Open(context.Background(), gcfg, nil, scripted{"delegator"})
	if err != nil {
		t.Fatal(err)
	}
	gs := httptest.NewServer(gw)
	t.Cleanup(func() {
		gs.Close()
		gw.Close()
	})

	ecfg := openenv.DefaultConfig()
	ecfg.Name, ecfg.New = "echo", func() (openenv.Environment, error) { return echoEnv{}, nil }
	env, err := openenv.NewServer(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	es := httptest.NewServer(env)
	t.Cleanup(es.Close)
	return []LiveServer{
		{Name: "api", URL: "http://" + ln.Addr().String(), Token: "api-token"},
		{Name: "gateway", URL: gs.URL, Token: "admin"},
		{Name: "env", URL: es.URL},
	}, gs.URL
}

// openSession opens a gateway session and makes one call in it; it
// ends the session with a reward when finish.
func openSession(t testing.TB, gwURL string, finish bool) {
	t.Helper()
	req, _ := http.NewRequest("POST", gwURL+"/sessions", strings.NewReader(`{"group":"g"}`))
	req.Header.Set("Authorization", "Bearer admin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var cr gateway.CreateResponse
	err = json.NewDecoder(resp.Body).Decode(&cr)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /sessions: %d %v", resp.StatusCode, err)
	}
	b, _ := json.Marshal(map[string]any{"model": "delegator", "messages": []delegate.Message{{Role: delegate.RoleUser, Content: "hi"}}})
	req, _ = http.NewRequest("POST", cr.BaseURL+"/chat/completions", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d", resp.StatusCode)
	}
	if !finish {
		return
	}
	req, _ = http.NewRequest("POST", gwURL+"/sessions/"+cr.SessionID+"/reward", strings.NewReader(`{"reward":1}`))
	req.Header.Set("Authorization", "Bearer admin")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("reward: %d", resp.StatusCode)
	}
}

// liveAnswer is /api/live.
type liveAnswer struct {
	Servers []LiveState `json:"servers"`
}

// waitLive polls /api/live until ok holds, for at most 10 s.
func waitLive(t testing.TB, base string, ok func(liveAnswer) bool) liveAnswer {
	t.Helper()
	var got liveAnswer
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = liveAnswer{}
		get(t, base, "/api/live", &got)
		if ok(got) {
			return got
		}
	}
	var brief []string
	for _, st := range got.Servers {
		b, _ := json.Marshal(last(st))
		brief = append(brief, fmt.Sprintf("%s: %d points, last %s, error %q", st.Name, len(st.Points), b, st.Error))
	}
	t.Fatalf("live state never matched:\n%s", strings.Join(brief, "\n"))
	return got
}

func last(st LiveState) LivePoint {
	if len(st.Points) == 0 {
		return LivePoint{}
	}
	return st.Points[len(st.Points)-1]
}

func TestLiveServers(t *testing.T) {
	servers, gwURL := liveServers(t)
	down := LiveServer{Name: "down", URL: "http://127.0.0.1:1"}
	_, hs := serveCold(t, config(func(c *Config) { c.Servers, c.Poll = append(servers, down), 20*time.Millisecond }))

	openSession(t, gwURL, false)
	got := waitLive(t, hs.URL, func(a liveAnswer) bool {
		if len(a.Servers) != 4 {
			return false
		}
		gp := last(a.Servers[1])
		return gp.Sessions != nil && *gp.Sessions == 1 && len(a.Servers[0].Points) > 1
	})
	tests := []struct {
		name       string
		up         bool
		healthPath string
		queue      bool // a queue depth is known
		metrics    string
	}{
		{"api", true, "/status", true, "delegate_api_request_duration_seconds"},
		{"gateway", true, "/health", true, "delegate_gateway_held_bytes"},
		{"env", true, "/health", false, ""},
		{"down", false, "/health", false, ""},
	}
	for i, tt := range tests {
		st := got.Servers[i]
		p := last(st)
		if st.Name != tt.name || st.Up != tt.up || p.Up != tt.up || st.HealthPath != tt.healthPath || (p.Queue != nil) != tt.queue {
			t.Errorf("%s: name %q up %v health %s queue %v; want up %v health %s queue known %v (error %q)",
				tt.name, st.Name, st.Up, st.HealthPath, p.Queue, tt.up, tt.healthPath, tt.queue, st.Error)
		}
		if tt.up != (st.Error == "") {
			t.Errorf("%s: error %q with up %v", tt.name, st.Error, tt.up)
		}
		found := tt.metrics == ""
		for _, m := range st.Metrics {
			found = found || m.Name == tt.metrics
		}
		if !found {
			t.Errorf("%s: no metric %s in %+v", tt.name, tt.metrics, st.Metrics)
		}
	}

	// The API counts the view's own polls; the gateway counts its
	// agents' requests.
	openSession(t, gwURL, true)
	got = waitLive(t, hs.URL, func(a liveAnswer) bool {
		busy := func(st LiveState) bool {
			for _, p := range st.Points {
				if p.Throughput != nil && *p.Throughput > 0 {
					return true
				}
			}
			return false
		}
		return busy(a.Servers[0]) && busy(a.Servers[1])
	})
	for i, want := range []string{"requests a second", "requests a second", "", ""} {
		if got.Servers[i].Throughput != want {
			t.Errorf("%s counts %q, want %q", got.Servers[i].Name, got.Servers[i].Throughput, want)
		}
	}
}

func TestLiveEvents(t *testing.T) {
	servers, _ := liveServers(t)
	_, hs := serveCold(t, config(func(c *Config) { c.Servers, c.Poll = servers[2:], 20*time.Millisecond }))
	resp, err := http.Get(hs.URL + "/api/live/events?after=0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	seen, prev, lastID := 0, 0, ""
	for seen < 3 && sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			lastID = id
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct{ Points []LivePoint }
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		for _, p := range ev.Points {
			seen++
			if !p.Up || p.Seq <= prev {
				t.Errorf("point %+v after seq %d: want up, in order", p, prev)
			}
			prev = p.Seq
		}
	}
	if seen < 3 || lastID == "" {
		t.Fatalf("saw %d points, last id %q; want 3 with ids", seen, lastID)
	}
	for _, tc := range []struct {
		path string
		want int
	}{{"/api/live/events?after=x", 400}} {
		if got := get(t, hs.URL, tc.path, nil); got != tc.want {
			t.Errorf("GET %s: %d, want %d", tc.path, got, tc.want)
		}
	}
}

func TestLiveServersConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		servers []LiveServer
		ok      bool
	}{
		{"one", []LiveServer{{Name: "a", URL: "http://127.0.0.1:8000"}}, true},
		{"no name", []LiveServer{{URL: "http://127.0.0.1:8000"}}, false},
		{"twice", []LiveServer{{Name: "a", URL: "http://h"}, {Name: "a", URL: "http://h"}}, false},
		{"no scheme", []LiveServer{{Name: "a", URL: "127.0.0.1:8000"}}, false},
	} {
		c := config(func(c *Config) { c.Servers = tc.servers })
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: got %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestLiveWrongToken polls a server with a wrong token: it is down, and
// the error names the refusal.
func TestLiveWrongToken(t *testing.T) {
	servers, _ := liveServers(t)
	api := servers[0]
	api.Token = "wrong"
	_, hs := serveCold(t, config(func(c *Config) { c.Servers, c.Poll = []LiveServer{api}, 20*time.Millisecond }))
	got := waitLive(t, hs.URL, func(a liveAnswer) bool { return len(a.Servers) == 1 && len(a.Servers[0].Points) > 0 })
	st := got.Servers[0]
	if st.Up || !strings.Contains(st.Error, "HTTP 401") {
		t.Errorf("up %v, error %q; want down with HTTP 401", st.Up, st.Error)
	}
}

// TestLiveCountsFromHealth checks which figures a health answer supplies:
// a gateway's live sessions always, its finished sessions and the API's
// queue only where /metrics gave none.
func TestLiveCountsFromHealth(t *testing.T) {
	num := func(v float64) *float64 { return &v }
	str := func(p *float64) string {
		if p == nil {
			return "null"
		}
		return fmt.Sprint(*p)
	}
	tests := []struct {
		name                      string
		metrics                   liveCounts
		status                    int
		health                    string
		queue, sessions, requests string
		unit                      string
	}{
		{"gateway", liveCounts{}, http.StatusOK, `{"live_sessions": 2, "sessions": {"finished": 5}}`, "null", "2", "5", "finished sessions"},
		{"live sessions over gauges", liveCounts{sessions: num(7), requests: num(3)}, http.StatusOK, `{"live_sessions": 2, "sessions": {"finished": 5}}`, "null", "2", "3", "requests"},
		{"api queue", liveCounts{}, http.StatusOK, `{"queue_size": 4}`, "4", "null", "null", "requests"},
		{"queue gauge first", liveCounts{queue: num(1)}, http.StatusOK, `{"queue_size": 4}`, "1", "null", "null", "requests"},
		{"health down", liveCounts{}, http.StatusServiceUnavailable, `{"queue_size": 4}`, "null", "null", "null", "requests"},
		{"not JSON", liveCounts{queue: num(1)}, http.StatusOK, `ok`, "1", "null", "null", "requests"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.metrics
			unit := c.fromHealth(tt.status, []byte(tt.health))
			got := []string{str(c.queue), str(c.sessions), str(c.requests), unit}
			want := []string{tt.queue, tt.sessions, tt.requests, tt.unit}
			if !slices.Equal(got, want) {
				t.Errorf("queue, sessions, requests, unit: got %q, want %q", got, want)
			}
		})
	}
}
