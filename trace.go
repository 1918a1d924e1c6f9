package delegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// TraceVersion is the format version of a serialised Trace. A reader that
// meets another version must fail with an error naming both.
const TraceVersion = 1

// Trace is the complete record of one strategy run.
// It holds a tree of every model call, the final answer, and totals per role.
type Trace struct {
	Version  int    `json:"version"`
	Strategy string `json:"strategy"`
	Request  string `json:"request"`
	Answer   string `json:"answer"`
	// Failure says, for people, why the run produced no proper answer.
	// Examples are a format failure or a failed call. Empty when the answer is proper.
	Failure string `json:"failure,omitempty"`
	// FailureKind is Failure's kind, for code to switch on.
	FailureKind FailureKind   `json:"failure_kind,omitempty"`
	Start       time.Time     `json:"start"`
	Latency     time.Duration `json:"latency_ns"`
	Root        *Node         `json:"root"`
	// Totals per role, and over all roles.
	Roles map[string]Totals `json:"roles"`
	Total Totals            `json:"total"`
	// DroppedEvents counts live events a slow observer did not take.
	DroppedEvents int64 `json:"dropped_events,omitempty"`
}

// Node is one step of a run: a model call, or a group of calls when Model is empty.
// A group is a stage or a fan-out.
type Node struct {
	ID    int    `json:"id"`
	Name  string `json:"name"`
	Role  string `json:"role,omitempty"`
	Model string `json:"model,omitempty"`
	// Endpoint names the replica that answered, for a model served by
	// several (Response.Endpoint).
	Endpoint string `json:"endpoint,omitempty"`
	// PolicyVersion is the version of the weights that answered, when the
	// backend said (Response.PolicyVersion).
	PolicyVersion *int          `json:"policy_version,omitempty"`
	Messages      []Message     `json:"messages,omitempty"`
	Output        *Message      `json:"output,omitempty"`
	Usage         Usage         `json:"usage"`
	Cost          float64       `json:"cost"`
	Start         time.Time     `json:"start"`
	Latency       time.Duration `json:"latency_ns"`
	Retries       int           `json:"retries,omitempty"`
	FinishReason  string        `json:"finish_reason,omitempty"`
	Error         string        `json:"error,omitempty"`
	// ErrorStatus and ErrorType classify Error so that readers never parse its text.
	// An *APIError gives its HTTP status and the server's error type.
	// A context that ended gives ErrKindTimeout or ErrKindCanceled.
	ErrorStatus int            `json:"error_status,omitempty"`
	ErrorType   string         `json:"error_type,omitempty"`
	Logprobs    []TokenLogprob `json:"logprobs,omitempty"`
	// PromptTokenIDs as the backend tokenized the prompt, when it said.
	PromptTokenIDs []int   `json:"prompt_token_ids,omitempty"`
	Children       []*Node `json:"children,omitempty"`

	parent *Node
	depth  int
}

// IsCall reports whether the node is a model call rather than a group.
func (n *Node) IsCall() bool { return n.Model != "" }

// Totals sums the calls of one role (or of all roles).
type Totals struct {
	Calls   int           `json:"calls"`
	Errors  int           `json:"errors,omitempty"`
	Retries int           `json:"retries,omitempty"`
	Usage   Usage         `json:"usage"`
	Cost    float64       `json:"cost"`
	Latency time.Duration `json:"latency_ns"` // summed over calls, not wall time
}

func (t *Totals) add(n *Node) {
	t.Calls++
	if n.Error != "" {
		t.Errors++
	}
	t.Retries += n.Retries
	t.Usage = t.Usage.Add(n.Usage)
	t.Cost += n.Cost
	t.Latency += n.Latency
}

// Add returns the sum of two totals.
func (t Totals) Add(u Totals) Totals {
	return Totals{Calls: t.Calls + u.Calls, Errors: t.Errors + u.Errors, Retries: t.Retries + u.Retries,
		Usage: t.Usage.Add(u.Usage), Cost: t.Cost + u.Cost, Latency: t.Latency + u.Latency}
}

// Agent is a model playing a role, with the price its calls are charged at.
type Agent struct {
	Role  string
	Model Model
	Price Price
	// Sampler, when set, adjusts each of the agent's requests before its
	// model sees them (Recorder.Call): a policy sampled in rollouts.
	Sampler *Sampler
}

// EventKind says whether a call started or finished.
type EventKind int

// The kinds of live event.
const (
	EventStart EventKind = iota
	EventFinish
)

// Event reports a node starting or finishing, for live views. It is a copy:
// observers never touch the trace itself.
type Event struct {
	Kind         EventKind
	ID, ParentID int
	Depth        int
	Name         string
	Role         string
	Model        string
	Usage        Usage
	Cost         float64
	Latency      time.Duration
	Retries      int
	FinishReason string
	Error        string
	Time         time.Time
	// Prompt is a call's last message in: what it was asked. Output is
	// its reply, on a finished call that got one.
	Prompt Message
	Output *Message
}

// Recorder builds the trace of one run. Its methods may be called from many
// goroutines at once. Events go to the optional channel by non-blocking
// sends; those a slow observer does not take are counted, never waited for.
type Recorder struct {
	mu      sync.Mutex
	trace   *Trace
	next    int
	events  chan<- Event
	dropped atomic.Int64
}

// NewRecorder starts the trace of a run of strategy on request. events may
// be nil.
func NewRecorder(strategy, request string, events chan<- Event) *Recorder {
	now := time.Now()
	root := &Node{ID: 0, Name: strategy, Start: now}
	return &Recorder{
		trace: &Trace{
			Version:  TraceVersion,
			Strategy: strategy,
			Request:  request,
			Start:    now,
			Root:     root,
		},
		next:   1,
		events: events,
	}
}

// Root returns the root node, the parent of a run's top-level steps.
func (r *Recorder) Root() *Node { return r.trace.Root }

func (r *Recorder) add(parent *Node, n *Node) {
	if parent == nil {
		parent = r.trace.Root
	}
	r.mu.Lock()
	n.ID = r.next
	r.next++
	n.parent = parent
	n.depth = parent.depth + 1
	parent.Children = append(parent.Children, n)
	r.mu.Unlock()
}

// Group adds a node that holds other steps (a stage, a fan-out) under
// parent (nil: the root) and returns it.
func (r *Recorder) Group(parent *Node, name string) *Node {
	n := &Node{Name: name, Start: time.Now()}
	r.add(parent, n)
	r.emit(EventStart, n)
	return n
}

// EndGroup marks a group finished, for live views.
func (r *Recorder) EndGroup(n *Node) { r.FailGroup(n, "") }

// FailGroup marks a group finished with a failure of the step as a whole.
// Examples are a plan that did not parse or a rejected tool call. An empty msg is a success.
func (r *Recorder) FailGroup(n *Node, msg string) {
	r.mu.Lock()
	n.Latency = time.Since(n.Start)
	if msg != "" {
		n.Error = msg
	}
	r.mu.Unlock()
	r.emit(EventFinish, n)
}

// Call sends req to agent's model as a child of parent and records the call.
// The node holds messages in and out, usage, cost, latency, retries, finish reason and error.
// The agent's Sampler, when set, first adjusts a copy of req.
// The returned error is the model's. The node records it too,
// so a caller that goes on after a failure loses nothing.
func (r *Recorder) Call(ctx context.Context, parent *Node, name string, a Agent, req *Request) (*Response, error) {
	if a.Sampler != nil {
		adjusted := a.Sampler.Adjust(req)
		req = &adjusted
	}
	n := &Node{
		Name:     name,
		Role:     a.Role,
		Model:    a.Model.Name(),
		Messages: append([]Message(nil), req.Messages...),
		Start:    time.Now(),
	}
	r.add(parent, n)
	r.emit(EventStart, n)

	resp, err := a.Model.Chat(ctx, req)
	if err == nil && (resp == nil || len(resp.Choices) == 0) {
		err = fmt.Errorf("model %s: response has no choices", n.Model)
	}

	r.mu.Lock()
	n.Latency = time.Since(n.Start)
	if resp != nil {
		n.Usage = resp.Usage
		n.Cost = a.Price.Cost(resp.Usage)
		n.Retries = resp.Retries
		n.PromptTokenIDs = resp.PromptTokenIDs
		n.Endpoint, n.PolicyVersion = resp.Endpoint, resp.PolicyVersion
		if len(resp.Choices) > 0 {
			c := resp.Choices[0]
			msg := c.Message
			n.Output = &msg
			n.FinishReason = c.FinishReason
			n.Logprobs = c.Logprobs
		}
	}
	if err != nil {
		n.Error = err.Error()
		n.ErrorStatus, n.ErrorType = ErrorClass(err)
		if ae := (*APIError)(nil); errors.As(err, &ae) && ae.Attempts > 1 {
			n.Retries = ae.Attempts - 1
		}
	}
	r.mu.Unlock()
	r.emit(EventFinish, n)
	return resp, err
}

func (r *Recorder) emit(kind EventKind, n *Node) {
	if r.events == nil {
		return
	}
	r.mu.Lock()
	ev := Event{
		Kind: kind, ID: n.ID, Depth: n.depth, Name: n.Name, Role: n.Role, Model: n.Model,
		Usage: n.Usage, Cost: n.Cost, Latency: n.Latency, Retries: n.Retries,
		FinishReason: n.FinishReason, Error: n.Error, Time: time.Now(),
	}
	if n.parent != nil {
		ev.ParentID = n.parent.ID
	}
	if len(n.Messages) > 0 {
		ev.Prompt = n.Messages[len(n.Messages)-1]
	}
	if n.Output != nil {
		out := *n.Output // the node's reply is never changed once set
		ev.Output = &out
	}
	r.mu.Unlock()
	select {
	case r.events <- ev:
	default:
		r.dropped.Add(1)
	}
}

// Finish closes the trace with the final answer, computes the totals and returns the trace.
// When the run produced no proper answer it records the failure too.
// Call it once, after every call of the run has returned.
func (r *Recorder) Finish(answer string, failure Failure) *Trace {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.trace
	t.Answer = answer
	t.Failure, t.FailureKind = failure.Message, failure.Kind
	t.Latency = time.Since(t.Start)
	t.Root.Latency = t.Latency
	t.Roles, t.Total = Tally(t.Root)
	t.DroppedEvents = r.dropped.Load()
	return t
}

// Tally sums the calls below n per role and over all roles.
func Tally(n *Node) (map[string]Totals, Totals) {
	roles := map[string]Totals{}
	var all Totals
	var walk func(*Node)
	walk = func(n *Node) {
		if n.IsCall() {
			t := roles[n.Role]
			t.add(n)
			roles[n.Role] = t
			all.add(n)
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(n)
	return roles, all
}

// Calls returns every call node of the trace in ID order.
func (t *Trace) Calls() []*Node {
	var out []*Node
	var walk func(*Node)
	walk = func(n *Node) {
		if n.IsCall() {
			out = append(out, n)
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	if t.Root != nil {
		walk(t.Root)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// UnmarshalJSON decodes a trace. A trace written before failure_kind was
// recorded gets the kind read from its failure message.
func (t *Trace) UnmarshalJSON(b []byte) error {
	type plain Trace // without this method
	if err := json.Unmarshal(b, (*plain)(t)); err != nil {
		return err
	}
	if t.FailureKind == "" {
		t.FailureKind = ParseFailureKind(t.Failure)
	}
	return nil
}
