package atropos

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/delegatelab/delegate"
)

// ScoredData is one group of sequences scored together, Atropos's
// ScoredData. Tokens holds full sequences; Masks is -100 where a token is
// not trained and the token id where it is; Scores has one score per
// sequence. The other fields are optional and passed through to the
// trainer as sent. GroupOverrides and Overrides are free-form; what
// delegate reads and writes in them is GroupOverride and SequenceOverride.
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
	// VocabSize (an extension, optional) is the trainer's vocabulary:
	// token ids at or beyond it are refused. 0: only int32's range.
	VocabSize int `json:"vocab_size,omitempty"`
	// BatchGroups (an extension, optional), when positive, makes a batch
	// that many groups in queue order, whatever their sequences. Each
	// group then counts as BatchSize / BatchGroups sequences, in batches
	// and in /status-env; none is buffered. It must divide BatchSize.
	// A trainer whose groups vary in size (several trained roles) gets
	// the same groups a step. 0: batches count sequences, as Atropos's.
	BatchGroups int `json:"batch_groups,omitempty"`
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
// first GET /batch the server sends only Status, "wait for trainer to
// start".
type RegisterEnvResponse struct {
	Status             string `json:"status"`
	EnvID              int    `json:"env_id"`
	WandbName          string `json:"wandb_name"`
	CheckpointDir      string `json:"checkpoint_dir"`
	StartingStep       int    `json:"starting_step"`
	CheckpointInterval int    `json:"checkpoint_interval"`
	NumSteps           int    `json:"num_steps"`
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
	// TrainerStep (delegate's, not Atropos's) is the last step the trainer
	// has finished: it asked for the batch after it. With TrainerStep
	// equal to CurrentStep the trainer waits for a batch (none assembled)
	// and its newest checkpoint is step TrainerStep: items started now are
	// sampled on-policy (process --push-sync).
	TrainerStep int `json:"trainer_step"`
}

// Status answers GET /status: the trainer's step and the groups queued.
type Status struct {
	CurrentStep int `json:"current_step"`
	QueueSize   int `json:"queue_size"`
}

// ScoredResponse answers POST /scored_data. Status is "received", or
// "buffered" with BufferSize. BufferSize is the sequences this
// environment has waiting in its buffer of odd-sized groups.
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

// numericField describes a field validated by the scanner: a list
// nested depth deep of numbers (integers when ints).
type numericField struct {
	depth int
	ints  bool
}

var numericFields = map[string]numericField{
	"tokens": {2, true}, "masks": {2, true}, "scores": {1, false},
	"advantages": {2, false}, "ref_logprobs": {2, false}, "inference_logprobs": {2, false},
	"distill_token_ids": {3, true}, "distill_logprobs": {3, false},
}

// Indices into fieldOrder.
const (
	fTokens = iota
	fMasks
	fScores
	fAdvantages
	fRefLogprobs
	fMessages
	fGenerationParams
	fInferenceLogprobs
	fOverrides
	fGroupOverrides
	fImages
	fEnvID
	fDistillTokenIDs
	fDistillLogprobs
)

var fieldIndex = func() map[string]int {
	m := map[string]int{}
	for i, f := range fieldOrder {
		m[f] = i
	}
	return m
}()

// group is a validated group ready to store. It holds its body in
// Atropos's shape and what the queue needs to know about it.
type group struct {
	body []byte
	// buf, when not nil, is body's pooled buffer, given back by release.
	buf       *[]byte
	id        string
	env       int  // -1: no env_id
	envGiven  bool // env_id was sent (and must name an environment)
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

// idLimits bounds a group's token ids and sequences by what the trainer
// registered.
type idLimits struct {
	vocab  int64 // token ids are below it: vocab_size, else int32's range
	maxLen int   // tokens per sequence: max_token_len; 0: any
	// empty lets a group hold no sequences. A trainer registered with
	// batch_groups counts it as one group: an item with nothing to train.
	empty bool
}

// noLimits are the bounds before a trainer registered.
var noLimits = idLimits{vocab: math.MaxInt32 + 1}

// parseGroup validates one group like Atropos's pydantic model. It adds
// the checks Atropos leaves to the trainer: masks like tokens, one score
// per sequence, token ids and sequence lengths within lim. loc prefixes error
// locations ("body" or "body", i). Unknown fields are dropped, as
// pydantic drops them.
func parseGroup(data []byte, lim idLimits, loc ...any) (*group, error) {
	return parseGroupBody(data, lim, false, loc...)
}

// parseGroupBody is parseGroup, with the body in a pooled buffer when
// pooled is set. That is for a store that keeps a copy of its own: the
// caller releases the group once stored. The body, 2 MB for a group of 16
// sequences of 4,096 tokens, is then not allocated at every push.
func parseGroupBody(data []byte, lim idLimits, pooled bool, loc ...any) (*group, error) {
	s := scanner{raw: data}
	s.skipSpace()
	if !s.eat('{') {
		return nil, malformedGroup(loc, "Input should be a valid JSON object of a group")
	}
	// The compacted fields go to a reused scratch buffer; compacted output
	// never outgrows the input, so it is never reallocated.
	scratch := getBuf(len(data))
	defer putBuf(scratch)
	f := groupFields{out: *scratch}
	if err := f.scan(&s, loc); err != nil {
		return nil, err
	}
	if err := f.checkShapes(lim, loc); err != nil {
		return nil, err
	}
	if err := f.checkTokenIDs(lim, loc); err != nil {
		return nil, err
	}
	if err := f.checkMessages(loc); err != nil {
		return nil, err
	}
	if err := f.checkOverrides(loc); err != nil {
		return nil, err
	}
	g := &group{env: -1, size: len(f.tokens.inner)}
	explicitID, err := f.readGroupMeta(g, loc)
	if err != nil {
		return nil, err
	}
	if pooled {
		g.buf = getBuf(f.bodySize())
		*g.buf = f.appendBody(*g.buf)
		g.body = *g.buf
	} else {
		g.body = f.appendBody(make([]byte, 0, f.bodySize()))
	}
	if explicitID != "" {
		g.id = "g:" + explicitID
	} else {
		sum := sha256.Sum256(g.body)
		g.id = "h:" + hex.EncodeToString(sum[:16])
	}
	return g, nil
}

// release gives back the pooled buffer of the body, if it has one. The
// group's body is then gone.
func (g *group) release() {
	if g.buf != nil {
		putBuf(g.buf)
		g.buf, g.body = nil, nil
	}
}

// groupFields holds a group's fields as scanned. Each known field's
// compacted value is a span of out; numeric ones also have shapes.
type groupFields struct {
	out                   []byte
	spans                 [len(fieldOrder)]struct{ from, to int }
	present               [len(fieldOrder)]bool
	tokens, masks, scores shape
}

// fieldLoc is loc followed by field and rest, in a new slice.
func fieldLoc(loc []any, field string, rest ...any) []any {
	return append(append(append([]any{}, loc...), field), rest...)
}

// malformedGroup reports msg at loc itself, not at one of its fields.
func malformedGroup(loc []any, msg string) error {
	return &fieldError{loc: append([]any{}, loc...), msg: msg}
}

// val is field i's compacted value, or nil when it is absent or null.
func (f *groupFields) val(i int) []byte {
	if !f.present[i] {
		return nil
	}
	return f.out[f.spans[i].from:f.spans[i].to]
}

// scan reads the group's fields after its opening brace, up to the end of
// the data. Only space may follow the closing brace.
func (f *groupFields) scan(s *scanner, loc []any) error {
	s.skipSpace()
	if !s.eat('}') {
		for {
			s.skipSpace()
			key, ok := s.str()
			if !ok {
				return malformedGroup(loc, "malformed JSON: a field name was expected")
			}
			s.skipSpace()
			if !s.eat(':') {
				return malformedGroup(loc, fmt.Sprintf("malformed JSON after field %q", key))
			}
			s.skipSpace()
			if err := f.scanValue(s, key, loc); err != nil {
				return err
			}
			s.skipSpace()
			if s.eat(',') {
				continue
			}
			if s.eat('}') {
				break
			}
			return malformedGroup(loc, fmt.Sprintf("malformed JSON after field %q", key))
		}
	}
	s.skipSpace()
	if s.pos != len(s.raw) {
		return malformedGroup(loc, "trailing data after the group")
	}
	return nil
}

// scanValue reads the value of field key. A known field's value is kept,
// compacted, in out; null marks it absent; an unknown one is only validated.
func (f *groupFields) scanValue(s *scanner, key string, loc []any) error {
	data := s.raw
	i, known := fieldIndex[key]
	from := len(f.out)
	switch nf, numeric := numericFields[key]; {
	case bytes.HasPrefix(data[s.pos:], []byte("null")):
		s.pos += 4
		if known {
			f.present[i] = false
		}
		from = -1
	case numeric:
		var sh shape
		var err *scanError
		f.out, sh, err = s.numbers(nf.depth, nf.ints, f.out)
		if err != nil {
			return &fieldError{loc: fieldLoc(loc, key, err.path...), msg: err.msg}
		}
		switch i {
		case fTokens:
			f.tokens = sh
		case fMasks:
			f.masks = sh
		case fScores:
			f.scores = sh
		}
	default:
		// Compact validates as it copies, so a kept value is
		// scanned once; a dropped one is only validated.
		start := s.pos
		ok := s.skipValue()
		if ok && known {
			b := bytes.NewBuffer(f.out)
			ok = json.Compact(b, data[start:s.pos]) == nil
			f.out = b.Bytes()
		} else if ok {
			ok = json.Valid(data[start:s.pos])
		}
		if !ok {
			return &fieldError{loc: fieldLoc(loc, key), msg: "malformed JSON value"}
		}
	}
	if known && from >= 0 {
		f.present[i] = true
		f.spans[i].from, f.spans[i].to = from, len(f.out)
	}
	return nil
}

// checkShapes checks the required fields are there. Masks must match
// tokens position for position, with one score per sequence. No sequence
// may be over lim.maxLen.
func (f *groupFields) checkShapes(lim idLimits, loc []any) error {
	for _, req := range []int{fTokens, fMasks, fScores} {
		if !f.present[req] {
			return &fieldError{loc: fieldLoc(loc, fieldOrder[req]), msg: "Field required"}
		}
	}
	tokens, masks := f.tokens.inner, f.masks.inner
	n := len(tokens)
	if n == 0 && !lim.empty {
		return &fieldError{loc: fieldLoc(loc, "tokens"), msg: "a group needs at least one sequence (an empty one only when the trainer registered batch_groups)"}
	}
	if len(masks) != n {
		return &fieldError{loc: fieldLoc(loc, "masks"), msg: fmt.Sprintf("has %d sequences, tokens has %d", len(masks), n)}
	}
	for i := range n {
		if masks[i] != tokens[i] {
			return &fieldError{loc: fieldLoc(loc, "masks", i), msg: fmt.Sprintf("has %d positions, tokens[%d] has %d", masks[i], i, tokens[i])}
		}
	}
	if f.scores.outer != n {
		return &fieldError{loc: fieldLoc(loc, "scores"), msg: fmt.Sprintf("has %d scores for %d sequences", f.scores.outer, n)}
	}
	if lim.maxLen > 0 {
		for i, l := range tokens {
			if l > lim.maxLen {
				return &fieldError{loc: fieldLoc(loc, "tokens", i), msg: fmt.Sprintf("has %d tokens, over the trainer's max_token_len of %d", l, lim.maxLen)}
			}
		}
	}
	return nil
}

// checkTokenIDs checks the ids in tokens, masks and distill_token_ids
// against the vocabulary; masks may also hold -100.
func (f *groupFields) checkTokenIDs(lim idLimits, loc []any) error {
	for _, c := range []struct {
		i      int
		ignore bool
	}{{fTokens, false}, {fMasks, true}, {fDistillTokenIDs, false}} {
		if v := f.val(c.i); v != nil {
			if path, msg := checkIDs(v, lim.vocab, c.ignore); msg != "" {
				return &fieldError{loc: fieldLoc(loc, fieldOrder[c.i], path...), msg: msg}
			}
		}
	}
	return nil
}

// checkMessages checks messages is a list of conversations whose every
// message has a role and a content.
func (f *groupFields) checkMessages(loc []any) error {
	v := f.val(fMessages)
	if v == nil {
		return nil
	}
	var msgs [][]map[string]json.RawMessage
	if err := json.Unmarshal(v, &msgs); err != nil {
		return &fieldError{loc: fieldLoc(loc, "messages"), msg: "must be a list of lists of message objects"}
	}
	for i, conv := range msgs {
		for j, m := range conv {
			_, role := m["role"]
			_, content := m["content"]
			if !role || !content {
				return &fieldError{loc: fieldLoc(loc, "messages", i, j), msg: "Message must have 'role' and 'content' fields"}
			}
		}
	}
	return nil
}

// checkOverrides checks generation_params and group_overrides are objects
// and overrides is a list of valid per-sequence overrides.
func (f *groupFields) checkOverrides(loc []any) error {
	for _, i := range []int{fGenerationParams, fGroupOverrides} {
		if v := f.val(i); v != nil && v[0] != '{' {
			return &fieldError{loc: fieldLoc(loc, fieldOrder[i]), msg: "Input should be a valid dictionary"}
		}
	}
	v := f.val(fOverrides)
	if v == nil {
		return nil
	}
	var ov []map[string]json.RawMessage
	if err := json.Unmarshal(v, &ov); err != nil {
		return &fieldError{loc: fieldLoc(loc, "overrides"), msg: "must be a list of objects"}
	}
	for i, o := range ov {
		if ferr := checkSequenceOverride(o, fieldLoc(loc, "overrides", i)); ferr != nil {
			return ferr
		}
	}
	return nil
}

// readGroupMeta sets g's environment and policy version from env_id and
// group_overrides, and returns the group id group_overrides names, if any.
func (f *groupFields) readGroupMeta(g *group, loc []any) (string, error) {
	if v := f.val(fEnvID); v != nil {
		id, err := strconv.Atoi(string(v))
		if err != nil {
			return "", &fieldError{loc: fieldLoc(loc, "env_id"), msg: "Input should be a valid integer"}
		}
		g.env, g.envGiven = id, true
	}
	v := f.val(fGroupOverrides)
	if v == nil {
		return "", nil
	}
	var over map[string]json.RawMessage
	if err := json.Unmarshal(v, &over); err != nil {
		return "", &fieldError{loc: fieldLoc(loc, "group_overrides"), msg: "Input should be a valid dictionary"}
	}
	o, ferr := parseGroupOverride(over, fieldLoc(loc, "group_overrides"))
	if ferr != nil {
		return "", ferr
	}
	if o.PolicyVersion != nil {
		g.policy, g.hasPolicy = int64(*o.PolicyVersion), true
	}
	return o.GroupID, nil
}

// bodySize is the size of the stored group.
func (f *groupFields) bodySize() int {
	size := 2
	for i, name := range fieldOrder {
		size += len(name) + 4 // "name": and a comma or the closing brace
		if v := f.val(i); v != nil {
			size += len(v)
		} else {
			size += len("null")
		}
	}
	return size
}

// appendBody appends the stored group in Atropos's field order to b. With
// room for bodySize bytes, b is not reallocated: the in-memory store keeps
// a body of its exact size.
func (f *groupFields) appendBody(b []byte) []byte {
	b = append(b, '{')
	for i, name := range fieldOrder {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
		if v := f.val(i); v != nil {
			b = append(b, v...)
		} else {
			b = append(b, "null"...)
		}
	}
	return append(b, '}')
}

// parseGroups validates a list of groups (POST /scored_data_list) in one
// pass: each item is located and parsed where it lies.
func parseGroups(data []byte, lim idLimits, pooled bool) ([]*group, error) {
	bad := func(msg string) error {
		return &fieldError{loc: []any{"body"}, msg: "Input should be a valid list of groups: " + msg}
	}
	s := scanner{raw: data}
	s.skipSpace()
	if !s.eat('[') {
		return nil, bad("not a JSON list")
	}
	groups := []*group{}
	s.skipSpace()
	if !s.eat(']') {
		for i := 0; ; i++ {
			s.skipSpace()
			start := s.pos
			if !s.skipValue() {
				return nil, bad(fmt.Sprintf("malformed JSON in item %d", i))
			}
			g, err := parseGroupBody(data[start:s.pos], lim, pooled, "body", i)
			if err != nil {
				return nil, err
			}
			groups = append(groups, g)
			s.skipSpace()
			if s.eat(',') {
				continue
			}
			if s.eat(']') {
				break
			}
			return nil, bad(fmt.Sprintf("malformed JSON after item %d", i))
		}
	}
	s.skipSpace()
	if s.pos != len(data) {
		return nil, bad("trailing data after the list")
	}
	return groups, nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// checkIDs checks the token ids of a compacted, validated list of integers
// nested up to 3 deep. Each must be at least 0 and below vocab. With ignore
// set, for masks, -100 (delegate.MaskIgnore) is allowed too. It returns the
// indices and a message for the first that is not.
func checkIDs(raw []byte, vocab int64, ignore bool) ([]any, string) {
	var idx [4]int
	level := -1
	for p := 0; p < len(raw); {
		switch c := raw[p]; c {
		case '[':
			level++
			idx[level] = 0
			p++
		case ']':
			level--
			p++
		case ',':
			idx[level]++
			p++
		default:
			start := p
			neg := c == '-'
			if neg {
				p++
			}
			d := p
			p = digits(raw, p)
			// Up to 18 digits fit an int64; more are beyond any vocabulary.
			id, big := int64(0), p-d > 18
			if !big {
				for _, ch := range raw[d:p] {
					id = id*10 + int64(ch-'0')
				}
			}
			neg = neg && (big || id != 0) // -0 is 0
			switch {
			case neg && ignore && !big && id == 100:
				continue
			case !neg && !big && id < vocab:
				continue
			}
			text := raw[start:p]
			path := make([]any, level+1)
			for i := range path {
				path[i] = idx[i]
			}
			switch {
			case neg && ignore:
				return path, fmt.Sprintf("mask %s: want -100 (not trained) or a token id", text)
			case neg:
				return path, fmt.Sprintf("token id %s is negative", text)
			case vocab > math.MaxInt32:
				return path, fmt.Sprintf("token id %s is beyond int32 (%d)", text, math.MaxInt32)
			default:
				return path, fmt.Sprintf("token id %s is beyond the trainer's vocab_size of %d", text, vocab)
			}
		}
	}
	return nil, ""
}

// GroupRoles reads group_overrides.roles, a list of objects. Each names
// its role, its model, whether it was trained and the oldest policy version
// of its samples. Unknown keys are refused.
func GroupRoles(raw json.RawMessage) ([]delegate.RolePolicy, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var roles []delegate.RolePolicy
	if err := dec.Decode(&roles); err != nil {
		return nil, fmt.Errorf("want a list of {role, model, trained, policy_version}: %w", err)
	}
	for i, r := range roles {
		if r.Role == "" {
			return nil, fmt.Errorf("entry %d names no role", i)
		}
	}
	return roles, nil
}
