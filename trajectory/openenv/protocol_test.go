package openenv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// jsonEqual reports whether a and b encode the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("decode %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

func ptr[T any](v T) *T { return &v }

// TestFixturesRoundTrip reads each fixture into our type and writes it back.
// It also writes our value and compares it with the fixture.
// The fixtures were written by hand from OpenEnv's types.
func TestFixturesRoundTrip(t *testing.T) {
	tests := []struct {
		file string
		new  func() any // a pointer to decode into
		want any        // our value of the fixture
	}{
		{"reset_request.json", func() any { return new(ResetRequest) }, &ResetRequest{Seed: ptr[int64](42), EpisodeID: ptr("episode-001"), Extra: map[string]json.RawMessage{"difficulty": json.RawMessage(`"hard"`)}}},
		{"reset_request_empty.json", func() any { return new(ResetRequest) }, &ResetRequest{}},
		{"step_request.json", func() any { return new(StepRequest) }, &StepRequest{
			Action:   json.RawMessage(`{"type": "call_tool", "tool_name": "delegate", "arguments": {"question": "47*28"}}`),
			TimeoutS: ptr(30.0), RequestID: ptr("req-7"), Extra: map[string]json.RawMessage{"render": json.RawMessage(`true`)}}},
		{"reset_response.json", func() any { return new(Result) }, &Result{Observation: json.RawMessage(`{"task": "Max has 69 seeds. Max gives away 68. How many seeds does Max have?"}`)}},
		{"step_response.json", func() any { return new(Result) }, &Result{Observation: json.RawMessage(`{"tool_name": "answer", "result": "correct"}`), Reward: ptr(0.95), Done: true, Metadata: map[string]any{"split": "test"}}},
		{"state.json", func() any { return new(State) }, &State{EpisodeID: ptr("episode-001"), StepCount: 3}},
		{"state_empty.json", func() any { return new(State) }, &State{}},
		{"health.json", func() any { return new(Health) }, &Health{Status: HealthHealthy}},
		{"metadata.json", func() any { return new(Metadata) }, &Metadata{Name: "echo_env", Description: "Echoes messages back.", Version: ptr("0.1.0")}},
		{"schema.json", func() any { return new(Schema) }, &Schema{
			Action:      json.RawMessage(`{"type": "object", "properties": {"message": {"type": "string"}}}`),
			Observation: json.RawMessage(`{"type": "object", "properties": {"response": {"type": "string"}}}`),
			State:       json.RawMessage(`{"type": "object", "properties": {"step_count": {"type": "integer"}}}`)}},
		{"ws_reset.json", func() any { return new(Message) }, &Message{Type: MsgReset, Data: json.RawMessage(`{"seed": 7}`)}},
		{"ws_step.json", func() any { return new(Message) }, &Message{Type: MsgStep, Data: json.RawMessage(`{"type": "call_tool", "tool_name": "answer", "arguments": {"answer": "1942"}}`)}},
		{"ws_state.json", func() any { return new(Message) }, &Message{Type: MsgState}},
		{"ws_close.json", func() any { return new(Message) }, &Message{Type: MsgClose}},
		{"ws_observation.json", func() any { return new(Message) }, &Message{Type: MsgObservation, Data: json.RawMessage(`{"observation": {"result": "4814"}, "reward": null, "done": false}`)}},
		{"ws_state_response.json", func() any { return new(Message) }, &Message{Type: MsgState, Data: json.RawMessage(`{"episode_id": "episode-001", "step_count": 1}`)}},
		{"ws_error_invalid_json.json", func() any { return new(wsError) }, &wsError{Type: MsgError, Data: ErrorData{Message: "Invalid JSON: Expecting value: line 1 column 1 (char 0)", Code: CodeInvalidJSON}}},
		{"ws_error_validation.json", func() any { return new(wsError) }, &wsError{Type: MsgError, Data: ErrorData{Message: "Invalid message", Code: CodeValidationError,
			Errors: []FieldError{{Type: "missing", Loc: []any{"data"}, Msg: "Field required"}}}}},
		{"ws_error_capacity.json", func() any { return new(wsError) }, &wsError{Type: MsgError, Data: ErrorData{Message: "Server at capacity: 4/4 sessions active", Code: CodeCapacityReached, ActiveSessions: ptr(4), MaxSessions: ptr(4)}}},
		{"ws_error_factory.json", func() any { return new(wsError) }, &wsError{Type: MsgError, Data: ErrorData{Message: "Environment factory failed", Code: CodeFactoryError, FactoryName: "EchoEnvironment"}}},
		{"call_tool_action.json", func() any { return new(ToolAction) }, &ToolAction{Type: ActionCallTool, ToolName: "delegate", Arguments: json.RawMessage(`{"question": "47*28"}`), Metadata: map[string]any{"turn": 1.0}}},
		{"list_tools_action.json", func() any { return new(ToolAction) }, &ToolAction{Type: ActionListTools}},
		{"tool_error.json", func() any { return new(ToolError) }, &ToolError{ErrorType: ToolNotFound, Message: "Tool 'search' not found"}},
		{"tool.json", func() any { return new(Tool) }, &Tool{Name: "delegate", Description: "Hand a question to a sub-agent.",
			InputSchema: json.RawMessage(`{"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}`)}},
		{"http_error_422.json", func() any { return new(HTTPError) }, &HTTPError{Detail: json.RawMessage(`[{"type": "missing", "loc": ["body", "action"], "msg": "Field required"}]`)}},
		{"http_error_detail.json", func() any { return new(HTTPError) }, &HTTPError{Detail: json.RawMessage(`"Not Found"`)}},
		{"mcp_tools_list_request.json", func() any { return new(RPCRequest) }, &RPCRequest{JSONRPC: "2.0", Method: MethodToolsList, ID: json.RawMessage(`1`)}},
		{"mcp_tools_call_request.json", func() any { return new(RPCRequest) }, &RPCRequest{JSONRPC: "2.0", Method: MethodToolsCall, ID: json.RawMessage(`2`),
			Params: json.RawMessage(`{"name": "delegate", "arguments": {"question": "47*28"}, "session_id": "s-1"}`)}},
		{"mcp_tools_list_response.json", func() any { return new(RPCResponse) }, &RPCResponse{JSONRPC: "2.0", ID: json.RawMessage(`1`),
			Result: json.RawMessage(`{"tools": [{"name": "answer", "description": "Give the final answer.", "inputSchema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}]}`)}},
		{"mcp_error_response.json", func() any { return new(RPCResponse) }, &RPCResponse{JSONRPC: "2.0", ID: json.RawMessage(`1`), Error: &RPCError{Code: RPCMethodNotFound, Message: "Method not found"}}},
		{"mcp_tools_call_result.json", func() any { return new(MCPCallResult) }, &MCPCallResult{Content: []MCPContent{{Type: "text", Text: "1316"}},
			Observation: json.RawMessage(`{"tool_name": "delegate", "result": "1316", "error": null}`)}},
		{"ws_mcp.json", func() any { return new(Message) }, &Message{Type: MsgMCP, Data: json.RawMessage(`{"jsonrpc": "2.0", "method": "tools/list", "id": 3}`)}},
		{"mcp_session_create_request.json", func() any { return new(RPCRequest) }, &RPCRequest{JSONRPC: "2.0", Method: MethodSessionCreate, Params: json.RawMessage(`{}`), ID: json.RawMessage(`1`)}},
		{"mcp_session_create_response.json", func() any { return new(RPCResponse) }, &RPCResponse{JSONRPC: "2.0", ID: json.RawMessage(`1`),
			Result: json.RawMessage(`{"session_id": "0b5c3f6e-8a55-4d5e-9b0e-2f1d3c4b5a69"}`)}},
		{"mcp_ws_parse_error.json", func() any { return new(RPCResponse) }, &RPCResponse{JSONRPC: "2.0", ID: json.RawMessage(`null`),
			Error: &RPCError{Code: RPCParseError, Message: "Parse error: Expecting value: line 1 column 1 (char 0)", Data: json.RawMessage(`null`)}}},
		{"mcp_ws_capacity.json", func() any { return new(RPCResponse) }, &RPCResponse{JSONRPC: "2.0", ID: json.RawMessage(`null`),
			Error: &RPCError{Code: RPCServerError, Message: "Server at capacity (1/1 sessions)", Data: json.RawMessage(`{"active_sessions": 1, "max_sessions": 1}`)}}},
		{"mcp_ws_close_own.json", func() any { return new(RPCResponse) }, &RPCResponse{JSONRPC: "2.0", ID: json.RawMessage(`4`),
			Error: &RPCError{Code: RPCInvalidRequest, Message: "Cannot close active WebSocket-managed session via MCP method", Data: json.RawMessage(`null`)}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			fixture, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got := tt.new()
			if err := json.Unmarshal(fixture, got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			back, err := json.Marshal(got)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if !jsonEqual(t, back, fixture) {
				t.Errorf("decoded and encoded again:\n got %s\nwant %s", back, fixture)
			}
			ours, err := json.Marshal(tt.want)
			if err != nil {
				t.Fatalf("encode ours: %v", err)
			}
			if !jsonEqual(t, ours, fixture) {
				t.Errorf("our value encodes as\n %s\nwant %s", ours, fixture)
			}
		})
	}
}

// wsError is an error message with its data typed.
type wsError struct {
	Type string    `json:"type"`
	Data ErrorData `json:"data"`
}

func TestRequestValidate(t *testing.T) {
	long := string(make([]byte, MaxIDLength+1))
	tests := []struct {
		name string
		errs []FieldError
		want []string // the types of the errors
	}{
		{"reset ok", ResetRequest{Seed: ptr[int64](0), EpisodeID: ptr("e")}.Validate(), nil},
		{"negative seed", ResetRequest{Seed: ptr[int64](-1)}.Validate(), []string{"greater_than_equal"}},
		{"long episode id", ResetRequest{EpisodeID: &long}.Validate(), []string{"string_too_long"}},
		{"step ok", StepRequest{Action: json.RawMessage(`{}`)}.Validate(), nil},
		{"action not an object", StepRequest{Action: json.RawMessage(`[1]`)}.Validate(), []string{"dict_type"}},
		{"zero timeout", StepRequest{Action: json.RawMessage(`{}`), TimeoutS: ptr(0.0)}.Validate(), []string{"greater_than"}},
		{"long request id", StepRequest{Action: json.RawMessage(`{}`), RequestID: &long}.Validate(), []string{"string_too_long"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range tt.errs {
				got = append(got, e.Type)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestExtraFields checks the walk that skips the decode against a decode
// into a map, less the known fields.
func TestExtraFields(t *testing.T) {
	known := []string{"seed", "episode_id"}
	for _, b := range []string{`{}`, `null`, `{"seed":1}`, `{"seed":1,"episode_id":"e"}`, `{"seed":1,"x":{"y":2}}`,
		`{"Seed":1}`, `{"se\u0065d":1}`, `{"seed":1,"seed":2}`, ` { "x" : [1] , "seed" : 3 } `} {
		t.Run(b, func(t *testing.T) {
			var want map[string]json.RawMessage
			if err := json.Unmarshal([]byte(b), &want); err != nil {
				t.Fatal(err)
			}
			for _, k := range known {
				delete(want, k)
			}
			if len(want) == 0 {
				want = nil
			}
			got, err := extraFields([]byte(b), known...)
			if err != nil {
				t.Fatal(err)
			}
			gotB, _ := json.Marshal(got) // raw messages of a decode always encode
			wantB, _ := json.Marshal(want)
			if (got == nil) != (want == nil) || string(gotB) != string(wantB) {
				t.Errorf("got %s, want %s", gotB, wantB)
			}
		})
	}
}
