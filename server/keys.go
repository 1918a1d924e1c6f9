package server

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/delegatelab/delegate/openai/wire"
)

// The keys an object inside a request may have. As at the top level, a
// key the server does not act on is refused, so that a client never
// believes a field was honoured when it was dropped. OpenAI's own fields
// that the server does not implement are accepted only as null.

// shape is the keys one kind of object may have.
// It also holds the shapes of its nested objects and lists of objects.
type shape struct {
	keys     map[string]bool
	nullOnly map[string]string // OpenAI's fields accepted as null: why not otherwise
	objects  map[string]*shape // a member that is an object
	lists    map[string]*shape // a member that is an array of objects
	// echoes are keys that repeat the enclosing message's own member;
	// after checks that each copy equals it.
	echoes map[string]bool
	after  func(raw []byte) *badField // checks the whole object once its keys pass
}

// jsonKeys returns the JSON names of T's fields.
func jsonKeys[T any]() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeFor[T]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

var (
	functionCallShape = &shape{keys: jsonKeys[wire.Function]()}
	toolCallShape     = &shape{keys: jsonKeys[wire.ToolCall](), objects: map[string]*shape{"function": functionCallShape}}
	partShape         = &shape{keys: jsonKeys[wire.ContentPart](), nullOnly: map[string]string{
		"image_url":   "the models here read text only",
		"input_audio": "the models here read text only",
		"file":        "the models here read text only",
	},
		// The Agents SDK for JavaScript sends an assistant turn that had
		// both text and tool calls back with the message's role and
		// tool_calls copied into its text part. A copy says nothing new.
		echoes: map[string]bool{"role": true, "tool_calls": true},
	}
	messageShape = &shape{
		keys: jsonKeys[wire.Message](),
		nullOnly: map[string]string{
			"refusal":       "a refusal is not sent back to a model here",
			"audio":         "the models here make text only",
			"function_call": "use tool_calls",
			"annotations":   "the models here make no annotations",
		},
		lists: map[string]*shape{"tool_calls": toolCallShape, "content": partShape},
		after: checkEchoes,
	}
	toolShape = &shape{
		keys:    jsonKeys[wire.Tool](),
		objects: map[string]*shape{"function": {keys: jsonKeys[wire.FunctionDef]()}},
	}
	responseFormatShape = &shape{
		keys:    jsonKeys[wire.ResponseFormat](),
		objects: map[string]*shape{"json_schema": {keys: jsonKeys[wire.JSONSchema]()}},
	}
	streamOptionsShape = &shape{keys: jsonKeys[wire.StreamOptions]()}
	toolChoiceShape    = &shape{
		keys:    map[string]bool{"type": true, "function": true},
		objects: map[string]*shape{"function": {keys: map[string]bool{"name": true}}},
	}
)

// The top-level parameters whose objects are checked key by key: lists
// of objects, and objects.
var (
	nestedLists   = map[string]*shape{"messages": messageShape, "tools": toolShape}
	nestedObjects = map[string]*shape{
		"response_format": responseFormatShape,
		"stream_options":  streamOptionsShape,
		"tool_choice":     toolChoiceShape,
	}
)

// checkNested checks the objects inside the top-level parameter key.
func checkNested(key string, raw []byte) *apiErr {
	var bad *badField
	if s := nestedLists[key]; s != nil {
		bad = s.checkList(raw)
	} else if s := nestedObjects[key]; s != nil {
		bad = s.checkObject(raw)
	}
	if bad == nil {
		return nil
	}
	where := key + bad.path
	if bad.why == "" {
		return badRequest(where, "%s: unknown field; this server refuses what it does not implement", where)
	}
	return badRequest(where, "%s: not supported by this server (%s)", where, bad.why)
}

// badField is a refused field: its path below the parameter, and why.
// The reason is "" for a field that is not one of OpenAI's.
// The path is built only for a refusal, so a valid body costs no allocation per key.
type badField struct{ path, why string }

// checkList checks each object of raw, a valid JSON value, when it is an
// array. Any other kind of value is left for decoding to report.
func (s *shape) checkList(raw []byte) *badField {
	var bad *badField
	eachElement(raw, '[', math.MaxInt, func(i int, elem []byte) bool {
		if bad = s.checkObject(elem); bad != nil {
			bad.path = "[" + strconv.Itoa(i) + "]" + bad.path
		}
		return bad == nil
	})
	return bad
}

// checkObject checks each member of raw when it is an object.
func (s *shape) checkObject(raw []byte) *badField {
	var bad *badField
	eachElement(raw, '{', math.MaxInt, func(_ int, member []byte) bool {
		bad = s.checkMember(member)
		return bad == nil
	})
	if bad == nil && s.after != nil {
		bad = s.after(raw)
	}
	return bad
}

// checkEchoes refuses a content part of msg whose copy of a message
// member (partShape.echoes) differs from the member itself. Messages
// whose parts copy nothing cost one scan of their members.
func checkEchoes(msg []byte) *badField {
	var content []byte
	eachElement(msg, '{', math.MaxInt, func(_ int, member []byte) bool {
		if key, value := memberKey(member); string(key) == "content" {
			content = value
		}
		return true
	})
	var bad *badField
	var own map[string]any // the message's members, decoded at the first copy
	eachElement(content, '[', math.MaxInt, func(i int, part []byte) bool {
		eachElement(part, '{', math.MaxInt, func(_ int, member []byte) bool {
			key, value := memberKey(member)
			if bytes.IndexByte(key, '\\') >= 0 {
				key = []byte(keyText(key)) // rare: an escaped key
			}
			if !partShape.echoes[string(key)] {
				return true
			}
			name := string(key)
			if own == nil && json.Unmarshal(msg, &own) != nil {
				own = map[string]any{} // valid JSON: never
			}
			var copied any
			if json.Unmarshal(value, &copied) != nil || !reflect.DeepEqual(copied, own[name]) {
				bad = &badField{path: ".content[" + strconv.Itoa(i) + "]." + name, why: "a copy of the message's own " + name + " must equal it"}
			}
			return bad == nil
		})
		return bad == nil
	})
	return bad
}

// checkMember checks one member of an object.
func (s *shape) checkMember(member []byte) *badField {
	key, value := memberKey(member)
	if bytes.IndexByte(key, '\\') >= 0 {
		key = []byte(keyText(key)) // rare: an escaped key
	}
	if !s.keys[string(key)] && !s.echoes[string(key)] {
		why, ok := s.nullOnly[string(key)]
		switch {
		case !ok:
			return &badField{path: "." + string(key)}
		case string(value) != "null":
			return &badField{path: "." + string(key), why: why}
		}
		return nil
	}
	var bad *badField
	if sub := s.objects[string(key)]; sub != nil {
		bad = sub.checkObject(value)
	} else if sub := s.lists[string(key)]; sub != nil {
		bad = sub.checkList(value)
	}
	if bad != nil {
		bad.path = "." + string(key) + bad.path
	}
	return bad
}

// memberKey splits an object's member, valid JSON, into its key and value.
// The key is as written, escapes kept, less the quotes.
func memberKey(member []byte) (key, value []byte) {
	end := 1
	for ; end < len(member) && member[end] != '"'; end++ {
		if member[end] == '\\' {
			end++
		}
	}
	value = bytes.TrimSpace(member[end+1:])
	return member[1:end], bytes.TrimSpace(value[1:]) // past the colon
}

// keyText is a key as memberKey gives it, unescaped.
func keyText(key []byte) string {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key)
	}
	var s string
	if json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &s) != nil {
		return string(key) // valid JSON: never
	}
	return s
}
