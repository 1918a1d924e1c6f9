package openenv

import (
	"encoding/json"
	"math"
	"testing"
)

// TestAppendMatchesMarshal checks that the hand-written messages are the
// bytes json.Marshal writes for the same values.
func TestAppendMatchesMarshal(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	obs, err := json.Marshal(DelegationObservation{Task: "<b>47*28</b> & \u2028", Tools: (&Delegation{}).Tools(), Result: "1316"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data any
	}{
		{"reset", Result{Observation: obs}},
		{"zero reward", Result{Observation: obs, Reward: f(0)}},
		{"negative zero", Result{Observation: json.RawMessage(`{}`), Reward: f(math.Copysign(0, -1))}},
		{"reward", Result{Observation: obs, Reward: f(0.9979), Done: true}},
		{"negative", Result{Observation: obs, Reward: f(-0.0625), Done: true}},
		{"tiny", Result{Observation: obs, Reward: f(1e-7)}},
		{"tiny negative", Result{Observation: obs, Reward: f(-3.5e-12)}},
		{"huge", Result{Observation: obs, Reward: f(1e21)}},
		{"huge exponent", Result{Observation: obs, Reward: f(1.5e300)}},
		{"just under", Result{Observation: obs, Reward: f(999999999999999999999)}},
		{"integer", Result{Observation: obs, Reward: f(123456789)}},
		{"no observation", Result{Reward: f(1)}},
		{"metadata", Result{Observation: obs, Metadata: map[string]any{"b": 1, "a": "<x>"}}},
		{"empty metadata", Result{Observation: obs, Metadata: map[string]any{}}},
		{"error", ErrorData{Message: "Unknown message type: <x>", Code: CodeUnknownType}},
		{"state", DelegationState{StepCount: 3, Reward: f(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := json.Marshal(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(Message{Type: MsgObservation, Data: data})
			if err != nil {
				t.Fatal(err)
			}
			b, err := appendData([]byte("stale"), tt.data)
			if err != nil {
				t.Fatal(err)
			}
			b = b[len("stale"):]
			if got := appendMessage(nil, MsgObservation, b); string(got) != string(want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// TestAppendDataNotFinite checks that a reward JSON cannot hold fails as
// json.Marshal fails.
func TestAppendDataNotFinite(t *testing.T) {
	for _, r := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := appendData(nil, Result{Observation: json.RawMessage(`{}`), Reward: &r}); err == nil {
			t.Errorf("reward %v: got no error, want json's", r)
		}
	}
}

// TestAppendMessageWithoutData checks a message without data, such as
// state, against json.Marshal.
func TestAppendMessageWithoutData(t *testing.T) {
	want, err := json.Marshal(Message{Type: MsgState})
	if err != nil {
		t.Fatal(err)
	}
	if got := appendMessage(nil, MsgState, nil); string(got) != string(want) {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestObservationAppendMatchesMarshal checks that an observation with its
// tools encoded once encodes as json.Marshal encodes it.
func TestObservationAppendMatchesMarshal(t *testing.T) {
	d := &Delegation{dataset: "mmlu"}
	tools, err := json.Marshal(d.Tools())
	if err != nil {
		t.Fatal(err)
	}
	spend := Spend{Delegator: RoleSpend{PromptTokens: 210, CompletionTokens: 31, Calls: 2, Dollars: 4.2e-7}, Dollars: 1.25e-5, CriticalPathS: 0.031}
	tests := []struct {
		name string
		obs  DelegationObservation
	}{
		{"reset", DelegationObservation{Task: "What is 47*28 + 3?"}},
		{"escaped", DelegationObservation{Task: "<a href=\"x\">&</a>\n\u2028\t\x01é", ToolName: ToolDelegate, Result: "1316 <ok>", Spend: spend}},
		{"tool error", DelegationObservation{Task: "t", ToolName: "nope", Error: &ToolError{ErrorType: ToolNotFound, Message: `tool "nope" not found`}, Spend: spend}},
		{"answer", DelegationObservation{Task: "t", ToolName: ToolAnswer, Result: "correct", Spend: spend}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.obs.Tools = d.Tools()
			want, err := json.Marshal(tt.obs)
			if err != nil {
				t.Fatal(err)
			}
			tt.obs.tools = tools
			got, err := tt.obs.appendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
			res, err := Observation{Value: tt.obs}.Result()
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Observation) != string(want) {
				t.Errorf("Result: got %s\nwant %s", res.Observation, want)
			}
		})
	}
}

// TestSessionResultMatchesMarshal checks that a session's answer written
// by hand is the bytes json.Marshal writes, and fails where it fails.
func TestSessionResultMatchesMarshal(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	obs, err := json.Marshal(DelegationObservation{Task: "<b>47*28</b> & \u2028", Tools: (&Delegation{}).Tools()})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		r    sessionResult
	}{
		{"create", sessionResult{SessionID: "0123abcd", Episode: 1, Result: Result{Observation: obs}}},
		{"escaped id", sessionResult{SessionID: `a"<b>`, Episode: 100, Result: Result{Observation: obs, Reward: f(-0.0625), Done: true}}},
		{"metadata", sessionResult{SessionID: "s", Result: Result{Observation: json.RawMessage(`{}`), Reward: f(1e-7), Metadata: map[string]any{"b": 1, "a": "<x>"}}}},
		{"not finite", sessionResult{SessionID: "s", Result: Result{Observation: obs, Reward: f(math.Inf(1))}}},
		{"bad metadata", sessionResult{SessionID: "s", Result: Result{Observation: obs, Metadata: map[string]any{"c": make(chan int)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, werr := json.Marshal(tt.r)
			got, gerr := tt.r.encode()
			if (gerr != nil) != (werr != nil) {
				t.Fatalf("got error %v, want %v", gerr, werr)
			}
			if string(got) != string(want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}
