package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"syscall"
	"testing"
	"time"
)

// agentBody is an agent's short conversation, the body perf/gateway sends.
var agentBody = []byte(`{"model":"standin","messages":[{"role":"system","content":"Solve or delegate."},{"role":"user","content":"Dot has 91 jars of 23 coins. Gus has 19 jars of 83 coins. Gus gets 49 more. How many coins do they have in all?"}],"temperature":0}`)

// BenchmarkDecode measures a request body read, checked, decoded and
// turned into a delegate.Request.
func BenchmarkDecode(b *testing.B) {
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		req, e := decodeRequest(bytes.NewReader(agentBody), int64(len(agentBody)), 1<<20)
		if e != nil {
			b.Fatal(e.Message)
		}
		if _, e := toDelegate(req, 64); e != nil {
			b.Fatal(e.Message)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is this process's user and system time so far: on a shared
// machine a steadier figure than the wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCheckMessages compares the bounds check of the messages with
// its reference, which decoded each message to count its lists.
func BenchmarkCheckMessages(b *testing.B) {
	messages, _ := memberOf(b, agentBody, "messages")
	for _, bc := range []struct {
		name  string
		check func([]byte) *apiErr
	}{{"reference", checkMessagesDecoded}, {"scan", checkMessages}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if e := bc.check(messages); e != nil {
					b.Fatal(e.Message)
				}
			}
		})
	}
}

// TestCheckMessagesMatchesReference checks that the scan refuses what
// the decoding reference refused, with the same error when one list is
// past its bound.
func TestCheckMessagesMatchesReference(t *testing.T) {
	list := func(n int, elem string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + "]"
	}
	call := `{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}`
	part := `{"type":"text","text":"a,]}"}`
	for _, tc := range []struct {
		name, messages string
	}{
		{"short", string(mustMember(t, agentBody, "messages"))},
		{"empty", `[]`},
		{"not an array", `{"role":"user"}`},
		{"a message not an object", `["user",{"role":"user","content":"x"}]`},
		{"calls at the bound", `[{"role":"assistant","tool_calls":` + list(MaxToolCalls, call) + `}]`},
		{"calls past the bound", `[{"role":"user","content":"x"},{"role":"assistant","tool_calls":` + list(MaxToolCalls+1, call) + `}]`},
		{"parts at the bound", `[{"role":"user","content":` + list(MaxContentParts, part) + `}]`},
		{"parts past the bound", `[{"role":"user","content":` + list(MaxContentParts+1, part) + `}]`},
		{"escaped key past the bound", `[{"role":"user","cont\u0065nt":` + list(MaxContentParts+1, part) + `}]`},
		{"content a string", `[{"role":"user","content":"` + strings.Repeat("[1],", 200) + `"}]`},
		{"calls null", `[{"role":"assistant","tool_calls":null,"content":"x"}]`},
		{"messages at the bound", list(MaxMessages, `{"role":"user","content":"x"}`)},
		{"messages past the bound", list(MaxMessages+1, `{"role":"user","content":"x"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, want := checkMessages([]byte(tc.messages)), checkMessagesDecoded([]byte(tc.messages))
			if (got == nil) != (want == nil) || got != nil && *got != *want {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

// checkMessagesDecoded is the reference: the check as it was, decoding
// each message into a struct of its lists' lengths.
func checkMessagesDecoded(raw []byte) *apiErr {
	var e *apiErr
	n, _ := eachElement(raw, '[', MaxMessages+1, func(i int, elem []byte) bool {
		var lists struct {
			ToolCalls counted `json:"tool_calls"`
			Content   counted `json:"content"`
		}
		if json.Unmarshal(elem, &lists) != nil {
			return true
		}
		switch {
		case lists.ToolCalls > MaxToolCalls:
			e = badRequest(fmt.Sprintf("messages[%d].tool_calls", i), "messages[%d].tool_calls: more than %d tool calls", i, MaxToolCalls)
		case lists.Content > MaxContentParts:
			e = badRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d].content: more than %d content parts", i, MaxContentParts)
		}
		return e == nil
	})
	if e != nil {
		return e
	}
	if n > MaxMessages {
		return badRequest("messages", "messages: more than %d messages", MaxMessages)
	}
	return nil
}

// counted is the length of a JSON array, read without building it; 0
// for any other value.
type counted int

func (c *counted) UnmarshalJSON(b []byte) error {
	n, _ := countElements(b, math.MaxInt)
	*c = counted(n)
	return nil
}

// memberOf returns the value of the top-level member key of body.
func memberOf(tb testing.TB, body []byte, key string) ([]byte, bool) {
	tb.Helper()
	var value []byte
	eachElement(body, '{', math.MaxInt, func(_ int, member []byte) bool {
		k, v := splitMember(member)
		if k == key {
			value = v
		}
		return true
	})
	return value, value != nil
}

func mustMember(t *testing.T, body []byte, key string) []byte {
	t.Helper()
	v, ok := memberOf(t, body, key)
	if !ok {
		t.Fatalf("no %s in %s", key, body)
	}
	return v
}
