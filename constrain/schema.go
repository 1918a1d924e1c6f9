// Package constrain checks, byte by byte, that a generation stays a prefix of what a request allows.
// That is a JSON value, one valid against a JSON schema, or tool calls to
// declared functions. A sampler masks every token whose bytes would leave
// that set, so the finished output is valid by construction. Compile states
// the small JSON schema subset; a schema using anything else is refused,
// never half-enforced. The package imports only the standard library.
package constrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Types of a JSON value, as a bit set.
const (
	typeObject = 1 << iota
	typeArray
	typeString
	typeNumber
	typeInteger
	typeBoolean
	typeNull
	typeAny = typeObject | typeArray | typeString | typeNumber | typeInteger | typeBoolean | typeNull
)

var typeNames = map[string]uint8{
	"object": typeObject, "array": typeArray, "string": typeString, "number": typeNumber,
	"integer": typeInteger, "boolean": typeBoolean, "null": typeNull,
}

// maxProps bounds an object's properties and an enum's values: the
// checker tracks them in 64-bit sets.
const maxProps = 64

// Schema is a compiled JSON schema. The nil *Schema accepts any value.
type Schema struct {
	types    uint8
	names    []string // property names, in declaration order
	props    []*Schema
	required uint64 // bit i: names[i] is required
	closed   bool   // additionalProperties false
	enum     []string
	items    *Schema
}

// SchemaError is a schema Compile refuses. Keyword names what is wrong or
// unsupported, as a path ("properties.a.pattern").
type SchemaError struct {
	Keyword string
	Message string
}

func (e *SchemaError) Error() string { return e.Keyword + ": " + e.Message }

// Compile reads a JSON schema written in the supported subset.
// The subset is type, properties, required, additionalProperties, enum and
// items. A type is object, array, string, number, integer, boolean, null,
// or a list of them; additionalProperties is true or false. The annotations
// title, description, default and examples are read and constrain nothing.
// Any other keyword is a *SchemaError naming it. Property names must be
// printable text with no quote, backslash or control character. Every
// required name must be a property.
func Compile(schema []byte) (*Schema, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil, nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, &SchemaError{Keyword: "schema", Message: "not valid JSON: " + err.Error()}
	}
	return compile(v, "")
}

// ObjectSchema is s restricted to objects: the schema of a tool call's
// arguments, which are always one JSON object.
func ObjectSchema(s *Schema) (*Schema, error) {
	if s == nil {
		return &Schema{types: typeObject}, nil
	}
	if s.types&typeObject == 0 {
		return nil, &SchemaError{Keyword: "type", Message: "tool parameters must allow an object"}
	}
	o := *s
	o.types = typeObject
	o.enum = nil
	for _, e := range s.enum {
		if e[0] == '{' {
			o.enum = append(o.enum, e)
		}
	}
	if s.enum != nil && o.enum == nil {
		return nil, &SchemaError{Keyword: "enum", Message: "no value is an object"}
	}
	return &o, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func compile(v any, path string) (*Schema, error) {
	switch v := v.(type) {
	case bool:
		if v {
			return nil, nil
		}
		return nil, &SchemaError{Keyword: join(path, "false"), Message: "a schema that accepts nothing is not supported"}
	case map[string]any:
		return compileObject(v, path)
	}
	return nil, &SchemaError{Keyword: join(path, "schema"), Message: "want a JSON object"}
}

func compileObject(m map[string]any, path string) (*Schema, error) {
	s := &Schema{types: typeAny}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first unsupported keyword reported is the same every time
	for _, k := range keys {
		switch k {
		case "type", "properties", "required", "additionalProperties", "enum", "items",
			"title", "description", "default", "examples", "$schema":
		default:
			return nil, &SchemaError{Keyword: join(path, k), Message: "keyword is not supported (supported: type, properties, required, additionalProperties, enum, items)"}
		}
	}
	if t, ok := m["type"]; ok {
		types, err := compileType(t, join(path, "type"))
		if err != nil {
			return nil, err
		}
		s.types = types
	}
	if p, ok := m["properties"]; ok {
		if err := s.compileProperties(p, join(path, "properties")); err != nil {
			return nil, err
		}
	}
	if r, ok := m["required"]; ok {
		if err := s.compileRequired(r, join(path, "required")); err != nil {
			return nil, err
		}
	}
	if a, ok := m["additionalProperties"]; ok {
		switch a := a.(type) {
		case bool:
			s.closed = !a
		case map[string]any:
			if len(a) > 0 {
				return nil, &SchemaError{Keyword: join(path, "additionalProperties"), Message: "only true or false is supported"}
			}
		default:
			return nil, &SchemaError{Keyword: join(path, "additionalProperties"), Message: "want true or false"}
		}
	}
	if it, ok := m["items"]; ok {
		items, err := compile(it, join(path, "items"))
		if err != nil {
			return nil, err
		}
		s.items = items
	}
	if e, ok := m["enum"]; ok {
		if err := s.compileEnum(e, join(path, "enum")); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func compileType(t any, path string) (uint8, error) {
	one := func(x any) (uint8, error) {
		name, _ := x.(string)
		bit, ok := typeNames[name]
		if !ok {
			return 0, &SchemaError{Keyword: path, Message: fmt.Sprintf("unknown type %v", x)}
		}
		if bit == typeNumber {
			bit |= typeInteger // every integer is a number
		}
		return bit, nil
	}
	list, ok := t.([]any)
	if !ok {
		return one(t)
	}
	var types uint8
	for _, x := range list {
		bit, err := one(x)
		if err != nil {
			return 0, err
		}
		types |= bit
	}
	if types == 0 {
		return 0, &SchemaError{Keyword: path, Message: "an empty list of types accepts nothing"}
	}
	return types, nil
}

func (s *Schema) compileProperties(p any, path string) error {
	m, ok := p.(map[string]any)
	if !ok {
		return &SchemaError{Keyword: path, Message: "want an object"}
	}
	if len(m) > maxProps {
		return &SchemaError{Keyword: path, Message: fmt.Sprintf("%d properties; at most %d are supported", len(m), maxProps)}
	}
	for name := range m {
		s.names = append(s.names, name)
	}
	slices.Sort(s.names)
	for _, name := range s.names {
		if !plainName(name) {
			return &SchemaError{Keyword: join(path, name), Message: "a property name with a quote, backslash or control character is not supported"}
		}
		sub, err := compile(m[name], join(path, name))
		if err != nil {
			return err
		}
		s.props = append(s.props, sub)
	}
	return nil
}

func (s *Schema) compileRequired(r any, path string) error {
	list, ok := r.([]any)
	if !ok {
		return &SchemaError{Keyword: path, Message: "want a list of property names"}
	}
	for _, x := range list {
		name, _ := x.(string)
		i := slices.Index(s.names, name)
		if i < 0 {
			return &SchemaError{Keyword: path, Message: fmt.Sprintf("%v is not among properties; only declared properties can be required", x)}
		}
		s.required |= 1 << i
	}
	return nil
}

func (s *Schema) compileEnum(e any, path string) error {
	list, ok := e.([]any)
	if !ok {
		return &SchemaError{Keyword: path, Message: "want a list"}
	}
	if len(list) > maxProps {
		return &SchemaError{Keyword: path, Message: fmt.Sprintf("%d values; at most %d are supported", len(list), maxProps)}
	}
	s.enum = []string{}
	for _, x := range list {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(x); err != nil {
			return &SchemaError{Keyword: path, Message: err.Error()}
		}
		text := strings.TrimSuffix(b.String(), "\n")
		if s.types&literalType(text) != 0 && !slices.Contains(s.enum, text) {
			s.enum = append(s.enum, text)
		}
	}
	if len(s.enum) == 0 {
		return &SchemaError{Keyword: path, Message: "no value has an allowed type"}
	}
	return nil
}

// literalType is the type of a JSON value from its compact text.
func literalType(text string) uint8 {
	switch text[0] {
	case '{':
		return typeObject
	case '[':
		return typeArray
	case '"':
		return typeString
	case 't', 'f':
		return typeBoolean
	case 'n':
		return typeNull
	}
	if strings.ContainsAny(text, ".eE") {
		return typeNumber
	}
	return typeInteger
}

// plainName reports whether a property name is written in JSON as itself
// between quotes.
func plainName(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == '"' || c == '\\' || c == 0x7f {
			return false
		}
	}
	return true
}
