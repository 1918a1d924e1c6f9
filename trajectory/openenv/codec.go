package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strconv"

	"github.com/coder/websocket"

	"github.com/delegatelab/delegate/openai/wire"
)

// The WebSocket hot path writes its messages by hand. encoding/json
// checks and compacts every json.RawMessage it writes, so a message whose
// data holds an encoded observation was scanned three times. The bytes
// are the same as json.Marshal's: the fragments come from json.Marshal,
// compact and HTML-escaped already.

// appendMessage appends the message {"type":typ,"data":data}. The type is
// one of the protocol's, a plain ASCII word; data is valid compact JSON.
func appendMessage(dst []byte, typ string, data []byte) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ...)
	if len(data) == 0 {
		return append(dst, `"}`...)
	}
	dst = append(dst, `","data":`...)
	dst = append(dst, data...)
	return append(dst, '}')
}

// appendData appends v encoded as json.Marshal does. A Result, the answer
// to every reset and step, is written without re-scanning its observation.
func appendData(dst []byte, v any) ([]byte, error) {
	switch r := v.(type) {
	case Result:
		if r.Reward == nil || finite(*r.Reward) {
			return appendResult(dst, r)
		}
	case *Result:
		if r.Reward == nil || finite(*r.Reward) {
			return appendResult(dst, *r)
		}
	case RPCResponse:
		return appendRPCResponse(dst, r)
	}
	b, err := json.Marshal(v)
	return append(dst, b...), err
}

// appendResult appends r as json.Marshal writes it. The observation must
// be json.Marshal's output and the reward finite.
func appendResult(dst []byte, r Result) ([]byte, error) {
	dst = append(dst, `{"observation":`...)
	if r.Observation == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, r.Observation...)
	}
	dst = append(dst, `,"reward":`...)
	if r.Reward == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendFloat(dst, *r.Reward)
	}
	if r.Done {
		dst = append(dst, `,"done":true`...)
	} else {
		dst = append(dst, `,"done":false`...)
	}
	if len(r.Metadata) > 0 {
		b, err := json.Marshal(r.Metadata)
		if err != nil {
			return dst, err
		}
		dst = append(dst, `,"metadata":`...)
		dst = append(dst, b...)
	}
	return append(dst, '}'), nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// appendFloat appends a finite f as encoding/json writes a float64.
// That is like ES6, with exponents only for very small or large magnitudes.
func appendFloat(dst []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// readMessage reads one message into buf, reused from message to message.
// The bytes are valid until the next read. It is Conn.Read without an
// allocation per message.
func readMessage(ctx context.Context, c *websocket.Conn, buf *bytes.Buffer) ([]byte, error) {
	_, r, err := c.Reader(ctx)
	if err != nil {
		return nil, err
	}
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// startsObject reports whether b, a valid JSON value, is an object. It is
// isObject without the second scan, for values a decoder has checked.
func startsObject(b json.RawMessage) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// members calls fn with each member of b, a valid JSON object, in order.
// fn gets the key as written between the quotes, and the value's bytes.
// It stops when fn returns false.
// It reads the top level alone, without the maps and copies of a decode.
// The caller has checked that b is valid.
func members(b []byte, fn func(key, value []byte) bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return // "}" or the end
		}
		end := skipValue(b, i)
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return
		}
		i = skipSpace(b, i+1)
		end = skipValue(b, i)
		if !fn(key, b[i:end]) {
			return
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the valid JSON value that starts at i.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return len(b)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipValue(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// unescapeKey returns a member's key, unescaped.
// A key without escapes is returned as it is, so that a switch on its string does not allocate.
func unescapeKey(key []byte) []byte {
	if bytes.IndexByte(key, '\\') < 0 {
		return key
	}
	var s string
	if json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &s) != nil {
		return key // a valid object's key always decodes
	}
	return []byte(s)
}

// stringValue returns the string a JSON value holds, and false when it
// holds another kind of value.
func stringValue(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	return s, json.Unmarshal(v, &s) == nil
}

// stringBytes is stringValue as bytes: without escapes, the value's own
// bytes between its quotes, not a copy.
func stringBytes(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1], true
	}
	s, ok := stringValue(v)
	return []byte(s), ok
}

// appendRPCResponse appends r as json.Marshal writes it. Its result, when
// set, must be compact JSON, as json.Marshal and appendCallResult write.
func appendRPCResponse(dst []byte, r RPCResponse) ([]byte, error) {
	dst = append(dst, `{"jsonrpc":"2.0"`...)
	if len(r.Result) > 0 {
		dst = append(dst, `,"result":`...)
		dst = append(dst, r.Result...)
	}
	if r.Error != nil {
		b, err := json.Marshal(r.Error)
		if err != nil {
			return dst, err
		}
		dst = append(dst, `,"error":`...)
		dst = append(dst, b...)
	}
	dst = append(dst, `,"id":`...)
	if len(r.ID) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, r.ID...)
	}
	return append(dst, '}'), nil
}

// callTexter is an observation value that gives its tools/call text and error flag.
// It has no member named content, isError, reward or done.
// The server writes its call result in one pass.
type callTexter interface {
	callText() (text string, isError bool)
}

// appendCallResult appends a tools/call result: MCP's content and
// isError, the observation's members, reward and done. The observation
// must be a compact JSON object without those four members.
func appendCallResult(dst []byte, text string, isError bool, obs []byte, reward *float64, done bool) ([]byte, error) {
	dst = append(dst, `{"content":[{"type":"text","text":`...)
	dst = appendString(dst, text)
	dst = append(dst, `}],"isError":`...)
	dst = strconv.AppendBool(dst, isError)
	if inner := bytes.TrimSpace(obs[1 : len(obs)-1]); len(inner) > 0 {
		dst = append(dst, ',')
		dst = append(dst, inner...)
	}
	dst = append(dst, `,"reward":`...)
	if reward == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendFloat(dst, *reward)
	}
	dst = append(dst, `,"done":`...)
	dst = strconv.AppendBool(dst, done)
	return append(dst, '}'), nil
}

// appendString appends s as json.Marshal writes a string: HTML-escaped,
// with U+2028 and U+2029 escaped and invalid UTF-8 replaced.
// FuzzAppendString holds it to json.Marshal's bytes.
func appendString(dst []byte, s string) []byte { return wire.AppendJSONString(dst, s, true) }

// appendUnescaped appends s as MarshalUnescaped writes a string: as
// appendString does, less the HTML escapes.
func appendUnescaped(dst []byte, s string) []byte { return wire.AppendJSONString(dst, s, false) }

// appendAction appends a as MarshalUnescaped writes it, without
// reflection. It reports false for arguments that are not compact valid
// JSON, which the encoder must compact or refuse.
func appendAction(dst []byte, a ToolAction) ([]byte, bool, error) {
	if len(a.Arguments) > 0 && (!validJSON(a.Arguments) || !compact(a.Arguments)) {
		return dst, false, nil
	}
	dst = append(dst, `{"type":`...)
	dst = appendUnescaped(dst, a.Type)
	if a.ToolName != "" {
		dst = append(dst, `,"tool_name":`...)
		dst = appendUnescaped(dst, a.ToolName)
	}
	if len(a.Arguments) > 0 {
		dst = append(dst, `,"arguments":`...)
		dst = append(dst, a.Arguments...)
	}
	if len(a.Metadata) > 0 {
		b, err := MarshalUnescaped(a.Metadata)
		if err != nil {
			return dst, false, err
		}
		dst = append(dst, `,"metadata":`...)
		dst = append(dst, b...)
	}
	return append(dst, '}'), true, nil
}

// appendReset appends req, whose Extra is empty, as MarshalUnescaped
// writes it, without reflection.
func appendReset(dst []byte, req ResetRequest) []byte {
	dst = append(dst, '{')
	if req.Seed != nil {
		dst = append(dst, `"seed":`...)
		dst = strconv.AppendInt(dst, *req.Seed, 10)
	}
	if req.EpisodeID != nil {
		if req.Seed != nil {
			dst = append(dst, ',')
		}
		dst = append(dst, `"episode_id":`...)
		dst = appendUnescaped(dst, *req.EpisodeID)
	}
	return append(dst, '}')
}

// compact reports whether b, valid JSON, has no space outside its
// strings: whether an encoder would write it as it is.
func compact(b []byte) bool {
	in := false // in a string
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}
