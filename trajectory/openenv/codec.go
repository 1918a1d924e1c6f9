package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strconv"

	"github.com/coder/websocket"
)

// The WebSocket hot path writes its messages by hand. encoding/json
// checks and compacts every json.RawMessage it writes, so a message whose
// data holds an encoded observation was scanned three times. The bytes
// are the same as json.Marshal's: the fragments come from json.Marshal,
// compact and HTML-escaped already.

// appendMessage appends the message {"type":typ,"data":data}. The type is
// one of the protocol's, a plain ASCII word; data is json.Marshal's output.
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
	if r, ok := v.(Result); ok && (r.Reward == nil || finite(*r.Reward)) {
		return appendResult(dst, r)
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

// appendFloat appends a finite f as encoding/json writes a float64: like
// ES6, with exponents only for very small or large magnitudes.
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
