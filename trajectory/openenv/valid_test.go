package openenv

import (
	"encoding/json"
	"strings"
	"testing"
)

var validCases = []string{
	``, ` `, `{}`, ` {} `, `[]`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{,}`, `[,1]`, `{"a":1 "b":2}`,
	`"`, `"abc`, `"a\"b"`, `"a\\"`, `"\u00e9"`, `"\u00g9"`, `"\u00e"`, `"\x"`, "\"a\tb\"", "\"a\x7fb\"", "\"\xff\xfe\"",
	`0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.25e-07`, `+1`, `1.5.2`, `0x10`,
	`true`, `tru`, `truex`, `false`, `null`, `nul`, `nulls`, `True`,
	`{"a":[1,{"b":null}],"c":"d"}`, `[[[]]]`, `[[[]]`, `{"a":{"b":{}}}}`, `1 2`, `{} {}`, "\n\t\r {\"a\" : [ 1 , 2 ] } \n",
	`{"type":"step","data":{"type":"call_tool","arguments":{"q":"}{][\",:"}}}`,
}

// TestValidJSON compares validJSON with json.Valid, deep nesting included.
func TestValidJSON(t *testing.T) {
	cases := append([]string(nil), validCases...)
	for _, n := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		cases = append(cases, strings.Repeat("[", n)+strings.Repeat("]", n), strings.Repeat(`{"a":`, n)+"1"+strings.Repeat("}", n))
	}
	for _, c := range cases {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("validJSON(%.40q): got %v, want %v", c, got, want)
		}
	}
}

// FuzzValidJSON checks validJSON against json.Valid on any bytes.
func FuzzValidJSON(f *testing.F) {
	for _, c := range append(validCases, memberCases...) {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Errorf("validJSON(%q): got %v, want %v", b, got, want)
		}
	})
}
