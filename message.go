package delegate

import "encoding/json"

// Role is the author of a chat message.
type Role string

// The roles of the Chat Completions wire format.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one chat message. An assistant message may carry tool calls
// instead of, or besides, content; a tool message answers the call named by
// ToolCallID.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a function call requested by a model. Arguments is the raw
// JSON text the model produced; it may be invalid and must be parsed by the
// caller, which reports a parse failure back to the model as a tool result.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a function offered to a model. Parameters is a JSON Schema object.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// System, User and Assistant build plain text messages.
func System(text string) Message { return Message{Role: RoleSystem, Content: text} }

// User builds a user message.
func User(text string) Message { return Message{Role: RoleUser, Content: text} }

// Assistant builds an assistant message.
func Assistant(text string) Message { return Message{Role: RoleAssistant, Content: text} }

// ToolResult builds the message that answers a tool call.
func ToolResult(callID, text string) Message {
	return Message{Role: RoleTool, Content: text, ToolCallID: callID}
}
