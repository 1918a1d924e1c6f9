package view

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"time"

	"github.com/delegatelab/delegate"
)

// readTraceFile reads a trace written by run --json.
func readTraceFile(path string) (*delegate.Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read trace %s: %w", path, err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxTraceFile+1))
	if err != nil {
		return nil, fmt.Errorf("read trace %s: %w", path, err)
	}
	if len(raw) > maxTraceFile {
		return nil, fmt.Errorf("read trace %s: larger than %d bytes", path, maxTraceFile)
	}
	t, err := decodeTrace(raw)
	if err != nil {
		return nil, fmt.Errorf("read trace %s: %w", path, err)
	}
	return t, nil
}

// decodeTrace decodes a trace and checks its version.
func decodeTrace(raw []byte) (*delegate.Trace, error) {
	var t delegate.Trace
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, err
	}
	if err := checkTrace(&t); err != nil {
		return nil, err
	}
	return &t, nil
}

func checkTrace(t *delegate.Trace) error {
	if t.Version != delegate.TraceVersion {
		return fmt.Errorf("trace version %d, this program reads version %d: use the matching version of delegate", t.Version, delegate.TraceVersion)
	}
	if t.Root == nil {
		return fmt.Errorf("trace has no root node")
	}
	return nil
}

// Node is a trace node as the view serves it: the call and what it sums
// below it.
type Node struct {
	ID           int                `json:"id"`
	Name         string             `json:"name"`
	Role         string             `json:"role,omitempty"`
	Model        string             `json:"model,omitempty"`
	Messages     []delegate.Message `json:"messages,omitempty"`
	Output       *delegate.Message  `json:"output,omitempty"`
	Usage        delegate.Usage     `json:"usage"`
	Cost         float64            `json:"cost"`
	LatencyMS    float64            `json:"latency_ms"`
	Retries      int                `json:"retries,omitempty"`
	FinishReason string             `json:"finish_reason,omitempty"`
	Error        string             `json:"error,omitempty"`
	ErrorStatus  int                `json:"error_status,omitempty"`
	ErrorType    string             `json:"error_type,omitempty"`
	// Critical marks the node on the critical path: the slowest chain
	// of calls, as delegate.CriticalPath measures it.
	Critical bool `json:"critical,omitempty"`
	// Subtotal sums the calls of the subtree, the node's own included.
	Subtotal delegate.Totals `json:"subtotal"`
	Children []*Node         `json:"children,omitempty"`
}

// TraceView is a whole trace as the view serves it.
type TraceView struct {
	Strategy   string                     `json:"strategy"`
	Request    string                     `json:"request"`
	Answer     string                     `json:"answer"`
	Failure    string                     `json:"failure,omitempty"`
	LatencyMS  float64                    `json:"latency_ms"`
	Roles      map[string]delegate.Totals `json:"roles"`
	Total      delegate.Totals            `json:"total"`
	CriticalMS float64                    `json:"critical_ms"`
	// CriticalCalls is the number of calls on the critical path.
	CriticalCalls int   `json:"critical_calls"`
	Root          *Node `json:"root"`
}

// NewTraceView builds the tree of t with subtotals and the critical path.
func NewTraceView(t *delegate.Trace) *TraceView {
	crit := map[*delegate.Node]bool{}
	markCritical(t.Root, crit)
	d, calls := delegate.CriticalPath(t.Root)
	return &TraceView{
		Strategy: t.Strategy, Request: t.Request, Answer: t.Answer, Failure: t.Failure,
		LatencyMS: ms(t.Latency), Roles: t.Roles, Total: t.Total,
		CriticalMS: ms(d), CriticalCalls: calls, Root: viewNode(t.Root, crit),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func viewNode(n *delegate.Node, crit map[*delegate.Node]bool) *Node {
	v := &Node{ID: n.ID, Name: n.Name, Role: n.Role, Model: n.Model, Messages: n.Messages, Output: n.Output,
		Usage: n.Usage, Cost: n.Cost, LatencyMS: ms(n.Latency), Retries: n.Retries, FinishReason: n.FinishReason,
		Error: n.Error, ErrorStatus: n.ErrorStatus, ErrorType: n.ErrorType, Critical: crit[n]}
	if n.IsCall() {
		errs := 0
		if n.Error != "" {
			errs = 1
		}
		v.Subtotal = delegate.Totals{Calls: 1, Errors: errs, Retries: n.Retries, Usage: n.Usage, Cost: n.Cost, Latency: n.Latency}
	}
	for _, c := range n.Children {
		cv := viewNode(c, crit)
		v.Subtotal = v.Subtotal.Add(cv.Subtotal)
		v.Children = append(v.Children, cv)
	}
	return v
}

// markCritical marks the nodes of the chain delegate.CriticalPath
// measures: in each stage of a group's children, the slowest child.
// It follows CriticalPath's stages and ties exactly, so the marked
// calls' latencies sum to its duration.
func markCritical(n *delegate.Node, crit map[*delegate.Node]bool) {
	if n == nil {
		return
	}
	crit[n] = true
	if n.IsCall() {
		return
	}
	kids := append([]*delegate.Node(nil), n.Children...)
	sort.SliceStable(kids, func(i, j int) bool { return kids[i].Start.Before(kids[j].Start) })
	var stageEnd time.Time
	var best *delegate.Node
	var bestD time.Duration
	var bestK int
	for i, c := range kids {
		d, k := delegate.CriticalPath(c)
		if i > 0 && !c.Start.Before(stageEnd) {
			markCritical(best, crit)
			best, bestD, bestK = nil, 0, 0
		}
		if best == nil || d > bestD || d == bestD && k > bestK {
			best, bestD, bestK = c, d, k
		}
		if end := subtreeEnd(c); i == 0 || end.After(stageEnd) {
			stageEnd = end
		}
	}
	markCritical(best, crit)
}

// subtreeEnd is when n ended: its start plus its latency, or the latest
// end below it when later. It matches delegate's own rule.
func subtreeEnd(n *delegate.Node) time.Time {
	end := n.Start.Add(n.Latency)
	for _, c := range n.Children {
		if e := subtreeEnd(c); e.After(end) {
			end = e
		}
	}
	return end
}

// handleTrace serves a trace file's trace, or the one a bench record or a rollout holds.
// ?rec= picks the record; for a rollout ?which= picks trace, baseline or score.
func (s *Server) handleTrace(w http.ResponseWriter, r *http.Request) {
	t, err := s.trace(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	reply(w, NewTraceView(t), nil)
}

func (s *Server) trace(r *http.Request) (*delegate.Trace, error) {
	run, err := s.run(r, "")
	if err != nil {
		return nil, err
	}
	switch run.Kind {
	case KindTrace:
		return readTraceFile(run.Path)
	case KindBench:
		i, err := index(r)
		if err != nil {
			return nil, err
		}
		rec, err := run.bench.record(i)
		if err != nil {
			return nil, err
		}
		if rec.Trace == nil {
			return nil, notFound("record %d of %s has no trace: run bench with its trace flag to keep them", i, run.Path)
		}
		return rec.Trace, checkTrace(rec.Trace)
	case KindRollouts:
		i, err := index(r)
		if err != nil {
			return nil, err
		}
		a, err := run.rollouts.artifact(i)
		if err != nil {
			return nil, err
		}
		var t *delegate.Trace
		switch which := r.URL.Query().Get("which"); which {
		case "", "trace":
			t = a.Trace
		case "baseline":
			t = a.BaselineTrace
		case "score":
			t = a.ScoreTrace
		default:
			return nil, badRequest("which %q: want trace, baseline or score", which)
		}
		if t == nil {
			return nil, notFound("rollout %d of %s has no such trace (process --omit-traces leaves them out)", i, run.Path)
		}
		return t, checkTrace(t)
	}
	return nil, badRequest("run %d is a %s, which has no trace", run.ID, run.Kind)
}

// decodeVersioned decodes one JSONL record and checks its version.
func decodeVersioned(raw []byte, v any, version func() int, want int, what string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if got := version(); got != want {
		return fmt.Errorf("%s version %d, this program reads version %d: use the matching version of delegate", what, got, want)
	}
	return nil
}
