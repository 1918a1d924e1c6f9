package constrain

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// schemas are the schemas the tests and fuzzers check against.
var schemas = []string{
	``,
	`{}`,
	`{"type":"object"}`,
	`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"],"additionalProperties":false}`,
	`{"type":"object","properties":{"a":{"type":"integer"},"ab":{"type":"number"},"b":{"type":"array","items":{"enum":["x","y",1]}}},"required":["ab"]}`,
	`{"type":["string","null"]}`,
	`{"type":"array","items":{"type":"object","properties":{"k":{"type":"boolean"}},"additionalProperties":false}}`,
	`{"enum":[1,12,"a",null,{"x":[1]}]}`,
	`{"type":"object","properties":{"n":{"type":"object","properties":{"d":{"type":"integer"}},"required":["d"],"additionalProperties":false}},"required":["n"],"additionalProperties":false}`,
}

func mustCompile(t testing.TB, schema string) *Schema {
	t.Helper()
	s, err := Compile([]byte(schema))
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return s
}

// accepts feeds doc byte by byte and reports whether every byte was taken
// and the whole is one value.
func accepts(s *Schema, doc string) bool {
	j := NewJSON(s)
	for i := 0; i < len(doc); i++ {
		if !j.Feed(doc[i]) {
			return false
		}
	}
	return j.Done()
}

func TestJSON(t *testing.T) {
	tests := []struct {
		schema, doc string
		want        bool
	}{
		{``, `{"a":[1,-2.5e+3,true,false,null,"\u00e9\n"]}`, true},
		{``, ` "x" `, true},
		{``, `12`, true},
		{``, `-`, false},
		{``, `01`, false},
		{``, `1.`, false},
		{``, `{"a":1,}`, false},
		{``, `[1 2]`, false},
		{``, `"a` + "\x01" + `"`, false},
		{``, "\"\xff\"", false},
		{``, "\"\xed\xa0\x80\"", false}, // a surrogate in UTF-8
		{``, "\"é\"", true},
		{``, `{"a":1}{`, false},
		{``, `{"a":1}` + strings.Repeat(" ", MaxSpace+1), false},
		{``, `1` + strings.Repeat("0", maxNumber), false},
		{``, `1e99`, true},
		{``, `1E-123`, false},
		{schemas[2], `[]`, false},
		{schemas[2], `{"x":{"y":[]}}`, true},
		{schemas[3], `{"question":"47*28"}`, true},
		{schemas[3], `{ "question" : "47*28" }`, true},
		{schemas[3], `{}`, false},
		{schemas[3], `{"question":"a","question":"b"}`, false},
		{schemas[3], `{"question":1}`, false},
		{schemas[3], `{"question":"a","other":1}`, false},
		{schemas[3], `{"quest":"a"}`, false},
		{schemas[4], `{"ab":1.5,"a":2,"b":["x",1],"c":{}}`, true},
		{schemas[4], `{"ab":1,"a":2.5}`, false},
		{schemas[4], `{"ab":1,"b":["z"]}`, false},
		{schemas[4], `{"ab":1,"ab":2}`, false},
		{schemas[4], `{"a":1}`, false},
		{schemas[4], `{"ab":1,"a\u0062":2}`, false}, // no escapes in keys beside declared properties
		{schemas[5], `null`, true},
		{schemas[5], `"s"`, true},
		{schemas[5], `1`, false},
		{schemas[6], `[{"k":true},{}]`, true},
		{schemas[6], `[{"j":true}]`, false},
		{schemas[7], `12`, true},
		{schemas[7], `1`, true},
		{schemas[7], `{"x":[1]}`, true},
		{schemas[7], `2`, false},
		{schemas[7], `"b"`, false},
		{schemas[8], `{"n":{"d":3}}`, true},
		{schemas[8], `{"n":{}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.schema+" "+tt.doc, func(t *testing.T) {
			if got := accepts(mustCompile(t, tt.schema), tt.doc); got != tt.want {
				t.Errorf("accepts(%s) = %v, want %v", tt.doc, got, tt.want)
			}
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	tests := []struct{ schema, keyword string }{
		{`{"type":"string","pattern":"a+"}`, "pattern"},
		{`{"properties":{"a":{"minimum":1}}}`, "properties.a.minimum"},
		{`{"items":{"anyOf":[]}}`, "items.anyOf"},
		{`{"type":"date"}`, "type"},
		{`{"required":["a"]}`, "required"},
		{`{"additionalProperties":{"type":"string"}}`, "additionalProperties"},
		{`{"type":"string","enum":[1]}`, "enum"},
		{`{"$ref":"#/x"}`, "$ref"},
		{`[1]`, "schema"},
		{`{"properties":{"a\"b":{}}}`, "properties.a\"b"},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			_, err := Compile([]byte(tt.schema))
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("Compile: %v, want a *SchemaError", err)
			}
			if se.Keyword != tt.keyword {
				t.Errorf("keyword %q, want %q", se.Keyword, tt.keyword)
			}
		})
	}
}

// valid is a reference validator of the supported subset, on a decoded
// value, written independently of the checker.
func valid(v any, schema any) bool {
	m, ok := schema.(map[string]any)
	if !ok {
		return true // absent or true
	}
	if e, ok := m["enum"].([]any); ok {
		found := false
		for _, x := range e {
			a, _ := json.Marshal(x)
			b, _ := json.Marshal(v)
			if bytes.Equal(a, b) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	if t, ok := m["type"]; ok {
		types, ok := t.([]any)
		if !ok {
			types = []any{t}
		}
		if !slices.ContainsFunc(types, func(t any) bool { return hasType(v, t.(string)) }) {
			return false
		}
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := m["properties"].(map[string]any)
		for _, r := range asList(m["required"]) {
			if _, ok := v[r.(string)]; !ok {
				return false
			}
		}
		for k, x := range v {
			p, declared := props[k]
			if !declared && m["additionalProperties"] == false {
				return false
			}
			if declared && !valid(x, p) {
				return false
			}
		}
	case []any:
		for _, x := range v {
			if !valid(x, m["items"]) {
				return false
			}
		}
	}
	return true
}

func asList(v any) []any { l, _ := v.([]any); return l }

func hasType(v any, t string) bool {
	switch v := v.(type) {
	case map[string]any:
		return t == "object"
	case []any:
		return t == "array"
	case string:
		return t == "string"
	case bool:
		return t == "boolean"
	case nil:
		return t == "null"
	case json.Number:
		if t == "number" {
			return true
		}
		return t == "integer" && !strings.ContainsAny(string(v), ".eE")
	}
	return false
}

// checkDone fails unless doc is one JSON value valid against schema, with
// no key repeated.
func checkDone(t *testing.T, schema string, doc []byte) {
	t.Helper()
	if !json.Valid(doc) || !utf8.Valid(doc) {
		t.Fatalf("Done on %q, which is not valid JSON", doc)
	}
	var decoded any
	if err := json.Unmarshal(doc, &decoded); err != nil {
		t.Fatalf("Done on %q, which Go cannot decode: %v", doc, err)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", doc, err)
	}
	var sch any
	if schema != "" {
		if err := json.Unmarshal([]byte(schema), &sch); err != nil {
			t.Fatal(err)
		}
	}
	if !valid(v, sch) {
		t.Fatalf("Done on %q, which the schema %s refuses", doc, schema)
	}
}

// walk feeds random allowed bytes from an alphabet that JSON needs.
// At every step it checks that the checker is not stuck and that whatever it
// calls done is valid.
func walk(t *testing.T, schema string, seed uint64, steps int) {
	s := mustCompile(t, schema)
	rng := rand.New(rand.NewPCG(seed, 1))
	alphabet := []byte(`{}[]:," \-+.0123456789eEtrufalsnxyzabdkqio\/` + "\n\xc3\xa9")
	j := NewJSON(s)
	var try JSON
	var doc []byte
	for range steps {
		if j.Done() {
			checkDone(t, schema, doc)
			if rng.IntN(4) == 0 {
				return
			}
		}
		var ok []byte
		for b := range 256 {
			try.Set(&j)
			if try.Feed(byte(b)) {
				ok = append(ok, byte(b))
			}
		}
		if len(ok) == 0 {
			if !j.Done() {
				t.Fatalf("stuck after %q: no byte allowed and not done", doc)
			}
			return
		}
		// Prefer bytes of the alphabet, so that walks close values.
		var pref []byte
		for _, b := range ok {
			if bytes.IndexByte(alphabet, b) >= 0 {
				pref = append(pref, b)
			}
		}
		if len(pref) > 0 && rng.IntN(8) > 0 {
			ok = pref
		}
		b := ok[rng.IntN(len(ok))]
		if !j.Feed(b) {
			t.Fatalf("byte %q allowed on a copy, refused after %q", b, doc)
		}
		doc = append(doc, b)
	}
}

func TestJSONWalk(t *testing.T) {
	for _, schema := range schemas {
		for seed := range uint64(200) {
			walk(t, schema, seed, 200)
		}
	}
}

func FuzzJSONWalk(f *testing.F) {
	for i := range schemas {
		f.Add(uint8(i), uint64(i))
	}
	f.Fuzz(func(t *testing.T, which uint8, seed uint64) {
		walk(t, schemas[int(which)%len(schemas)], seed, 300)
	})
}

// FuzzJSONBytes checks that whatever the checker takes whole is valid.
// It also checks that every compact encoding of a decoded value is taken.
func FuzzJSONBytes(f *testing.F) {
	for _, seed := range []string{`{"question":"47*28"}`, `[1,2.5,"x",null]`, `{"ab":1,"b":["x"]}`, `"\u00e9"`, `{"n":{"d":3}}`} {
		f.Add(uint8(0), []byte(seed))
	}
	f.Fuzz(func(t *testing.T, which uint8, doc []byte) {
		schema := schemas[int(which)%len(schemas)]
		s := mustCompile(t, schema)
		if accepts(s, string(doc)) {
			checkDone(t, schema, doc)
		}
		// Any JSON value that decodes, re-encoded compactly, is taken
		// by the schema-free checker.
		var v any
		if json.Unmarshal(doc, &v) == nil {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if enc.Encode(v) == nil {
				text := strings.TrimSuffix(b.String(), "\n")
				if !accepts(nil, text) && len(text) < 1000 && !strings.ContainsAny(text, "eE") {
					t.Fatalf("refused %q, valid JSON", text)
				}
			}
		}
	})
}
