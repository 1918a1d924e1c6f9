package server

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/delegatelab/delegate"
)

// keepDeclaredCalls makes every tool call returned name a declared tool with JSON object arguments.
// A choice holding any other call comes back as a plain assistant message.
// Such a call names an undeclared tool or is malformed.
// The message is its content followed by the calls' text, with finish_reason "stop", not "tool_calls".
// A client therefore never gets a call it cannot dispatch.
func keepDeclaredCalls(resp *delegate.Response, tools []delegate.Tool) {
	for i := range resp.Choices {
		c := &resp.Choices[i]
		if len(c.Message.ToolCalls) == 0 || slices.IndexFunc(c.Message.ToolCalls, func(tc delegate.ToolCall) bool { return !declaredCall(tc, tools) }) < 0 {
			continue
		}
		var b strings.Builder
		b.WriteString(c.Message.Content)
		for _, tc := range c.Message.ToolCalls {
			b.WriteString(callText(tc))
		}
		c.Message.Content = b.String()
		c.Message.ToolCalls = nil
		if c.FinishReason == "tool_calls" {
			c.FinishReason = "stop"
		}
	}
}

// declaredCall reports whether tc names one of tools and its arguments are
// one JSON object.
func declaredCall(tc delegate.ToolCall, tools []delegate.Tool) bool {
	if !slices.ContainsFunc(tools, func(t delegate.Tool) bool { return t.Name == tc.Name }) {
		return false
	}
	var obj map[string]json.RawMessage
	return json.Unmarshal([]byte(tc.Arguments), &obj) == nil && obj != nil
}

// callText is the text of a call the client cannot use: NAME immediately followed by its arguments.
// A malformed call has no name and its whole text as arguments.
func callText(tc delegate.ToolCall) string { return tc.Name + tc.Arguments }
