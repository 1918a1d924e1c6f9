package view

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/store"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// gatewayRun is a gateway's output directory: its store of sessions and
// the group records it appended to groups.jsonl. The store is opened per
// request, so that the view never holds it while a gateway starts.
type gatewayRun struct {
	db     string // the store's path
	mu     sync.Mutex
	groups lines // guarded by mu; the lines are counted, not decoded
}

func newGatewayRun(dir string) *gatewayRun {
	return &gatewayRun{db: filepath.Join(dir, gateway.StoreFile), groups: lines{path: filepath.Join(dir, gateway.GroupsFile)}}
}

// refresh counts the group records written so far.
func (g *gatewayRun) refresh() (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	err := g.groups.advance(true, func(int, []byte) error { return nil })
	return g.groups.behind, err
}

func (g *gatewayRun) groupCount() (int, Progress, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	err := g.groups.advance(false, func(int, []byte) error { return nil })
	return g.groups.count(), g.groups.progress(), err
}

// storeWait bounds the wait for a store another process holds.
const storeWait = 200 * time.Millisecond

// open opens the gateway's store. A running gateway holds it: the error
// then says so.
func (g *gatewayRun) open(ctx context.Context) (*store.DB, error) {
	db, err := store.OpenWithin(ctx, g.db, storeWait)
	if err != nil {
		return nil, fmt.Errorf("gateway store (a running gateway holds it; watch it with --server): %w", err)
	}
	return db, nil
}

// count is the stored sessions.
func (g *gatewayRun) count(ctx context.Context) (int, error) {
	db, err := g.open(ctx)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	_, total, err := db.Sessions(ctx, 0, 0)
	return total, err
}

// RoleTotals are one role's calls, tokens and dollars in a session.
type RoleTotals struct {
	Role             string  `json:"role"`
	Calls            int     `json:"calls"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	Dollars          float64 `json:"dollars"`
}

// SessionRow is a session in the gateway's list. Key is the digest of
// the session's id: the id itself is a credential the gateway never
// stores.
type SessionRow struct {
	Key     string       `json:"key"`
	Group   string       `json:"group"`
	Status  string       `json:"status"`
	Created string       `json:"created"`
	Grouped bool         `json:"grouped"`
	Task    string       `json:"task,omitempty"`
	Reward  *float64     `json:"reward"` // null until finished
	Correct *bool        `json:"correct,omitempty"`
	Calls   int          `json:"calls"`
	Failed  int          `json:"failed"`  // calls without an answer
	Refused int          `json:"refused"` // calls refused at a bound
	Tokens  int          `json:"tokens"`
	Dollars float64      `json:"dollars"`
	Roles   []RoleTotals `json:"roles"`
}

// GatewaySummary is /api/gateway: sessions by status and the group
// records written.
type GatewaySummary struct {
	Statuses map[string]int `json:"statuses"`
	Groups   int            `json:"groups"`
	Progress Progress       `json:"progress"` // of groups.jsonl
}

// decodeFinished reads a finished session's data with the gateway's type.
func decodeFinished(raw []byte) (*gateway.Finished, error) {
	var f gateway.Finished
	if err := decodeVersioned(raw, &f, func() int { return f.Version }, gateway.FinishedVersion, "finished session"); err != nil {
		return nil, err
	}
	return &f, nil
}

// hasData says whether a stored session holds its Finished record:
// finished ones, and those dropped when their group timed out.
func hasData(s store.Session) bool {
	return (s.Status == store.SessionFinished || s.Status == store.SessionDropped) && len(s.Data) > 0
}

// sessionRow sums a stored session; one that is not finished has no data.
func sessionRow(s store.Session) (SessionRow, error) {
	row := SessionRow{Key: s.Key, Group: s.Group, Status: s.Status, Grouped: s.Grouped,
		Created: time.Unix(s.Created, 0).UTC().Format(time.RFC3339), Roles: []RoleTotals{}}
	if !hasData(s) {
		return row, nil
	}
	f, err := decodeFinished(s.Data)
	if err != nil {
		return row, fmt.Errorf("session %s: %w", s.Key, err)
	}
	reward := f.Reward
	row.Reward, row.Correct, row.Task, row.Refused = &reward, f.Correct, f.Task.ID, f.Refused
	byRole := map[string]*RoleTotals{}
	for _, c := range f.Calls {
		rt := byRole[c.Role]
		if rt == nil {
			rt = &RoleTotals{Role: c.Role}
			byRole[c.Role] = rt
		}
		rt.Calls++
		if c.Failed {
			row.Failed++
		}
		rt.PromptTokens += c.Usage.PromptTokens
		rt.CompletionTokens += c.Usage.CompletionTokens
		rt.Dollars += c.Cost
		row.Calls++
		row.Tokens += c.Usage.PromptTokens + c.Usage.CompletionTokens
		row.Dollars += c.Cost
	}
	for _, k := range sortedKeys(byRole) {
		row.Roles = append(row.Roles, *byRole[k])
	}
	return row, nil
}

func (s *Server) handleGateway(w http.ResponseWriter, r *http.Request) {
	run, err := s.run(r, KindGateway)
	if err != nil {
		reply(w, nil, err)
		return
	}
	offset, limit, err := page(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	out, err := run.gateway.summary(r.Context(), offset, limit)
	reply(w, out, err)
}

// gatewayPage is /api/gateway: the summary and a page of sessions.
type gatewayPage struct {
	GatewaySummary
	Sessions listPage[SessionRow] `json:"sessions"`
}

func (g *gatewayRun) summary(ctx context.Context, offset, limit int) (*gatewayPage, error) {
	n, prog, err := g.groupCount()
	if err != nil {
		return nil, err
	}
	db, err := g.open(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	counts, err := db.SessionCounts(ctx)
	if err != nil {
		return nil, err
	}
	stored, total, err := db.Sessions(ctx, offset, limit)
	if err != nil {
		return nil, err
	}
	out := &gatewayPage{GatewaySummary: GatewaySummary{Statuses: counts, Groups: n, Progress: prog}}
	out.Sessions = listPage[SessionRow]{Total: total, Offset: offset, Limit: limit, Items: []SessionRow{}, Progress: Progress{Complete: true}}
	for _, st := range stored {
		row, err := sessionRow(st)
		if err != nil {
			return nil, err
		}
		out.Sessions.Items = append(out.Sessions.Items, row)
	}
	return out, nil
}

// LogprobSummary sums a call's per-token logprobs.
type LogprobSummary struct {
	Tokens int     `json:"tokens"`
	Sum    float64 `json:"sum"`
	Mean   float64 `json:"mean"`
	Min    float64 `json:"min"`
	// Perplexity is exp(-Mean).
	Perplexity float64 `json:"perplexity"`
}

func summarizeLogprobs(lp []float64) *LogprobSummary {
	if len(lp) == 0 {
		return nil
	}
	s := &LogprobSummary{Tokens: len(lp), Min: math.Inf(1)}
	for _, v := range lp {
		s.Sum += v
		s.Min = min(s.Min, v)
	}
	s.Mean = s.Sum / float64(len(lp))
	s.Perplexity = math.Exp(-s.Mean)
	return s
}

// SessionCall is a recorded call as a node of its session's tree.
// A call whose messages continue an earlier call's conversation is its child.
type SessionCall struct {
	Index            int                `json:"index"`
	Role             string             `json:"role"`
	Trained          bool               `json:"trained"`
	Model            string             `json:"model"`
	Messages         []delegate.Message `json:"messages"`
	Output           delegate.Message   `json:"output"`
	FinishReason     string             `json:"finish_reason"`
	PromptTokens     int                `json:"prompt_tokens"`
	CompletionTokens int                `json:"completion_tokens"`
	PromptIDs        int                `json:"prompt_ids"`     // token ids recorded
	CompletionIDs    int                `json:"completion_ids"` // token ids recorded
	NoTokens         string             `json:"no_tokens,omitempty"`
	// Failed calls have no answer; Status and Error say why.
	Failed    bool            `json:"failed,omitempty"`
	Status    int             `json:"status,omitempty"`
	Error     string          `json:"error,omitempty"`
	Logprobs  *LogprobSummary `json:"logprobs"`
	Dollars   float64         `json:"dollars"`
	LatencyMS float64         `json:"latency_ms"`
	Children  []*SessionCall  `json:"children"`
}

// SessionView is /api/gateway/session: a session's row and its calls.
type SessionView struct {
	SessionRow
	Metadata map[string]string `json:"metadata,omitempty"`
	Prompt   string            `json:"prompt,omitempty"`
	Samples  int               `json:"samples"`
	Tree     []*SessionCall    `json:"tree"` // the calls, as the roots of their tree
}

func (s *Server) handleGatewaySession(w http.ResponseWriter, r *http.Request) {
	run, err := s.run(r, KindGateway)
	if err != nil {
		reply(w, nil, err)
		return
	}
	out, err := run.gateway.session(r.Context(), r.URL.Query().Get("key"))
	reply(w, out, err)
}

func (g *gatewayRun) session(ctx context.Context, key string) (*SessionView, error) {
	db, err := g.open(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	st, ok, err := db.SessionByKey(ctx, key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notFound("no session %q", key)
	}
	row, err := sessionRow(st)
	if err != nil {
		return nil, err
	}
	out := &SessionView{SessionRow: row, Tree: []*SessionCall{}}
	if !hasData(st) {
		return out, nil
	}
	f, err := decodeFinished(st.Data)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", key, err)
	}
	out.Metadata, out.Prompt, out.Samples = f.Metadata, f.Task.Prompt, len(f.Samples)
	out.Tree = callTree(f.Calls)
	return out, nil
}

// callTree links each call to its parent; calls without one are roots.
// The parent is the latest earlier call of its role whose messages and output begin its messages.
func callTree(calls []gateway.Call) []*SessionCall {
	sorted := append([]gateway.Call(nil), calls...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Index < sorted[j].Index })
	nodes := make([]*SessionCall, len(sorted))
	convs := make([][]string, len(sorted)) // each call's messages and output, as JSON
	roots := []*SessionCall{}
	for i, c := range sorted {
		n := &SessionCall{Index: c.Index, Role: c.Role, Trained: c.Trained, Model: c.Model, Messages: c.Request.Messages,
			Output: c.Output, FinishReason: c.FinishReason, PromptTokens: c.Usage.PromptTokens,
			CompletionTokens: c.Usage.CompletionTokens, PromptIDs: len(c.PromptTokenIDs), CompletionIDs: len(c.CompletionTokenIDs),
			NoTokens: c.NoTokens, Failed: c.Failed, Status: c.Status, Error: c.Error,
			Logprobs: summarizeLogprobs(c.Logprobs), Dollars: c.Cost, LatencyMS: ms(c.Latency),
			Children: []*SessionCall{}}
		nodes[i] = n
		msgs := make([]string, 0, len(c.Request.Messages)+1)
		for _, m := range c.Request.Messages {
			msgs = append(msgs, messageKey(m))
		}
		convs[i] = append(msgs, messageKey(c.Output))
		parent := -1
		for j := i - 1; j >= 0; j-- {
			if sorted[j].Role == c.Role && len(convs[j]) <= len(msgs) && equalPrefix(convs[j], msgs) {
				parent = j
				break
			}
		}
		if parent < 0 {
			roots = append(roots, n)
		} else {
			nodes[parent].Children = append(nodes[parent].Children, n)
		}
	}
	return roots
}

// messageKey is a message as JSON, for comparing conversations.
func messageKey(m delegate.Message) string {
	b, err := json.Marshal(m)
	if err != nil {
		// A message that does not encode matches nothing.
		return fmt.Sprintf("unencodable %p", &m)
	}
	return string(b)
}

func equalPrefix(prefix, of []string) bool {
	for i := range prefix {
		if prefix[i] != of[i] {
			return false
		}
	}
	return true
}
