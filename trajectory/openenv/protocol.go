package openenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// ResetRequest is the body of POST /reset and the data of a WebSocket
// reset message. Fields other than seed and episode_id are kept in Extra
// and passed to nobody: OpenEnv passes them only to an environment whose
// reset takes them, and ours take none.
type ResetRequest struct {
	Seed      *int64                     `json:"seed,omitempty"`       // at least 0
	EpisodeID *string                    `json:"episode_id,omitempty"` // at most 255 characters
	Extra     map[string]json.RawMessage `json:"-"`
}

// MaxIDLength bounds episode_id and request_id, as OpenEnv does.
const MaxIDLength = 255

// UnmarshalJSON reads the known fields and keeps the others in Extra.
func (r *ResetRequest) UnmarshalJSON(b []byte) error {
	if r.readPlain(b) {
		return nil
	}
	type known ResetRequest
	var k known
	if err := json.Unmarshal(b, &k); err != nil {
		return err
	}
	extra, err := extraFields(b, "seed", "episode_id")
	if err != nil {
		return err
	}
	*r = ResetRequest(k)
	r.Extra = extra
	return nil
}

// readPlain reads b, the request every client sends, without reflection:
// an object of seed, an integer or null, and episode_id, a string
// without escapes or null, and nothing else. It reports false for
// anything else, which the decoder reads or refuses.
func (r *ResetRequest) readPlain(b []byte) bool {
	if !validJSON(b) || !startsObject(b) {
		return false
	}
	var out ResetRequest
	ok := true
	// The last of a repeated member counts, as in a decode. A key is read
	// as written: an escaped one, or another case, goes to the decoder.
	members(b, func(k, v []byte) bool {
		switch string(k) {
		case "seed":
			out.Seed, ok = plainInt(v)
		case "episode_id":
			out.EpisodeID, ok = plainString(v)
		default:
			ok = false
		}
		return ok
	})
	if ok {
		*r = out
	}
	return ok
}

// plainInt reads a JSON integer that fits an int64, or null, as a
// decode into *int64 does. It reports false for anything else.
func plainInt(v []byte) (*int64, bool) {
	if string(v) == "null" {
		return nil, true
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || v[0] == '+' {
		return nil, false
	}
	return &n, true
}

// plainString reads a JSON string without escapes, of valid UTF-8, or
// null, as a decode into *string does. It reports false for anything
// else.
func plainString(v []byte) (*string, bool) {
	if string(v) == "null" {
		return nil, true
	}
	if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
		return nil, false
	}
	s := string(v[1 : len(v)-1])
	return &s, true
}

// MarshalJSON writes the known fields and Extra at the same level.
func (r ResetRequest) MarshalJSON() ([]byte, error) {
	type known ResetRequest
	return withExtra(known(r), r.Extra)
}

// Validate checks the bounds OpenEnv's reset request declares.
func (r ResetRequest) Validate() []FieldError {
	var errs []FieldError
	if r.Seed != nil && *r.Seed < 0 {
		errs = append(errs, FieldError{Type: "greater_than_equal", Loc: []any{"seed"}, Msg: "Input should be greater than or equal to 0"})
	}
	if r.EpisodeID != nil && len([]rune(*r.EpisodeID)) > MaxIDLength {
		errs = append(errs, FieldError{Type: "string_too_long", Loc: []any{"episode_id"}, Msg: fmt.Sprintf("String should have at most %d characters", MaxIDLength)})
	}
	return errs
}

// StepRequest is the body of POST /step. Over the WebSocket a step
// message carries the action alone.
type StepRequest struct {
	Action    json.RawMessage            `json:"action"`               // an object of the environment's action schema
	TimeoutS  *float64                   `json:"timeout_s,omitempty"`  // more than 0
	RequestID *string                    `json:"request_id,omitempty"` // at most 255 characters
	Extra     map[string]json.RawMessage `json:"-"`
}

// UnmarshalJSON reads the known fields and keeps the others in Extra.
func (r *StepRequest) UnmarshalJSON(b []byte) error {
	type known StepRequest
	var k known
	if err := json.Unmarshal(b, &k); err != nil {
		return err
	}
	extra, err := extraFields(b, "action", "timeout_s", "request_id")
	if err != nil {
		return err
	}
	*r = StepRequest(k)
	r.Extra = extra
	return nil
}

// MarshalJSON writes the known fields and Extra at the same level.
func (r StepRequest) MarshalJSON() ([]byte, error) {
	type known StepRequest
	return withExtra(known(r), r.Extra)
}

// Validate checks the fields OpenEnv's step request declares.
func (r StepRequest) Validate() []FieldError {
	var errs []FieldError
	if !isObject(r.Action) {
		errs = append(errs, FieldError{Type: "dict_type", Loc: []any{"action"}, Msg: "Input should be a valid dictionary"})
	}
	if r.TimeoutS != nil && *r.TimeoutS <= 0 {
		errs = append(errs, FieldError{Type: "greater_than", Loc: []any{"timeout_s"}, Msg: "Input should be greater than 0"})
	}
	if r.RequestID != nil && len([]rune(*r.RequestID)) > MaxIDLength {
		errs = append(errs, FieldError{Type: "string_too_long", Loc: []any{"request_id"}, Msg: fmt.Sprintf("String should have at most %d characters", MaxIDLength)})
	}
	return errs
}

// Result is the answer to a reset or a step.
// The observation comes without its reward, done and metadata, which sit beside it.
// Reward is null at reset and wherever the environment gives none.
type Result struct {
	Observation json.RawMessage `json:"observation"`
	Reward      *float64        `json:"reward"`
	Done        bool            `json:"done"`
	Metadata    map[string]any  `json:"metadata,omitempty"`
}

// State is the part of every state OpenEnv fixes. An environment's state
// adds its own fields at the same level.
type State struct {
	EpisodeID *string `json:"episode_id"`
	StepCount int     `json:"step_count"`
}

// Health is the answer of GET /health.
type Health struct {
	Status string `json:"status"` // HealthHealthy, or "unhealthy" or "degraded"
}

// HealthHealthy is the status of a server that answers.
const HealthHealthy = "healthy"

// Metadata is the answer of GET /metadata. The optional fields are null
// when unset, as OpenEnv writes them.
type Metadata struct {
	Name             string  `json:"name"`
	Description      string  `json:"description"`
	ReadmeContent    *string `json:"readme_content"`
	Version          *string `json:"version"`
	Author           *string `json:"author"`
	DocumentationURL *string `json:"documentation_url"`
}

// Schema is the answer of GET /schema: the JSON schemas of an
// environment's actions, observations and states.
type Schema struct {
	Action      json.RawMessage `json:"action"`
	Observation json.RawMessage `json:"observation"`
	State       json.RawMessage `json:"state"`
}

// The types of WebSocket messages: a client sends reset, step, state or
// close; a server answers observation, state or error.
const (
	MsgReset       = "reset"
	MsgStep        = "step"
	MsgState       = "state"
	MsgClose       = "close"
	MsgObservation = "observation"
	MsgError       = "error"
)

// Message is one WebSocket message either way. Data is a reset's
// ResetRequest, a step's action, an observation's Result, a state's state
// or an error's ErrorData; state and close requests carry none.
type Message struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// The codes of WebSocket errors, OpenEnv's.
const (
	CodeInvalidJSON     = "INVALID_JSON"     // the message is not JSON
	CodeUnknownType     = "UNKNOWN_TYPE"     // a type the server does not serve
	CodeValidationError = "VALIDATION_ERROR" // the message or its action breaks its schema
	CodeExecutionError  = "EXECUTION_ERROR"  // the environment refused or failed the request
	CodeCapacityReached = "CAPACITY_REACHED" // every session slot is taken; the server closes
	CodeFactoryError    = "FACTORY_ERROR"    // the environment could not be made; the server closes
	CodeSessionError    = "SESSION_ERROR"    // the session failed; the server closes
)

// ErrorData is the data of a WebSocket error. Errors lists a validation
// error's fields; ActiveSessions and MaxSessions come with
// CAPACITY_REACHED, FactoryName with FACTORY_ERROR.
type ErrorData struct {
	Message        string       `json:"message"`
	Code           string       `json:"code"`
	Errors         []FieldError `json:"errors,omitempty"`
	ActiveSessions *int         `json:"active_sessions,omitempty"`
	MaxSessions    *int         `json:"max_sessions,omitempty"`
	FactoryName    string       `json:"factory_name,omitempty"`
}

// FieldError is one failed check of a request, in the shape of a Pydantic validation error.
// It gives its kind, where it is and what is wrong.
type FieldError struct {
	Type string `json:"type"`
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
}

// HTTPError is the body of an HTTP error, as FastAPI writes it.
// Detail is a message, or a list of FieldError for a 422.
type HTTPError struct {
	Detail json.RawMessage `json:"detail"`
}

// The MCP-style actions and observations OpenEnv defines for tool-calling
// environments. Delegation speaks them.
const (
	ActionCallTool  = "call_tool"
	ActionListTools = "list_tools"
)

// ToolAction is a call_tool or list_tools action. A list_tools action
// carries no tool name and no arguments.
type ToolAction struct {
	Type      string          `json:"type"`
	ToolName  string          `json:"tool_name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
}

// Tool is a tool as MCP lists it: name, description and the JSON schema
// of its arguments.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// The kinds of ToolError, OpenEnv's.
const (
	ToolExecutionError = "execution_error"
	ToolInvalidArgs    = "invalid_args"
	ToolTransportError = "transport_error"
	ToolNotFound       = "tool_not_found"
	ToolTimeout        = "timeout"
)

// ToolError is why a tool call failed. It is part of an observation, not
// an error of the protocol: the episode goes on.
type ToolError struct {
	ErrorType string `json:"error_type"`
	Message   string `json:"message"`
}

// isObject reports whether b is a JSON object.
func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && validJSON(b)
}

// extraFields returns the fields of the object b other than known. b has
// been decoded already, so it is valid JSON. Without other fields, as
// nearly every request comes, it returns nil without a decode.
func extraFields(b []byte, known ...string) (map[string]json.RawMessage, error) {
	other := false
	members(b, func(k, _ []byte) bool {
		key := unescapeKey(k)
		other = !slices.ContainsFunc(known, func(n string) bool { return string(key) == n })
		return !other
	})
	if !other {
		return nil, nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for _, k := range known {
		delete(all, k)
	}
	if len(all) == 0 {
		return nil, nil
	}
	return all, nil
}

// withExtra encodes v, an object, with the fields of extra added. A field
// of v wins over one of extra of the same name. It escapes no HTML, so
// the caller's encoder decides.
func withExtra(v any, extra map[string]json.RawMessage) ([]byte, error) {
	b, err := MarshalUnescaped(v)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for k, x := range extra {
		if _, ok := all[k]; !ok {
			all[k] = x
		}
	}
	return MarshalUnescaped(all)
}

// MarshalUnescaped encodes v as json.Marshal does, but writes <, > and &
// as they are. Our clients send text as written, as the in-process path
// holds it.
func MarshalUnescaped(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
