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
