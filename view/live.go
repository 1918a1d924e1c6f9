package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// LiveServer is a running server the view polls: a trajectory API, a
// gateway or an environment.
type LiveServer struct {
	Name string
	URL  string // its base URL; /health and /metrics are read below it
	// Token, when set, goes with every poll as a bearer token.
	Token string
}

// maxLivePoints bounds the points kept per server: an hour at 1 s.
const maxLivePoints = 3600

// maxLiveBody bounds a /health or /metrics answer read.
const maxLiveBody = 8 << 20

// LivePoint is one poll of one server. A figure the server does not
// report is null.
type LivePoint struct {
	Seq    int    `json:"seq"` // counts every point of every server, from 1
	Server int    `json:"server"`
	Time   string `json:"time"`
	Up     bool   `json:"up"`
	// Queue sums the gauges whose name holds "queue", else is the
	// trajectory API's queue_size from /status.
	Queue *float64 `json:"queue"`
	// Sessions is a gateway's live_sessions from /health, else the sum
	// of the gauges whose name holds "session".
	Sessions *float64 `json:"sessions"`
	// Throughput is requests a second since the last poll: the change of
	// the *http_requests_total counters and *request_duration_seconds
	// histogram counts. A server without /metrics that reports sessions,
	// a gateway of an older build, counts the sessions finished instead
	// (LiveState.Throughput says which).
	Throughput *float64 `json:"throughput"`
}

// Metric is one metric family of a server, its series summed.
type Metric struct {
	Name  string  `json:"name"`
	Type  string  `json:"type"`
	Value float64 `json:"value"` // a histogram's or summary's count
}

// LiveState is a server's latest poll and its points.
type LiveState struct {
	Name          string          `json:"name"`
	URL           string          `json:"url"`
	Up            bool            `json:"up"`
	Error         string          `json:"error,omitempty"`
	HealthPath    string          `json:"health_path"` // /health, or /status where /health is not found
	HealthStatus  int             `json:"health_status"`
	Health        json.RawMessage `json:"health,omitempty"`
	MetricsStatus int             `json:"metrics_status"`
	// Throughput says what the points' throughput counts.
	Throughput string      `json:"throughput,omitempty"`
	Metrics    []Metric    `json:"metrics"`
	Points     []LivePoint `json:"points"`
}

// live polls the servers of Config.Servers.
type live struct {
	client *http.Client
	mu     sync.Mutex // guards what follows
	seq    int
	states []*LiveState
	// requests and at are each server's last request count and its time.
	requests []*float64
	at       []time.Time
	changed  chan struct{} // closed and replaced when points are added
}

func newLive(servers []LiveServer, poll time.Duration) *live {
	l := &live{client: &http.Client{Timeout: max(poll, 5*time.Second)}, changed: make(chan struct{}),
		requests: make([]*float64, len(servers)), at: make([]time.Time, len(servers))}
	for _, sv := range servers {
		l.states = append(l.states, &LiveState{Name: sv.Name, URL: sv.URL, Metrics: []Metric{}, Points: []LivePoint{}})
	}
	return l
}

// run polls every server each poll until ctx ends.
func (l *live) run(ctx context.Context, servers []LiveServer, poll time.Duration) {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		var wg sync.WaitGroup
		for i, sv := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.poll(ctx, i, sv)
			}()
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// fetch GETs path below the server's URL.
func (l *live) fetch(ctx context.Context, sv LiveServer, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(sv.URL, "/")+path, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", sv.Name, path, err)
	}
	if sv.Token != "" {
		req.Header.Set("Authorization", "Bearer "+sv.Token)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", sv.Name, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxLiveBody))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: %w", sv.Name, path, err)
	}
	return resp.StatusCode, body, nil
}

// poll reads one server's /health and /metrics and adds a point.
func (l *live) poll(ctx context.Context, i int, sv LiveServer) {
	now := time.Now()
	hpath, hstatus, health, herr := l.fetchHealth(ctx, sv)
	mstatus, fams, merr := l.fetchMetrics(ctx, sv)
	if ctx.Err() != nil {
		return
	}
	metrics, c := sumMetrics(fams)
	unit := c.fromHealth(hstatus, health)
	pt := LivePoint{Server: i, Time: now.UTC().Format(time.RFC3339Nano), Up: hstatus == http.StatusOK, Queue: c.queue, Sessions: c.sessions}

	l.mu.Lock()
	defer l.mu.Unlock()
	if prev := l.requests[i]; prev != nil && c.requests != nil && *c.requests >= *prev {
		if dt := now.Sub(l.at[i]).Seconds(); dt > 0 {
			v := (*c.requests - *prev) / dt
			pt.Throughput = &v
		}
	}
	l.requests[i], l.at[i] = c.requests, now
	if c.requests != nil {
		l.states[i].Throughput = unit + " a second"
	}
	l.seq++
	pt.Seq = l.seq
	st := l.states[i]
	st.Up, st.HealthPath, st.HealthStatus, st.MetricsStatus, st.Metrics = pt.Up, hpath, hstatus, mstatus, metrics
	st.Health = nil
	if json.Valid(health) {
		st.Health = health
	}
	st.Error = ""
	if err := errors.Join(herr, merr); err != nil {
		st.Error = err.Error()
	}
	st.Points = append(st.Points, pt)
	if len(st.Points) > maxLivePoints {
		st.Points = append(st.Points[:0:0], st.Points[len(st.Points)-maxLivePoints:]...)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// fetchHealth reads the server's /health, or /status where /health is not
// found. It returns the path read, the answer and what went wrong.
func (l *live) fetchHealth(ctx context.Context, sv LiveServer) (path string, status int, body []byte, err error) {
	path = "/health"
	status, body, err = l.fetch(ctx, sv, path)
	if err == nil && status == http.StatusNotFound {
		// The trajectory API answers /status, in Atropos's shape, instead.
		path = "/status"
		status, body, err = l.fetch(ctx, sv, path)
	}
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("%s %s: HTTP %d", sv.Name, path, status)
	}
	return path, status, body, err
}

// fetchMetrics reads and parses the server's /metrics. A server without
// metrics answers not found, which is no error.
func (l *live) fetchMetrics(ctx context.Context, sv LiveServer) (int, map[string]*dto.MetricFamily, error) {
	status, text, err := l.fetch(ctx, sv, "/metrics")
	switch {
	case err != nil:
		return status, nil, err
	case status == http.StatusOK:
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(strings.NewReader(string(text)))
		if err != nil {
			return status, fams, fmt.Errorf("%s /metrics: %w", sv.Name, err)
		}
		return status, fams, nil
	case status != http.StatusNotFound:
		// Not found is a server without metrics, as an environment is;
		// anything else, such as a refused token, is worth saying.
		return status, nil, fmt.Errorf("%s /metrics: HTTP %d", sv.Name, status)
	}
	return status, nil, nil
}

// liveCounts are the figures a point plots. Each is nil when the server
// reports none.
type liveCounts struct {
	queue, sessions, requests *float64
}

// addCount adds v to *p, which starts at 0 when nil.
func addCount(p **float64, v float64) {
	if *p == nil {
		*p = new(float64)
	}
	**p += v
}

// sumMetrics sums each metric family's series, by name. It also sums the
// families that count the queue, the sessions and the requests.
func sumMetrics(fams map[string]*dto.MetricFamily) ([]Metric, liveCounts) {
	metrics := []Metric{}
	var c liveCounts
	for _, name := range sortedKeys(fams) {
		f := fams[name]
		m := Metric{Name: name, Type: strings.ToLower(f.GetType().String())}
		for _, s := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				m.Value += s.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				m.Value += s.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				m.Value += float64(s.GetHistogram().GetSampleCount())
			case dto.MetricType_SUMMARY:
				m.Value += float64(s.GetSummary().GetSampleCount())
			case dto.MetricType_UNTYPED:
				m.Value += s.GetUntyped().GetValue()
			}
		}
		metrics = append(metrics, m)
		switch {
		case f.GetType() == dto.MetricType_GAUGE && strings.Contains(name, "queue"):
			addCount(&c.queue, m.Value)
		case f.GetType() == dto.MetricType_GAUGE && strings.Contains(name, "session"):
			addCount(&c.sessions, m.Value)
		case f.GetType() == dto.MetricType_COUNTER && strings.HasSuffix(name, "http_requests_total"),
			f.GetType() == dto.MetricType_HISTOGRAM && strings.HasSuffix(name, "request_duration_seconds"):
			addCount(&c.requests, m.Value)
		}
	}
	return metrics, c
}

// fromHealth takes from a health answer of status what the metrics did
// not give. That is a gateway's sessions and the trajectory API's queue.
// It returns what the requests count: requests, or a gateway's finished
// sessions.
func (c *liveCounts) fromHealth(status int, health []byte) (unit string) {
	var h struct {
		LiveSessions *float64           `json:"live_sessions"` // a gateway's
		Sessions     map[string]float64 `json:"sessions"`      // a gateway's, by status
		QueueSize    *float64           `json:"queue_size"`    // the trajectory API's
	}
	unit = "requests"
	if status != http.StatusOK || json.Unmarshal(health, &h) != nil {
		return unit
	}
	if h.LiveSessions != nil {
		c.sessions = h.LiveSessions
	}
	if h.Sessions != nil && c.requests == nil {
		// A gateway without /metrics (an older build): count its
		// finished sessions.
		f := h.Sessions["finished"]
		c.requests, unit = &f, "finished sessions"
	}
	if h.QueueSize != nil && c.queue == nil {
		c.queue = h.QueueSize
	}
	return unit
}

// snapshot copies the states.
func (l *live) snapshot() []LiveState {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]LiveState, len(l.states))
	for i, st := range l.states {
		out[i] = *st
		out[i].Points = append([]LivePoint(nil), st.Points...)
	}
	return out
}

// since returns the points after seq, oldest first, the last seq, and
// a channel closed when more arrive.
func (l *live) since(seq int) ([]LivePoint, int, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []LivePoint
	for _, st := range l.states {
		k := sort.Search(len(st.Points), func(j int) bool { return st.Points[j].Seq > seq })
		out = append(out, st.Points[k:]...)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Seq < out[b].Seq })
	return out, l.seq, l.changed
}

// validServers checks the names and URLs of servers.
func validServers(servers []LiveServer) error {
	seen := map[string]bool{}
	for _, sv := range servers {
		if sv.Name == "" || seen[sv.Name] {
			return fmt.Errorf("view: server name %q: want a name, once", sv.Name)
		}
		seen[sv.Name] = true
		u, err := url.Parse(sv.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("view: server %s: URL %q: want http://HOST[:PORT]", sv.Name, sv.URL)
		}
	}
	return nil
}

func (s *Server) handleLive(w http.ResponseWriter, r *http.Request) {
	reply(w, map[string]any{"poll_ms": ms(s.cfg.Poll), "servers": s.live.snapshot()}, nil)
}

// handleLiveEvents streams every server's new points as server-sent events.
// Each event's id is the last point's seq, so a browser that reconnects resumes after it.
func (s *Server) handleLiveEvents(w http.ResponseWriter, r *http.Request) {
	seq, err := resumePoint(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	es := startStream(w, s.cfg.Log)
	for {
		pts, last, changed := s.live.since(seq)
		es.extend()
		if len(pts) > 0 {
			seq = last
			if !es.send(seq, map[string]any{"points": pts}) {
				return // the client went away
			}
		} else if !es.beat() {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		case <-changed:
		case <-time.After(heartbeat):
		}
	}
}
