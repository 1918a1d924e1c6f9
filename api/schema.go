package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
)

// ScoredData is one group of sequences scored together, Atropos's
// ScoredData. Tokens holds full sequences; Masks is -100 where a token is
// not trained and the token id where it is; Scores has one score per
// sequence. The other fields are optional and passed through to the
// trainer as sent. GroupOverrides may carry "group_id" (the group's
// identity for deduplication) and "policy_version" (the trainer step the
// rollouts were sampled with).
type ScoredData struct {
	Tokens            [][]int            `json:"tokens"`
	Masks             [][]int            `json:"masks"`
	Scores            []float64          `json:"scores"`
	Advantages        [][]float64        `json:"advantages"`
	RefLogprobs       [][]float64        `json:"ref_logprobs"`
	Messages          [][]map[string]any `json:"messages"`
	GenerationParams  map[string]any     `json:"generation_params"`
	InferenceLogprobs [][]float64        `json:"inference_logprobs"`
	Overrides         []map[string]any   `json:"overrides"`
	GroupOverrides    map[string]any     `json:"group_overrides"`
	Images            any                `json:"images"`
	EnvID             *int               `json:"env_id"`
	DistillTokenIDs   [][][]int          `json:"distill_token_ids"`
	DistillLogprobs   [][][]float64      `json:"distill_logprobs"`
}

// Registration is a trainer's POST /register body.
type Registration struct {
	WandbGroup             string `json:"wandb_group"`
	WandbProject           string `json:"wandb_project"`
	BatchSize              int    `json:"batch_size"`
	MaxTokenLen            int    `json:"max_token_len"`
	CheckpointDir          string `json:"checkpoint_dir"`
	SaveCheckpointInterval int    `json:"save_checkpoint_interval"`
	StartingStep           int    `json:"starting_step"`
	NumSteps               int    `json:"num_steps"`
}

// RegisterEnv is an environment's POST /register-env body.
// MinBatchAllocation, when set, is the least fraction (0..1) of every
// batch given to this environment's groups.
type RegisterEnv struct {
	MaxTokenLength     int      `json:"max_token_length"`
	DesiredName        string   `json:"desired_name"`
	Weight             float64  `json:"weight"`
	GroupSize          int      `json:"group_size"`
	MinBatchAllocation *float64 `json:"min_batch_allocation"`
}

// EnvIdentifier names an environment (GET /status-env, POST /disconnect-env).
type EnvIdentifier struct {
	EnvID int `json:"env_id"`
}

// RegisterEnvResponse answers POST /register-env. Before the trainer's
// first GET /batch only Status is set, to "wait for trainer to start".
type RegisterEnvResponse struct {
	Status             string `json:"status"`
	EnvID              int    `json:"env_id,omitempty"`
	WandbName          string `json:"wandb_name,omitempty"`
	CheckpointDir      string `json:"checkpoint_dir,omitempty"`
	StartingStep       int    `json:"starting_step"`
	CheckpointInterval int    `json:"checkpoint_interval,omitempty"`
	NumSteps           int    `json:"num_steps,omitempty"`
}

// StatusEnv answers GET /status-env. QueueSize and SelfQueueSize count
// groups of the asking environment's group size.
type StatusEnv struct {
	CurrentStep         int     `json:"current_step"`
	QueueSize           int     `json:"queue_size"`
	UnallocatedFraction float64 `json:"unallocated_fraction"`
	SelfQueueSize       int     `json:"self_queue_size"`
	MaxGroupSize        int     `json:"max_group_size"`
	EnvWeight           float64 `json:"env_weight"`
}

// Status answers GET /status: the trainer's step and the groups queued.
type Status struct {
	CurrentStep int `json:"current_step"`
	QueueSize   int `json:"queue_size"`
}

// ScoredResponse answers POST /scored_data: Status is "received", or
// "buffered" with BufferSize, the sequences this environment has waiting
// in its buffer of odd-sized groups.
type ScoredResponse struct {
	Status     string `json:"status"`
	BufferSize *int   `json:"buffer_size,omitempty"`
}

// Batch answers GET /batch. Batch is nil when no batch is ready. Step is
// the batch's step (an extension; Atropos sends no step).
type Batch struct {
	Batch []ScoredData `json:"batch"`
	Step  int          `json:"step,omitempty"`
}

// fieldOrder is Atropos's field order of a group as the trainer sees it:
// every field present, null when not sent.
var fieldOrder = [...]string{
	"tokens", "masks", "scores", "advantages", "ref_logprobs", "messages",
	"generation_params", "inference_logprobs", "overrides", "group_overrides",
	"images", "env_id", "distill_token_ids", "distill_logprobs",
}

// rawGroup is a group as received, each field kept as sent.
type rawGroup struct {
	Tokens            json.RawMessage `json:"tokens"`
	Masks             json.RawMessage `json:"masks"`
	Scores            json.RawMessage `json:"scores"`
	Advantages        json.RawMessage `json:"advantages"`
	RefLogprobs       json.RawMessage `json:"ref_logprobs"`
	Messages          json.RawMessage `json:"messages"`
	GenerationParams  json.RawMessage `json:"generation_params"`
	InferenceLogprobs json.RawMessage `json:"inference_logprobs"`
	Overrides         json.RawMessage `json:"overrides"`
	GroupOverrides    json.RawMessage `json:"group_overrides"`
	Images            json.RawMessage `json:"images"`
	EnvID             json.RawMessage `json:"env_id"`
	DistillTokenIDs   json.RawMessage `json:"distill_token_ids"`
	DistillLogprobs   json.RawMessage `json:"distill_logprobs"`
}

// group is a validated group ready to store: its body in Atropos's shape
// and what the queue needs to know about it.
type group struct {
	body      []byte
	id        string
	env       int // -1: no env_id
	size      int
	policy    int64
	hasPolicy bool
}

// fieldError is a schema violation, reported like FastAPI's 422 detail.
type fieldError struct {
	loc []any
	msg string
}

func (e *fieldError) Error() string {
	var b bytes.Buffer
	for i, l := range e.loc {
		if i > 0 {
			b.WriteByte('.')
		}
		fmt.Fprint(&b, l)
	}
	return b.String() + ": " + e.msg
}

func fieldErr(msg string, loc ...any) *fieldError { return &fieldError{loc: loc, msg: msg} }

// parseGroup validates one group like Atropos's pydantic model, plus the
// shape checks Atropos leaves to the trainer (masks like tokens, one
// score per sequence). loc prefixes error locations ("body" or "body", i).
func parseGroup(data []byte, loc ...any) (*group, error) {
	at := func(field string, rest ...any) []any {
		return append(append(append([]any{}, loc...), field), rest...)
	}
	var r rawGroup
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, &fieldError{loc: loc, msg: "not a JSON object of a group: " + err.Error()}
	}
	g := &group{env: -1}
	for _, req := range []struct {
		name string
		raw  json.RawMessage
	}{{"tokens", r.Tokens}, {"masks", r.Masks}, {"scores", r.Scores}} {
		if isNull(req.raw) {
			return nil, &fieldError{loc: at(req.name), msg: "Field required"}
		}
	}
	tokens, err := scanNumbers(r.Tokens, 2, true)
	if err != nil {
		return nil, &fieldError{loc: at("tokens", err.path...), msg: err.msg}
	}
	masks, err := scanNumbers(r.Masks, 2, true)
	if err != nil {
		return nil, &fieldError{loc: at("masks", err.path...), msg: err.msg}
	}
	scores, err := scanNumbers(r.Scores, 1, false)
	if err != nil {
		return nil, &fieldError{loc: at("scores", err.path...), msg: err.msg}
	}
	n := len(tokens.inner)
	if n == 0 {
		return nil, &fieldError{loc: at("tokens"), msg: "a group needs at least one sequence"}
	}
	if len(masks.inner) != n {
		return nil, &fieldError{loc: at("masks"), msg: fmt.Sprintf("has %d sequences, tokens has %d", len(masks.inner), n)}
	}
	for i := range n {
		if masks.inner[i] != tokens.inner[i] {
			return nil, &fieldError{loc: at("masks", i), msg: fmt.Sprintf("has %d positions, tokens[%d] has %d", masks.inner[i], i, tokens.inner[i])}
		}
	}
	if scores.outer != n {
		return nil, &fieldError{loc: at("scores"), msg: fmt.Sprintf("has %d scores for %d sequences", scores.outer, n)}
	}
	g.size = n
	for _, opt := range []struct {
		name  string
		raw   json.RawMessage
		depth int
		ints  bool
	}{
		{"advantages", r.Advantages, 2, false},
		{"ref_logprobs", r.RefLogprobs, 2, false},
		{"inference_logprobs", r.InferenceLogprobs, 2, false},
		{"distill_token_ids", r.DistillTokenIDs, 3, true},
		{"distill_logprobs", r.DistillLogprobs, 3, false},
	} {
		if isNull(opt.raw) {
			continue
		}
		if _, err := scanNumbers(opt.raw, opt.depth, opt.ints); err != nil {
			return nil, &fieldError{loc: at(opt.name, err.path...), msg: err.msg}
		}
	}
	if !isNull(r.Messages) {
		var msgs [][]map[string]json.RawMessage
		if err := json.Unmarshal(r.Messages, &msgs); err != nil {
			return nil, &fieldError{loc: at("messages"), msg: "must be a list of lists of message objects"}
		}
		for i, conv := range msgs {
			for j, m := range conv {
				if _, ok := m["role"]; !ok {
					return nil, &fieldError{loc: at("messages", i, j), msg: "Message must have 'role' and 'content' fields"}
				}
				if _, ok := m["content"]; !ok {
					return nil, &fieldError{loc: at("messages", i, j), msg: "Message must have 'role' and 'content' fields"}
				}
			}
		}
	}
	for _, obj := range []struct {
		name string
		raw  json.RawMessage
	}{{"generation_params", r.GenerationParams}, {"group_overrides", r.GroupOverrides}} {
		if !isNull(obj.raw) && firstByte(obj.raw) != '{' {
			return nil, &fieldError{loc: at(obj.name), msg: "Input should be a valid dictionary"}
		}
	}
	if !isNull(r.Overrides) {
		var ov []map[string]json.RawMessage
		if err := json.Unmarshal(r.Overrides, &ov); err != nil {
			return nil, &fieldError{loc: at("overrides"), msg: "must be a list of objects"}
		}
	}
	if !isNull(r.EnvID) {
		id, err := strconv.Atoi(string(bytes.TrimSpace(r.EnvID)))
		if err != nil {
			return nil, &fieldError{loc: at("env_id"), msg: "Input should be a valid integer"}
		}
		g.env = id
	}
	var explicitID string
	if !isNull(r.GroupOverrides) {
		var over map[string]json.RawMessage
		if err := json.Unmarshal(r.GroupOverrides, &over); err != nil {
			return nil, &fieldError{loc: at("group_overrides"), msg: "Input should be a valid dictionary"}
		}
		if v, ok := over["policy_version"]; ok && !isNull(v) {
			pv, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return nil, &fieldError{loc: at("group_overrides", "policy_version"), msg: "Input should be a valid integer (the trainer step the rollouts were sampled with)"}
			}
			g.policy, g.hasPolicy = pv, true
		}
		if v, ok := over["group_id"]; ok && !isNull(v) {
			var s string
			if json.Unmarshal(v, &s) != nil {
				s = string(bytes.TrimSpace(v)) // a number or other JSON value: its text
			}
			explicitID = s
		}
	}
	fields := [...]json.RawMessage{
		r.Tokens, r.Masks, r.Scores, r.Advantages, r.RefLogprobs, r.Messages,
		r.GenerationParams, r.InferenceLogprobs, r.Overrides, r.GroupOverrides,
		r.Images, r.EnvID, r.DistillTokenIDs, r.DistillLogprobs,
	}
	var b bytes.Buffer
	b.Grow(len(data))
	b.WriteByte('{')
	for i, name := range fieldOrder {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(name)
		b.WriteString(`":`)
		if isNull(fields[i]) {
			b.WriteString("null")
			continue
		}
		if err := json.Compact(&b, fields[i]); err != nil {
			return nil, &fieldError{loc: at(name), msg: err.Error()}
		}
	}
	b.WriteByte('}')
	g.body = b.Bytes()
	if explicitID != "" {
		g.id = "g:" + explicitID
	} else {
		sum := sha256.Sum256(g.body)
		g.id = "h:" + hex.EncodeToString(sum[:16])
	}
	return g, nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

func firstByte(raw json.RawMessage) byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return 0
	}
	return t[0]
}
