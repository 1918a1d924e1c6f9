package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// checkMembers compares members' walk of b with a decode into a map.
func checkMembers(t *testing.T, b []byte) {
	t.Helper()
	var want map[string]json.RawMessage
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	got := map[string]json.RawMessage{}
	members(b, func(k, v []byte) bool {
		got[string(unescapeKey(k))] = v // the last of a repeated member counts, as in the decode
		return true
	})
	if len(got) != len(want) {
		t.Errorf("%q: got %d members, want %d", b, len(got), len(want))
	}
	for k, w := range want {
		var gc, wc bytes.Buffer
		if err := json.Compact(&gc, got[k]); err != nil {
			t.Errorf("%q: member %q: got %q, not a JSON value: %v", b, k, got[k], err)
			continue
		}
		_ = json.Compact(&wc, w) // the decode checked it
		if gc.String() != wc.String() {
			t.Errorf("%q: member %q: got %s, want %s", b, k, gc.String(), wc.String())
		}
	}
}

var memberCases = []string{
	`{}`,
	` { } `,
	`{"type":"step","data":{"type":"call_tool","arguments":{"q":"}{][\",:"}}}`,
	"{\n\t\"a\" : 1 ,\r\n \"b\":[1,{\"c\":[]}],\"d\":null,\"e\":true,\"f\":-1.5e3}",
	`{"t\u0079pe":"state","\"quoted\\":"x\\"}`,
	`{"a":1,"a":2}`,
	`{"":"empty key","data":"\ud83d\ude00"}`,
	`{"n":0,"s":"","o":{},"l":[]}`,
}

func TestMembers(t *testing.T) {
	for _, c := range memberCases {
		t.Run(c, func(t *testing.T) { checkMembers(t, []byte(c)) })
	}
}

// FuzzMembers checks members against a decode on any valid object.
func FuzzMembers(f *testing.F) {
	for _, c := range memberCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) || !startsObject(b) {
			return
		}
		checkMembers(t, b)
	})
}

// FuzzWalkObject holds walkObject to validJSON's verdict on any object
// and to members' walk of a valid one.
func FuzzWalkObject(f *testing.F) {
	for _, c := range append(memberCases, `{"a":1,}`, `{"a" 1}`, `{"a":[1,{"b":tru}]}`, `{"a":1} x`, `{"a":"\x"}`) {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got [][2]string
		end, ok := walkObject(b, skipSpace(b, 0), 1, func(k []byte, i int) (int, bool) {
			end, ok := validValue(b, i, 1)
			if ok {
				got = append(got, [2]string{string(k), string(b[i:end])})
			}
			return end, ok
		})
		ok = ok && skipSpace(b, end) == len(b)
		if want := validJSON(b) && startsObject(b); ok != want {
			t.Fatalf("%q: walkObject says valid %v, validJSON %v", b, ok, want)
		}
		if !ok {
			return
		}
		var want [][2]string
		members(b, func(k, v []byte) bool {
			want = append(want, [2]string{string(k), string(v)})
			return true
		})
		if !slices.Equal(got, want) {
			t.Errorf("%q: got members %q, want %q", b, got, want)
		}
	})
}

func TestStringValue(t *testing.T) {
	tests := []struct {
		in     string
		want   string
		wantOK bool
	}{
		{`"tools/call"`, "tools/call", true},
		{`"a\"b\u00e9"`, "a\"bé", true},
		{`""`, "", true},
		{`1`, "", false},
		{`null`, "", false},
		{``, "", false},
	}
	for _, tt := range tests {
		got, ok := stringValue([]byte(tt.in))
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("stringValue(%s): got %q %v, want %q %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestAppendRPCResponseMatchesMarshal: the hand-written response is the
// bytes json.Marshal writes.
func TestAppendRPCResponseMatchesMarshal(t *testing.T) {
	tests := []RPCResponse{
		{JSONRPC: "2.0", Result: json.RawMessage(`{"tools":[]}`), ID: json.RawMessage(`1`)},
		{JSONRPC: "2.0", Result: json.RawMessage(`{}`), ID: json.RawMessage(`"a-b"`)},
		{JSONRPC: "2.0", Error: &RPCError{Code: RPCParseError, Message: "Parse error"}, ID: json.RawMessage(`null`)},
		{JSONRPC: "2.0", Error: &RPCError{Code: RPCServerError, Message: "at capacity <1/1>", Data: json.RawMessage(`{"active_sessions":1}`)}, ID: json.RawMessage(`-7`)},
	}
	for _, r := range tests {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendRPCResponse(nil, r)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("got %s, %v\nwant %s", got, err, want)
		}
	}
}

// TestCallResultWriteOnce checks the tools/call result written in one pass from a delegation observation.
// It holds what the general path writes,
// and decodeCallResponse reads back the observation, reward and done.
func TestCallResultWriteOnce(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tools := (&Delegation{}).Tools()
	tests := []struct {
		name string
		obs  Observation
	}{
		{"result", Observation{Value: DelegationObservation{Task: "2+2 <b>", Tools: tools, ToolName: ToolDelegate, Result: "4"}}},
		{"error", Observation{Value: DelegationObservation{Task: "t", Tools: tools, ToolName: "search", Error: &ToolError{ErrorType: ToolNotFound, Message: "no tool \"search\""}}}},
		{"done", Observation{Value: DelegationObservation{Task: "t", ToolName: ToolAnswer, Result: "correct"}, Reward: f(0.9375), Done: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slow, err := callResult(tt.obs)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(slow)
			if err != nil {
				t.Fatal(err)
			}
			res, err := tt.obs.Result()
			if err != nil {
				t.Fatal(err)
			}
			text, isError := tt.obs.Value.(callTexter).callText()
			got, err := appendCallResult(nil, text, isError, res.Observation, res.Reward, res.Done)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) || !jsonEqual(t, got, want) {
				t.Errorf("one pass:\n got %s\nwant %s", got, want)
			}
			resp, err := appendRPCResponse(nil, RPCResponse{JSONRPC: "2.0", Result: got, ID: json.RawMessage(`1`)})
			if err != nil {
				t.Fatal(err)
			}
			back, err := decodeCallResponse(resp)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, back.Observation, res.Observation) || back.Done != res.Done || (back.Reward == nil) != (res.Reward == nil) ||
				(back.Reward != nil && *back.Reward != *res.Reward) {
				t.Errorf("decoded: got %s %v %v, want %s %v %v", back.Observation, back.Reward, back.Done, res.Observation, res.Reward, res.Done)
			}
		})
	}
	_, err := decodeCallResponse([]byte(`{"jsonrpc":"2.0","error":{"code":-32602,"message":"Tool not found: x"},"id":1}`))
	var rerr *RPCError
	if !errors.As(err, &rerr) || rerr.Code != RPCInvalidParams {
		t.Errorf("error response: got %v, want an *RPCError %d", err, RPCInvalidParams)
	}
}

// TestDecodeCallResponse: the one-pass walk of a tools/call response
// reads the last result, checks the whole answer and puts an error first.
func TestDecodeCallResponse(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name    string
		msg     string
		want    Result
		wantErr string
	}{
		{"plain", `{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"4"}],"isError":false,"result":"4","reward":null,"done":false},"id":1}`,
			Result{Observation: json.RawMessage(`{"result":"4"}`)}, ""},
		{"last result counts", `{"jsonrpc":"2.0","result":{"a":1,"reward":1,"done":false},"result":{"content":[],"b":[2],"reward":0.5,"done":true},"id":1}`,
			Result{Observation: json.RawMessage(`{"b":[2]}`), Reward: f(0.5), Done: true}, ""},
		{"error after a result", `{"jsonrpc":"2.0","result":{"a":1,"done":false},"error":{"code":-32602,"message":"Tool not found: x"},"id":1}`,
			Result{}, "Tool not found: x"},
		{"trailing bytes", `{"jsonrpc":"2.0","result":{"a":1},"id":1}x`, Result{}, "not a JSON object"},
		{"invalid inside", `{"jsonrpc":"2.0","result":{"a":[1,]},"id":1}`, Result{}, "not a JSON object"},
		{"result not an object", `{"jsonrpc":"2.0","result":[1],"id":1}`, Result{}, "the result is not a JSON object"},
		{"no result", `{"jsonrpc":"2.0","id":1}`, Result{}, "the result is not a JSON object"},
		{"bad reward", `{"jsonrpc":"2.0","result":{"reward":"x"},"id":1}`, Result{}, "decode reward"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeCallResponse([]byte(tt.msg))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotB, _ := json.Marshal(got) // a decoded Result always encodes
			wantB, _ := json.Marshal(tt.want)
			if !bytes.Equal(gotB, wantB) {
				t.Errorf("got %s, want %s", gotB, wantB)
			}
		})
	}
}

// TestReadObservation: the walk reads an observation message as the
// general path decodes it, and leaves every other message to that path.
func TestReadObservation(t *testing.T) {
	tests := []struct {
		msg    string
		wantOK bool
	}{
		{`{"type":"observation","data":{"observation":{"task":"t","tools":[]},"reward":null,"done":false}}`, true},
		{`{"data": {"done": true, "reward": -0.0625, "observation": {"result": "}\"{"}, "metadata": {"split": "test"}}, "type": "observation"}`, true},
		{`{"type":"observation","data":{"observation":{},"reward":1e-7,"done":true,"metadata":null}}`, true},
		{`{"type":"observation","data":{"observation":{"x":1},"reward":1,"done":false,"metadata":{"a":1}},"data":{"observation":{"y":2},"done":true}}`, true},
		{`{"type":"error","type":"observation","data":{"observation":{},"done":false}}`, true},
		{`{"type":"observation","data":{"observation":{},"done":"yes"},"data":{"observation":{},"done":true}}`, true},
		{`{"type":"error","data":{"message":"no","code":"EXECUTION_ERROR"}}`, false},
		{`{"type":"observation","data":{"observation":{},"done":false},"type":"error"}`, false},
		{`{"type":"observation","data":{"observation":{},"done":"yes"}}`, false},
		{`{"type":"observation","data":{"observation":{},"done":true},"data":[1]}`, false},
		{`{"type":"observation","data":[1]}`, false},
		{`{"type":"observation"`, false},
		{`{"type":"observation","data":{"observation":{"a":tru},"done":false}}`, false},
		{`{"type":"observation","data":{"observation":{},"done":false}} x`, false},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			got, ok := readObservation([]byte(tt.msg))
			if ok != tt.wantOK {
				t.Fatalf("got ok %v, want %v", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			m, err := decodeMessage([]byte(tt.msg))
			if err != nil {
				t.Fatal(err)
			}
			var want Result
			if err := json.Unmarshal(m.Data, &want); err != nil {
				t.Fatal(err)
			}
			gotB, _ := json.Marshal(got) // a decoded Result always encodes
			wantB, _ := json.Marshal(want)
			if !bytes.Equal(gotB, wantB) {
				t.Errorf("got %s, want %s", gotB, wantB)
			}
		})
	}
}

// TestWebSocketEscapedMembers: a message whose keys or type are written
// with escapes reads as the same message written plainly.
func TestWebSocketEscapedMembers(t *testing.T) {
	srv, _ := newDelegationServer(t, DelegationConfig{}, nil)
	c := serve(t, srv, "")
	ctx := context.Background()
	s, err := c.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tests := []struct {
		msg      string
		wantType string
		wantCode string
	}{
		{`{"type":"st\u0061te"}`, MsgState, ""},
		{`{"\u0074ype":"state"}`, MsgState, ""},
		{`{"type":"reset","d\u0061ta":{"seed":1}}`, MsgObservation, ""},
		{`{"type":"state","d\u0061ta":{}}`, "", CodeValidationError},
		{`{"type":"st\u0061tes"}`, "", CodeUnknownType},
	}
	for _, tt := range tests {
		m, err := s.ExchangeRaw(ctx, []byte(tt.msg))
		var e *Error
		switch {
		case tt.wantCode != "" && (!errors.As(err, &e) || e.Code != tt.wantCode):
			t.Errorf("%s: got %v, want %s", tt.msg, err, tt.wantCode)
		case tt.wantCode == "" && (err != nil || m.Type != tt.wantType):
			t.Errorf("%s: got %+v, %v; want %s", tt.msg, m, err, tt.wantType)
		}
	}
}
