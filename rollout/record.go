package rollout

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/strategy"
)

// Format versions of the records. A reader that meets another version must
// fail with an error naming both.
const (
	ArtifactVersion = 1
	GroupVersion    = 1
	SummaryVersion  = 1
)

// File names in the output directory.
const (
	ArtifactsFile = "artifacts.jsonl"
	GroupsFile    = "groups.jsonl"
	SummaryFile   = "summary.json"
	StateFile     = "state.db"
)

// Rollout statuses.
const (
	StatusScored = "scored" // the rollout ran and was scored
	StatusFailed = "failed" // a call it needed failed, or it could not be scored
)

// Reasons a group is not trained on, as Summary.Dropped counts them.
const (
	DropEqual      = "equal_scores" // every member got the same reward
	DropFormat     = "format"       // ... because every member failed the format
	DropTruncation = "truncation"   // ... because every member was truncated
	DropErrors     = "errors"       // fewer than two members scored, or the baseline failed
)

// Artifact is the record of one rollout in artifacts.jsonl.
// It holds what the reference recorded and more.
// The reference recorded the prompt, stage-1 raw output, subtasks, both final outputs, the judge's response and the reward.
type Artifact struct {
	Version  int    `json:"version"`
	ID       string `json:"id"` // "<task id>#<group>.<index>"
	Item     int    `json:"item"`
	TaskID   string `json:"task_id"`
	Dataset  string `json:"dataset,omitempty"`
	Group    int    `json:"group"`
	Index    int    `json:"index"`
	Seed     int64  `json:"seed"`
	Strategy string `json:"strategy"`
	Status   string `json:"status"`
	Error    string `json:"error,omitempty"`
	// Reason classifies a failed rollout's error as one of Fail*, as Summary.Failed counts it.
	Reason string `json:"reason,omitempty"`

	Prompt          string   `json:"prompt"`
	Reference       string   `json:"reference_answer,omitempty"`
	Stage1Raw       string   `json:"stage1_raw_output"`
	Subtasks        []string `json:"subtasks,omitempty"`
	SubagentOutputs []string `json:"subagent_outputs,omitempty"`
	FinalOutput     string   `json:"final_output"`
	Failure         string   `json:"failure,omitempty"`

	BaselineStrategy string `json:"baseline_strategy"`
	BaselineRaw      string `json:"baseline_raw_output"`
	BaselineOutput   string `json:"baseline_output"`
	BaselineFailure  string `json:"baseline_failure,omitempty"`

	Score  *Score  `json:"score,omitempty"`
	Reward float64 `json:"reward"`

	Roles       map[string]delegate.Totals `json:"roles"`
	Total       delegate.Totals            `json:"total"`
	ScoreTotals delegate.Totals            `json:"score_total"` // the scorer's calls (the judge)
	Latency     time.Duration              `json:"latency_ns"`
	Calls       []CallInfo                 `json:"calls"`

	// Episode is the attempt per role: its samples, each call's spend,
	// the critical path and the outcome. It has its own format version
	// (delegate.EpisodeVersion); records written before it lack it.
	Episode *delegate.Episode `json:"episode,omitempty"`

	Trace         *delegate.Trace `json:"trace,omitempty"`
	BaselineTrace *delegate.Trace `json:"baseline_trace,omitempty"`
	ScoreTrace    *delegate.Trace `json:"score_trace,omitempty"`
}

// CallInfo summarises one model call of a rollout.
type CallInfo struct {
	ID           int            `json:"id"`
	Name         string         `json:"name"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Usage        delegate.Usage `json:"usage"`
	Cost         float64        `json:"cost"`
	Latency      time.Duration  `json:"latency_ns"`
	FinishReason string         `json:"finish_reason,omitempty"`
	Error        string         `json:"error,omitempty"`
}

// GroupRecord is the record of one group in groups.jsonl, in the trajectory-group layout.
// Its arrays tokens, masks, inference_logprobs, messages, scores, advantages and overrides
// have one entry per sequence.
// SequenceRollout says which rollout each sequence belongs to.
// A rollout of decompose has two: its plan and its aggregation.
// Every sequence of a rollout carries the rollout's score and advantage.
type GroupRecord struct {
	Version int    `json:"version"`
	ID      string `json:"id"` // "<task id>#<group>"
	// Run is the run's random identifier.
	// With ID it is a group's identity across runs, which a trajectory API deduplicates on.
	Run      string `json:"run,omitempty"`
	Item     int    `json:"item"`
	TaskID   string `json:"task_id"`
	Group    int    `json:"group"`
	Strategy string `json:"strategy"`
	// Reason is DropEqual (or DropFormat, DropTruncation) for a tied group
	// written because of KeepTies, "" otherwise.
	Reason   string         `json:"reason,omitempty"`
	Rollouts []Member       `json:"rollouts"`
	Missing  []MissedMember `json:"missing,omitempty"`

	Tokens            [][]int           `json:"tokens"`
	Masks             [][]int           `json:"masks"`
	InferenceLogprobs [][]float64       `json:"inference_logprobs"`
	Messages          [][]delegate.Turn `json:"messages"`
	Scores            []float64         `json:"scores"`
	Advantages        []float64         `json:"advantages"`
	SequenceRollout   []int             `json:"sequence_rollout"`
	// NoTokens says, per sequence, why it has no tokens ("" when it has).
	NoTokens []string `json:"no_tokens"`
	// TokenizedBy says, per sequence, who computed its token ids. "gateway"
	// means delegate gateway tokenized a backend's text with the model's
	// chat template; "" means the engine gave them. Absent when no
	// sequence was tokenized so.
	TokenizedBy    []string      `json:"tokenized_by,omitempty"`
	Overrides      []Override    `json:"overrides"`
	GroupOverrides GroupOverride `json:"group_overrides"`
	// Episodes are the attempts of Rollouts per role, one per member in its order.
	// Their format is delegate.EpisodeVersion. Records written before they were kept lack them.
	Episodes []*delegate.Episode `json:"episodes,omitempty"`
	// PolicyVersion is the trainer step the rollouts were sampled with.
	// It is the oldest version the policy's backend reported,
	// else the sink's step when the item started, else 0.
	PolicyVersion int `json:"policy_version,omitempty"`
}

// Member is one scored rollout of a group.
type Member struct {
	ID        string  `json:"id"`
	Index     int     `json:"index"`
	Reward    float64 `json:"reward"`
	Advantage float64 `json:"advantage"`
	Fixed     string  `json:"fixed,omitempty"`
	// Outcome is what the reward was computed from, when the scorer
	// says (absent in records written before it was kept).
	Outcome *Outcome `json:"outcome,omitempty"`
}

// Outcome is the part of a scorer's reward.Outcome that a trainer reports in its metrics.
// It says whether the answer was right, nil without a reference,
// and gives the sub-agent calls, the policy's tokens and the cost.
// It is the root's outcome of an attempt; the fields older records had keep their names.
type Outcome = delegate.Outcome

// MissedMember is a rollout of the group that failed and is left out.
type MissedMember struct {
	ID    string `json:"id"`
	Index int    `json:"index"`
	Error string `json:"error"`
}

// Override is a per-sequence instruction to the trainer.
type Override struct {
	SetAdvantageToZero bool `json:"set_advantage_to_zero,omitempty"`
}

// GroupOverride is a per-group instruction to the trainer.
// It gives the number of rollouts the group holds, less than G when members failed,
// and what played each role.
type GroupOverride struct {
	GroupSize int `json:"group_size"`
	// Roles say what played each role of the group's rollouts.
	// Each gives its model, whether it was trained and the oldest weights version of its samples.
	Roles []delegate.RolePolicy `json:"roles,omitempty"`
}

func rolloutID(task string, group, index int) string {
	return task + "#" + strconv.Itoa(group) + "." + strconv.Itoa(index)
}

func groupID(task string, group int) string { return task + "#" + strconv.Itoa(group) }

// callInfos lists the calls of a trace.
func callInfos(t *delegate.Trace) []CallInfo {
	var out []CallInfo
	for _, n := range t.Calls() {
		out = append(out, CallInfo{ID: n.ID, Name: n.Name, Role: n.Role, Model: n.Model, Usage: n.Usage,
			Cost: n.Cost, Latency: n.Latency, FinishReason: n.FinishReason, Error: n.Error})
	}
	return out
}

// firstOutput is the output of the first call of one of roles, or "" when there is none.
// Examples are the decompose plan and the strong model's first turn.
func firstOutput(t *delegate.Trace, roles []string) string {
	for _, n := range t.Calls() {
		if containsString(roles, n.Role) && n.Output != nil {
			return n.Output.Content
		}
	}
	return ""
}

// subagentOutputs returns the outputs of decompose's sub-agents in subtask
// order, each from its last attempt.
func subagentOutputs(t *delegate.Trace) []string {
	if t.Root == nil {
		return nil
	}
	last := map[int]string{}
	maxI := 0
	for _, stage := range t.Root.Children {
		if stage.Name != strategy.NodeSubagents {
			continue
		}
		kids := append([]*delegate.Node(nil), stage.Children...)
		sort.Slice(kids, func(i, j int) bool { return kids[i].ID < kids[j].ID })
		for _, n := range kids {
			name, _, _ := strings.Cut(n.Name, strategy.RetrySuffix)
			i, err := strconv.Atoi(strings.TrimPrefix(name, strategy.SubagentPrefix))
			if err != nil || !strings.HasPrefix(name, strategy.SubagentPrefix) {
				continue
			}
			out := ""
			if n.Output != nil {
				out = n.Output.Content
			}
			if n.Error != "" && out == "" {
				out = "error: " + n.Error
			}
			last[i] = out
			maxI = max(maxI, i)
		}
	}
	if maxI == 0 {
		return nil
	}
	out := make([]string, maxI)
	for i := range out {
		out[i] = last[i+1]
	}
	return out
}

// subtasks parses the plan of a decompose rollout, nil when it is not one
// or the plan did not parse.
func subtasks(t *delegate.Trace, stage1 string) []string {
	if t.Strategy != strategy.NameDecompose || stage1 == "" {
		return nil
	}
	p, err := strategy.ParsePlan(stage1, 0, 1<<20)
	if err != nil {
		return nil
	}
	return p.Subtasks
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// decodeLine decodes one JSONL record, checking its version.
func decodeLine[T any](line []byte, version func(*T) int, want int, what string) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(line, v); err != nil {
		return nil, fmt.Errorf("decode %s: %w", what, err)
	}
	if got := version(v); got != want {
		return nil, fmt.Errorf("decode %s: version %d, this build reads version %d", what, got, want)
	}
	return v, nil
}

// DecodeArtifact decodes one line of artifacts.jsonl.
func DecodeArtifact(line []byte) (*Artifact, error) {
	a, err := decodeLine(line, func(a *Artifact) int { return a.Version }, ArtifactVersion, "artifact")
	if err != nil {
		return nil, err
	}
	if err := checkEpisode(a.Episode); err != nil {
		return nil, fmt.Errorf("decode artifact %s: %w", a.ID, err)
	}
	return a, nil
}

// DecodeGroup decodes one line of groups.jsonl.
func DecodeGroup(line []byte) (*GroupRecord, error) {
	g, err := decodeLine(line, func(g *GroupRecord) int { return g.Version }, GroupVersion, "group")
	if err != nil {
		return nil, err
	}
	for _, e := range g.Episodes {
		if err := checkEpisode(e); err != nil {
			return nil, fmt.Errorf("decode group %s: %w", g.ID, err)
		}
	}
	return g, nil
}

// checkEpisode accepts an absent episode or one of this build's version.
func checkEpisode(e *delegate.Episode) error {
	if e != nil && e.Version != delegate.EpisodeVersion {
		return fmt.Errorf("episode version %d, this build reads version %d: rewrite the records with this build", e.Version, delegate.EpisodeVersion)
	}
	return nil
}
