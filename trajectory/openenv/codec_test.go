package openenv

import (
	"bytes"
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
		{"control and invalid bytes", DelegationObservation{Task: "a\b\f\x00\x1f\x7f\xff\xc3(\u2029\\\"", Result: "\xe2\x80", Error: &ToolError{ErrorType: "<t>", Message: "&\u2028"}}},
		{"floats", DelegationObservation{Task: "t", Spend: Spend{Subagent: RoleSpend{Calls: 3, Dollars: 1e21}, Dollars: -3.5e-12, CriticalPathS: 123456789}}},
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
			// Into nothing, and over a scratch array with room, as a reset writes it.
			for _, dst := range [][]byte{nil, make([]byte, 3, 1<<12)} {
				got, gerr := tt.r.encode(dst)
				if (gerr != nil) != (werr != nil) {
					t.Fatalf("got error %v, want %v", gerr, werr)
				}
				if string(got) != string(want) {
					t.Errorf("got  %s\nwant %s", got, want)
				}
			}
		})
	}
}

// FuzzAppendString checks appendString against json.Marshal, and
// appendUnescaped against MarshalUnescaped, on any string.
func FuzzAppendString(f *testing.F) {
	for _, c := range []string{"", "plain", "<a href=\"x\">&</a>", "\b\f\n\r\t\x00\x1f\x7f", "\u2028\u2029é😀", "\xff\xc3(\xe2\x80", `\\"`} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString([]byte("x"), s); string(got[1:]) != string(want) {
			t.Errorf("appendString(%q): got %s, want %s", s, got[1:], want)
		}
		want, err = MarshalUnescaped(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendUnescaped([]byte("x"), s); string(got[1:]) != string(want) {
			t.Errorf("appendUnescaped(%q): got %s, want %s", s, got[1:], want)
		}
	})
}

// TestAppendAction checks actions written by hand against
// MarshalUnescaped, and that arguments an encoder would change or refuse
// are left to it.
func TestAppendAction(t *testing.T) {
	tests := []struct {
		name   string
		a      ToolAction
		byHand bool
	}{
		{"call", ToolAction{Type: ActionCallTool, ToolName: ToolDelegate, Arguments: json.RawMessage(`{"question":"47*28"}`)}, true},
		{"list", ToolAction{Type: ActionListTools}, true},
		{"html and escapes", ToolAction{Type: "<t>", ToolName: "a&b\u2028\"", Arguments: json.RawMessage(`{"q":"<x> & \"y\"","n":[1,{"a":null}]}`)}, true},
		{"metadata", ToolAction{Type: ActionCallTool, ToolName: ToolAnswer, Arguments: json.RawMessage(`{}`), Metadata: map[string]any{"turn": 2, "b": "<x>"}}, true},
		{"empty metadata", ToolAction{Type: ActionCallTool, ToolName: ToolAnswer, Metadata: map[string]any{}}, true},
		{"spaces in a string", ToolAction{Type: ActionCallTool, Arguments: json.RawMessage(`{"q":"a b\t"}`)}, true},
		{"spaces to compact", ToolAction{Type: ActionCallTool, Arguments: json.RawMessage(`{ "q": 1 }`)}, false},
		{"invalid arguments", ToolAction{Type: ActionCallTool, Arguments: json.RawMessage(`{"q":`)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, byHand, err := appendAction([]byte("x"), tt.a)
			if err != nil {
				t.Fatal(err)
			}
			if byHand != tt.byHand {
				t.Fatalf("written by hand: got %v, want %v", byHand, tt.byHand)
			}
			if !byHand {
				return
			}
			want, err := MarshalUnescaped(tt.a)
			if err != nil {
				t.Fatal(err)
			}
			if string(got[1:]) != string(want) {
				t.Errorf("got  %s\nwant %s", got[1:], want)
			}
		})
	}
}

// FuzzAppendReset holds a reset request written by hand to
// MarshalUnescaped's bytes.
func FuzzAppendReset(f *testing.F) {
	f.Add(int64(3), "", true, false)
	f.Add(int64(-1), "e-1", true, true)
	f.Add(int64(0), "<&> \u2028 \xff \"", false, true)
	f.Add(int64(0), "", false, false)
	f.Fuzz(func(t *testing.T, seed int64, id string, hasSeed, hasID bool) {
		var req ResetRequest
		if hasSeed {
			req.Seed = &seed
		}
		if hasID {
			req.EpisodeID = &id
		}
		want, err := MarshalUnescaped(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendReset([]byte("x"), req); string(got[1:]) != string(want) {
			t.Errorf("got  %s\nwant %s", got[1:], want)
		}
	})
}

// FuzzAppendAction checks an action written by hand against
// MarshalUnescaped whenever appendAction writes it.
func FuzzAppendAction(f *testing.F) {
	f.Add(ActionCallTool, ToolDelegate, `{"question":"47*28"}`)
	f.Add("<t>", "", `{ "a" : [1, 2] }`)
	f.Add(ActionListTools, "x\u2028", "")
	f.Fuzz(func(t *testing.T, typ, name, args string) {
		a := ToolAction{Type: typ, ToolName: name, Arguments: json.RawMessage(args)}
		got, byHand, err := appendAction(nil, a)
		if err != nil {
			t.Fatal(err)
		}
		want, werr := MarshalUnescaped(a)
		switch {
		case byHand && werr != nil:
			t.Fatalf("written by hand as %s; the encoder refuses it: %v", got, werr)
		case byHand && string(got) != string(want):
			t.Errorf("got  %s\nwant %s", got, want)
		case !byHand:
			var c bytes.Buffer
			if json.Compact(&c, a.Arguments) == nil && c.String() == args {
				t.Errorf("compact valid arguments %s left to the encoder", args)
			}
		}
	})
}

// FuzzObservationAppend checks an observation written by hand against
// json.Marshal, and that a spend JSON cannot hold fails as json.Marshal fails.
func FuzzObservationAppend(f *testing.F) {
	f.Add("What is 47*28?", "1316", "", 210, 4.2e-7, 0.031)
	f.Add("<t>", "", "tool \"x\" not found", -1, math.Inf(1), math.NaN())
	d := &Delegation{}
	tools, err := json.Marshal(d.Tools())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, task, result, errMsg string, tokens int, dollars, path float64) {
		o := DelegationObservation{Task: task, Tools: d.Tools(), ToolName: ToolDelegate, Result: result,
			Spend: Spend{Delegator: RoleSpend{PromptTokens: tokens, Dollars: dollars}, Subagent: RoleSpend{CompletionTokens: -tokens}, Dollars: dollars, CriticalPathS: path}}
		if errMsg != "" {
			o.Error = &ToolError{ErrorType: ToolExecutionError, Message: errMsg}
		}
		want, werr := json.Marshal(o)
		o.tools = tools
		got, gerr := o.appendJSON(nil)
		if (gerr != nil) != (werr != nil) || string(got) != string(want) {
			t.Errorf("got %s, %v\nwant %s, %v", got, gerr, want, werr)
		}
	})
}
