package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/delegatelab/delegate/openai/wire"
)

// The checks a request body passes before it is decoded: valid UTF-8,
// only parameters the server acts on, and every list within its bound.
// They read the body's bytes and allocate little, so that a hostile body
// is refused before its lists are built.

// Bounds on the lists of a request that OpenAI's format leaves open. A
// list past its bound is a 400 naming it. With the 1 MiB body limit they
// keep what one request can make the server build small.
const (
	// MaxMessages bounds the messages of a request.
	MaxMessages = 2048
	// MaxToolCalls bounds the tool calls of one message.
	MaxToolCalls = 128
	// MaxContentParts bounds the content parts of one message.
	MaxContentParts = 128
	// MaxLogitBias bounds the tokens logit_bias names.
	MaxLogitBias = 300
)

// Parameters handled by the constrained decoding of the local engine.
// They are neither refused nor checked here beyond the penalties' range.
var constrainedParams = map[string]bool{
	"tool_choice": true, "parallel_tool_calls": true, "response_format": true,
	"frequency_penalty": true, "presence_penalty": true, "logit_bias": true,
}

// noOpParams are accepted and have no effect: by OpenAI's definition none
// of them changes the answer. Each maps to the check of its value.
var noOpParams = map[string]func(raw []byte) string{
	// An end user's id, for abuse monitoring.
	"user": isString,
	// Stable ids for abuse detection and prompt caching.
	"safety_identifier": isString,
	"prompt_cache_key":  isString,
	// Tags of a stored completion; OpenAI's bound is 16 keys, counted
	// before the map is built.
	"metadata": func(raw []byte) string {
		var m map[string]string
		if n, _ := eachElement(raw, '{', 17, nil); n > 16 || json.Unmarshal(raw, &m) != nil {
			return "want an object of at most 16 string values"
		}
		return ""
	},
	// Nothing is stored here, so only false is honest.
	"store": func(raw []byte) string {
		if string(raw) != "false" {
			return "this server stores no completions; send false or leave it out"
		}
		return ""
	},
	// Text out is all a model here makes.
	"modalities": func(raw []byte) string {
		var m []string
		if json.Unmarshal(raw, &m) != nil || len(m) != 1 || m[0] != "text" {
			return `only ["text"] is supported`
		}
		return ""
	},
}

func isString(raw []byte) string {
	if len(raw) == 0 || raw[0] != '"' {
		return "want a string"
	}
	return ""
}

// refusedWhy says why some of OpenAI's parameters are refused.
var refusedWhy = map[string]string{
	"functions":          "use tools",
	"function_call":      "use tool_choice",
	"audio":              "the models here make text only",
	"prediction":         "predicted outputs are not implemented",
	"web_search_options": "there is no web search here",
	"reasoning_effort":   "the models here have no reasoning setting",
	"verbosity":          "the models here have no verbosity setting",
	"service_tier":       "there is one tier here",
}

// requestParams are the parameters package wire decodes: those the
// server implements.
var requestParams = func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeFor[wire.ChatRequest]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}()

// checkBody runs the checks on a whole body, in order: UTF-8, then each
// top-level parameter. plain reports that every top-level key is one
// wire.DecodeRequest reads.
func checkBody(buf []byte) (plain bool, e *apiErr) {
	if off := badText(buf); off >= 0 {
		where := pathAt(buf, off)
		if where == "" {
			return false, badRequest("", "request body: invalid UTF-8 at byte %d", off)
		}
		return false, badRequest(where, "%s: invalid UTF-8 at byte %d of the body", where, off)
	}
	return checkParams(buf)
}

// skip is a JSON value read and dropped without a copy.
type skip struct{}

func (*skip) UnmarshalJSON([]byte) error { return nil }

// checkParams reads the top-level object of buf in place.
// Every key must be a parameter the server implements, accepts as a no-op, or leaves to constrained decoding.
// Every list must be within its bound.
// A null value of one of OpenAI's parameters is the parameter left out.
// An unknown key is refused whatever its value.
// plain reports that every key is one wire.DecodeRequest reads.
func checkParams(buf []byte) (plain bool, e *apiErr) {
	if !json.Valid(buf) {
		return false, syntaxError(buf)
	}
	if t := bytes.TrimSpace(buf); t[0] != '{' {
		return false, badRequest("", "request body is not a chat completion request: want a JSON object")
	}
	plain = true
	eachElement(buf, '{', math.MaxInt, func(_ int, member []byte) bool {
		key, value := splitMember(member)
		plain = plain && wire.PlainKey(key)
		e = checkMember(key, value)
		return e == nil
	})
	return plain, e
}

// syntaxError is the 400 of a body that is not one JSON value.
func syntaxError(buf []byte) *apiErr {
	dec := json.NewDecoder(bytes.NewReader(buf))
	if err := dec.Decode(&skip{}); err != nil {
		return notRequest(err)
	}
	return badRequest("", "request body is not a chat completion request: data after the JSON object")
}

// splitMember splits an object's member, valid JSON, into its key and its
// value.
func splitMember(member []byte) (key string, value []byte) {
	raw, value := memberKey(member)
	return keyText(raw), value
}

// checkMember checks one top-level parameter.
func checkMember(key string, value []byte) *apiErr {
	if !requestParams[key] && !constrainedParams[key] && noOpParams[key] == nil {
		why, ok := refusedWhy[key]
		switch {
		case !ok:
			return badRequest(key, "%s: unknown parameter; this server refuses what it does not implement", key)
		case string(value) != "null": // OpenAI's own parameters may be sent as null: left out
			return badRequest(key, "%s: not supported by this server (%s)", key, why)
		}
		return nil
	}
	if string(value) == "null" {
		return nil
	}
	if e := checkParam(key, value); e != nil {
		return e
	}
	return checkNested(key, value)
}

// checkParam checks the value of one top-level parameter, raw valid JSON
// other than null.
func checkParam(key string, raw []byte) *apiErr {
	if check := noOpParams[key]; check != nil {
		if msg := check(raw); msg != "" {
			return badRequest(key, "%s: %s", key, msg)
		}
		return nil
	}
	switch key {
	case "messages":
		return checkMessages(raw)
	case "tools":
		if n, ok := countElements(raw, wire.MaxTools+1); ok && n > wire.MaxTools {
			return badRequest("tools", "tools: more than %d tools", wire.MaxTools)
		}
	case "stop":
		if n, ok := countElements(raw, wire.MaxStop+1); ok && n > wire.MaxStop {
			return badRequest("stop", "stop: more than %d sequences", wire.MaxStop)
		}
	case "max_tokens", "max_completion_tokens":
		// Absent is the server's default; 0 asks for nothing, which OpenAI
		// refuses. Negative values are Validate's.
		if n, err := strconv.ParseFloat(string(raw), 64); err == nil && n == 0 {
			return badRequest(key, "%s: must be at least 1 (leave it out for the server's default)", key)
		}
	case "logit_bias":
		if n, _ := eachElement(raw, '{', MaxLogitBias+1, nil); n > MaxLogitBias {
			return badRequest("logit_bias", "logit_bias: more than %d tokens", MaxLogitBias)
		}
	case "frequency_penalty", "presence_penalty":
		n, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || !(n >= -2 && n <= 2) {
			return badRequest(key, "%s: want a number from -2 to 2, got %s", key, raw)
		}
	}
	return nil
}

// checkMessages bounds the messages and, in each, the tool calls and
// content parts. It reads each message's members in place: no message
// is decoded here.
func checkMessages(raw []byte) *apiErr {
	var e *apiErr
	n, _ := eachElement(raw, '[', MaxMessages+1, func(i int, elem []byte) bool {
		e = checkMessageLists(i, elem)
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

// checkMessageLists bounds the tool calls and content parts of message
// i, raw valid JSON. A message of the wrong shape is left for decoding
// to report, and a key the message may not have for checkNested. A key
// given twice is checked each time.
func checkMessageLists(i int, msg []byte) *apiErr {
	var e *apiErr
	eachElement(msg, '{', math.MaxInt, func(_ int, member []byte) bool {
		key, value := memberKey(member)
		if bytes.IndexByte(key, '\\') >= 0 {
			key = []byte(keyText(key)) // rare: an escaped key
		}
		switch string(key) {
		case "tool_calls":
			if n, _ := countElements(value, MaxToolCalls+1); n > MaxToolCalls {
				e = badRequest(fmt.Sprintf("messages[%d].tool_calls", i), "messages[%d].tool_calls: more than %d tool calls", i, MaxToolCalls)
			}
		case "content":
			if n, _ := countElements(value, MaxContentParts+1); n > MaxContentParts {
				e = badRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d].content: more than %d content parts", i, MaxContentParts)
			}
		}
		return e == nil
	})
	return e
}

// countElements counts the elements of raw, a valid JSON value, up to limit.
// ok is false when raw is not an array.
func countElements(raw []byte, limit int) (n int, ok bool) {
	return eachElement(raw, '[', limit, nil)
}

// eachElement calls fn with each element of raw, a valid JSON value, in order.
// It stops when fn returns false or limit elements have been seen. A nil fn only counts.
// It returns the elements seen.
// ok is false when raw is not an array, or with open '{' an object, whose elements are its members.
func eachElement(raw []byte, open byte, limit int, fn func(i int, elem []byte) bool) (n int, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != open {
		return 0, false
	}
	if fn == nil {
		fn = func(int, []byte) bool { return true }
	}
	depth, start, inString := 0, 1, false
	for i := 1; i < len(raw) && n < limit; i++ {
		c := raw[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
		case ']', '}':
			if depth > 0 {
				depth--
				continue
			}
			// The array's end: its last element, if any, ends here.
			if elem := bytes.TrimSpace(raw[start:i]); len(elem) > 0 {
				n++
				fn(n-1, elem)
			}
			return n, true
		case ',':
			if depth > 0 {
				continue
			}
			n++
			if !fn(n-1, bytes.TrimSpace(raw[start:i])) {
				return n, true
			}
			start = i + 1
		}
	}
	return n, true
}

// notRequest is the 400 of a body that is not JSON of the request's shape.
func notRequest(err error) *apiErr {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) && ute.Field != "" {
		return badRequest(ute.Field, "%s: want %s, got a JSON %s", ute.Field, ute.Type, ute.Value)
	}
	return badRequest("", "request body is not a chat completion request: %v", err)
}

// badText returns the offset of the first byte of buf that is not UTF-8, or -1.
// An escaped lone UTF-16 surrogate such as \ud800 counts too, since JSON decoders silently replace it.
func badText(buf []byte) int {
	if utf8.Valid(buf) && !bytes.Contains(buf, []byte(`\u`)) && !bytes.Contains(buf, []byte(`\U`)) {
		return -1
	}
	for i := 0; i < len(buf); {
		c := buf[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(buf[i:])
			if r == utf8.RuneError && size == 1 {
				return i
			}
			i += size
			continue
		}
		if c == '\\' && i+1 < len(buf) {
			if buf[i+1] != 'u' {
				i += 2 // an escape of one character; "\\u" is no \u escape
				continue
			}
			r, ok := hex4(buf[i+2:])
			switch {
			case !ok:
				i += 2 // not an escape the decoder takes; it reports it
				continue
			case r >= 0xDC00 && r <= 0xDFFF:
				return i // a low surrogate first
			case r >= 0xD800 && r <= 0xDBFF:
				if len(buf) < i+12 || buf[i+6] != '\\' || buf[i+7] != 'u' {
					return i
				}
				if lo, ok := hex4(buf[i+8:]); !ok || lo < 0xDC00 || lo > 0xDFFF {
					return i
				}
				i += 12
				continue
			}
			i += 6
			continue
		}
		i++
	}
	return -1
}

// hex4 reads four hex digits.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 16)
	return rune(v), err == nil
}

// pathAt names the parameter whose key or value holds byte off of buf, as in "messages[2].content".
// That is how OpenAI's errors name one. It is "" when buf is not JSON up to there.
// It runs only for a body already refused.
func pathAt(buf []byte, off int) string {
	type frame struct {
		object  bool
		key     string
		index   int
		wantKey bool
	}
	var stack []frame
	path := func() string {
		var b strings.Builder
		for i, f := range stack {
			switch {
			case f.object && i > 0:
				b.WriteString("." + f.key)
			case f.object:
				b.WriteString(f.key)
			default:
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
			}
		}
		return b.String()
	}
	dec := json.NewDecoder(bytes.NewReader(buf))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		past := dec.InputOffset() > int64(off)
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].wantKey = true
			}
			continue
		}
		if top != nil && top.object && top.wantKey {
			top.key, top.wantKey = tok.(string), false
			if past {
				return path()
			}
			continue
		}
		if top != nil && !top.object {
			top.index++
		}
		if past {
			return path()
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{index: -1})
		default:
			if top != nil && top.object {
				top.wantKey = true
			}
		}
	}
}
