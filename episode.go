package delegate

import (
	"slices"
	"time"
)

// EpisodeVersion is the format version of a serialised Episode. A reader
// that meets another version must fail with an error naming both.
const EpisodeVersion = 1

// Episode is one task attempt as training sees it.
// It holds the samples of its trained roles, what every call spent, and the outcome.
type Episode struct {
	Version int    `json:"version"`
	TaskID  string `json:"task_id,omitempty"`
	// Trained names the roles that were trained; the others were frozen.
	Trained []string `json:"trained"`
	// Samples are the trained roles' sequences in call order. A frozen
	// role's calls are spent and counted, never sampled.
	Samples []Sample `json:"samples"`
	// Calls lists every call of the attempt, frozen roles included.
	Calls []CallSpend `json:"calls"`
	// CriticalPath is the model time along the slowest chain of calls
	// (CriticalPath); CriticalCalls counts the calls on it.
	CriticalPath  time.Duration `json:"critical_path_ns"`
	CriticalCalls int           `json:"critical_calls"`
	// Delegations counts the calls made in another role than the
	// attempt's first call: the work its lead handed on.
	Delegations int     `json:"delegations"`
	Outcome     Outcome `json:"outcome"`
}

// Sample is one training sequence of a role: one call, or a conversation
// of calls each extending the last (Sequences).
type Sample struct {
	Role  string `json:"role"`
	Model string `json:"model"`
	// Trained is always true: frozen roles give no samples. It is kept
	// so that a record says so without its reader knowing the run.
	Trained bool `json:"trained"`
	// PolicyVersion is the oldest weights version that generated it,
	// when the backend said.
	PolicyVersion *int `json:"policy_version,omitempty"`
	// Calls are the trace node IDs of its calls.
	Calls []int `json:"calls"`
	// Question is the last message its first call was given: the task
	// for a lead, the subtask for a sub-agent.
	Question string `json:"question"`
	// Answer is its last call's output.
	Answer string `json:"answer"`
	// Correct is the sample's own verifiable result, where one exists.
	// A sub-agent's answer to a question with a known answer has one.
	// Nil when only the task's outcome can judge the sample.
	Correct *bool `json:"correct,omitempty"`
	// Usage, Dollars and Latency sum its calls.
	Usage   Usage         `json:"usage"`
	Dollars float64       `json:"dollars"`
	Latency time.Duration `json:"latency_ns"`
}

// CallSpend is what one call of an attempt spent.
type CallSpend struct {
	ID      int           `json:"id"`
	Role    string        `json:"role"`
	Model   string        `json:"model"`
	Usage   Usage         `json:"usage"`
	Dollars float64       `json:"dollars"`
	Latency time.Duration `json:"latency_ns"`
}

// NewEpisode reads the attempt recorded in tr. Only the calls of trained
// roles become samples; policy names the role whose generated tokens are
// Outcome.Tokens. Outcome's Correct and Reward are the caller's to set.
func NewEpisode(tr *Trace, taskID, policy string, trained []string) *Episode {
	e := &Episode{Version: EpisodeVersion, TaskID: taskID, Trained: slices.Clone(trained), Samples: []Sample{}, Calls: []CallSpend{}}
	if e.Trained == nil {
		e.Trained = []string{}
	}
	if tr == nil {
		return e
	}
	calls := tr.Calls()
	nodes := make(map[int]*Node, len(calls))
	roles := map[string]RoleSpend{}
	for _, n := range calls {
		nodes[n.ID] = n
		e.Calls = append(e.Calls, CallSpend{ID: n.ID, Role: n.Role, Model: n.Model, Usage: n.Usage, Dollars: n.Cost, Latency: n.Latency})
		r := roles[n.Role]
		r.Calls++
		r.Usage = r.Usage.Add(n.Usage)
		r.Dollars += n.Cost
		roles[n.Role] = r
		e.Outcome.Cost += n.Cost
		if n.Role == policy {
			e.Outcome.Tokens += n.Usage.CompletionTokens
		}
		if n.Role != calls[0].Role {
			e.Delegations++
		}
	}
	e.Outcome.Calls = e.Delegations
	e.Outcome.Roles = roles
	e.Outcome.Latency = tr.Latency
	e.CriticalPath, e.CriticalCalls = CriticalPath(tr.Root)
	// One role at a time, as trainers read them: Sequences merges a
	// conversation only with the sequence just before it.
	var seqs []Sequence
	for _, role := range trained {
		seqs = append(seqs, Sequences(tr, role)...)
	}
	slices.SortStableFunc(seqs, func(a, b Sequence) int { return a.Calls[0] - b.Calls[0] })
	for _, s := range seqs {
		first, last := nodes[s.Calls[0]], nodes[s.Calls[len(s.Calls)-1]]
		sm := Sample{Role: first.Role, Model: first.Model, Trained: true, PolicyVersion: s.PolicyVersion,
			Calls: slices.Clone(s.Calls)}
		if k := len(first.Messages); k > 0 {
			sm.Question = first.Messages[k-1].Content
		}
		if last.Output != nil {
			sm.Answer = last.Output.Content
		}
		for _, id := range s.Calls {
			n := nodes[id]
			sm.Usage = sm.Usage.Add(n.Usage)
			sm.Dollars += n.Cost
			sm.Latency += n.Latency
		}
		e.Samples = append(e.Samples, sm)
	}
	return e
}

// RoleSamples returns the indices of role's samples.
func (e *Episode) RoleSamples(role string) []int {
	var out []int
	for i, s := range e.Samples {
		if s.Role == role {
			out = append(out, i)
		}
	}
	return out
}

// RolePolicy says what played a role in an attempt.
// It gives the model, whether it was trained, and the oldest weights version of its samples.
type RolePolicy struct {
	Role          string `json:"role"`
	Model         string `json:"model"`
	Trained       bool   `json:"trained"`
	PolicyVersion *int   `json:"policy_version,omitempty"`
}

// Policies lists the attempt's roles in the order of their first call,
// then any trained role that made no call.
func (e *Episode) Policies() []RolePolicy {
	var out []RolePolicy
	at := map[string]int{}
	add := func(role, model string) {
		if _, ok := at[role]; !ok {
			at[role] = len(out)
			out = append(out, RolePolicy{Role: role, Model: model, Trained: slices.Contains(e.Trained, role)})
		}
	}
	for _, c := range e.Calls {
		add(c.Role, c.Model)
	}
	for _, r := range e.Trained {
		add(r, "")
	}
	for _, s := range e.Samples {
		p := &out[at[s.Role]]
		p.PolicyVersion = OldestVersion(p.PolicyVersion, s.PolicyVersion)
	}
	return out
}

// MergePolicies adds b's roles to a.
// A role already in a keeps its model and the older version; it is trained when either says so.
func MergePolicies(a, b []RolePolicy) []RolePolicy {
	for _, p := range b {
		i := slices.IndexFunc(a, func(q RolePolicy) bool { return q.Role == p.Role })
		if i < 0 {
			a = append(a, p)
			continue
		}
		if a[i].Model == "" {
			a[i].Model = p.Model
		}
		a[i].Trained = a[i].Trained || p.Trained
		a[i].PolicyVersion = OldestVersion(a[i].PolicyVersion, p.PolicyVersion)
	}
	return a
}

// OldestVersion is the older of two weights versions; nil when neither
// is known.
func OldestVersion(a, b *int) *int {
	switch {
	case b == nil:
		return a
	case a == nil || *b < *a:
		v := *b
		return &v
	}
	return a
}
