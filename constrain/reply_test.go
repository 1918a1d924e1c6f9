package constrain

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// syms spells a reply: ( is Open, ) is Close, ~ is Other, any other byte
// itself.
func syms(s string) []int {
	var out []int
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			out = append(out, Open)
		case ')':
			out = append(out, Close)
		case '~':
			out = append(out, Other)
		default:
			out = append(out, int(s[i]))
		}
	}
	return out
}

func spec(t *testing.T, s Spec) *Spec {
	t.Helper()
	if err := s.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return &s
}

func TestReply(t *testing.T) {
	args := mustCompile(t, schemas[3])
	tools := func() []Tool {
		return []Tool{{Name: "delegate", Args: args}, {Name: "del"}, {Name: "calc", Args: mustCompile(t, `{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`)}}
	}
	tests := []struct {
		name  string
		spec  Spec
		reply string
		want  bool
	}{
		{"free", Spec{MaxCalls: 1}, `hi (anything at all) more~`, true},
		{"free two calls over the bound", Spec{MaxCalls: 1}, `(a)(b)`, false},
		{"no calls", Spec{NoCalls: true}, `text~`, true},
		{"no calls refuses open", Spec{NoCalls: true}, `text(`, false},
		{"required", Spec{Required: true, Tools: tools()}, `(delegate{"question":"47*28"})`, true},
		{"required two", Spec{Required: true, Tools: tools()}, `(delegate{"question":"a"})(calc{"x":3})`, true},
		{"required one at most", Spec{Required: true, MaxCalls: 1, Tools: tools()}, `(delegate{"question":"a"})(calc{"x":3})`, false},
		{"required no content", Spec{Required: true, Tools: tools()}, `x(delegate{"question":"a"})`, false},
		{"required not empty", Spec{Required: true, Tools: tools()}, ``, false},
		{"required no content after", Spec{Required: true, Tools: tools()}, `(del{})x`, false},
		{"a name prefix of another", Spec{Required: true, Tools: tools()}, `(del{"any":[1]})`, true},
		{"undeclared", Spec{Required: true, Tools: tools()}, `(dele{})`, false},
		{"arguments against schema", Spec{Required: true, Tools: tools()}, `(calc{"x":1.5})`, false},
		{"arguments missing required", Spec{Required: true, Tools: tools()}, `(delegate{})`, false},
		{"unclosed", Spec{Required: true, Tools: tools()}, `(del{}`, false},
		{"strict auto content then call", Spec{Strict: true, Tools: tools()}, `let me ask (delegate{"question":"q"})`, true},
		{"strict auto malformed", Spec{Strict: true, Tools: tools()}, `(delegate{"q":1})`, false},
		{"json content", Spec{JSON: true}, ` {"a": [1, "b"]}`, true},
		{"json content incomplete", Spec{JSON: true}, `{"a": [1`, false},
		{"json content other token", Spec{JSON: true}, `~`, false},
		{"json or a call", Spec{JSON: true, Tools: tools()}, `(x)`, true},
		{"json then no call", Spec{JSON: true, Tools: tools()}, `{}(x)`, false},
		{"qwen required", Spec{Syntax: Qwen, Required: true, Tools: tools()}, "<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"x\":3}}\n</tool_call>", true},
		{"qwen two calls", Spec{Syntax: Qwen, Required: true, Tools: tools()}, "<tool_call>\n{\"name\": \"del\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"x\":3}}\n</tool_call>", true},
		{"qwen one call at most", Spec{Syntax: Qwen, Required: true, MaxCalls: 1, Tools: tools()}, "<tool_call>\n{\"name\": \"del\", \"arguments\": {}}\n</tool_call>\n", false},
		{"qwen required no content", Spec{Syntax: Qwen, Required: true, Tools: tools()}, "hi <tool_call>\n{\"name\": \"del\", \"arguments\": {}}\n</tool_call>", false},
		{"qwen undeclared", Spec{Syntax: Qwen, Required: true, Tools: tools()}, "<tool_call>\n{\"name\": \"dele\", \"arguments\": {}}\n</tool_call>", false},
		{"qwen none", Spec{Syntax: Qwen, NoCalls: true}, "a <tool_call> b", false},
		{"qwen none near miss", Spec{Syntax: Qwen, NoCalls: true}, "a <tool_cal <<tool_call b", true},
		{"qwen free call", Spec{Syntax: Qwen, MaxCalls: 1}, "hi <tool_call>any</tool_call> more", true},
		{"qwen free second call", Spec{Syntax: Qwen, MaxCalls: 1}, "<tool_call>a</tool_call><tool_call>", false},
		{"qwen strict auto", Spec{Syntax: Qwen, Strict: true, Tools: tools()}, "let me <tool_call>\n{\"name\": \"del\", \"arguments\": {}}\n</tool_call>", true},
		{"qwen json or a call", Spec{Syntax: Qwen, JSON: true, MaxCalls: 1}, " <tool_call>x</tool_call>", true},
		{"qwen json never spells a call", Spec{Syntax: Qwen, JSON: true}, `{"a":"<tool_call>"}`, false},
		{"qwen json", Spec{Syntax: Qwen, JSON: true}, `{"a":"<tool_cal"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReply(spec(t, tt.spec))
			got := true
			for _, s := range syms(tt.reply) {
				if !r.Feed(s) {
					got = false
					break
				}
			}
			got = got && r.Done()
			if got != tt.want {
				t.Errorf("reply %q: got %v, want %v", tt.reply, got, tt.want)
			}
		})
	}
}

func TestSpecCheck(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"required without tools", Spec{Required: true}, "no tool"},
		{"a name the syntax cannot write", Spec{Strict: true, Tools: []Tool{{Name: "a.b"}}}, `"a.b"`},
		{"arguments that are no object", Spec{Required: true, Tools: []Tool{{Name: "f", Args: mustCompile(t, `{"type":"string"}`)}}}, "object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Check()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// FuzzReply walks random allowed symbols of a required call.
// The walk is never stuck, and whatever is done parses as calls to the tools.
func FuzzReply(f *testing.F) {
	f.Add(uint64(1), false, false)
	f.Add(uint64(2), true, false)
	f.Add(uint64(3), true, true)
	f.Fuzz(func(t *testing.T, seed uint64, parallel, qwen bool) {
		s := Spec{Required: true, Tools: []Tool{{Name: "delegate", Args: mustCompile(t, schemas[3])}, {Name: "d", Args: mustCompile(t, schemas[8])}}}
		if qwen {
			s.Syntax = Qwen
		}
		if !parallel {
			s.MaxCalls = 1
		}
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 2))
		r, try := NewReply(&s), NewReply(&s)
		var reply []int
		for range 400 {
			checkPlain(t, r, try, rng)
			var ok []int
			for sym := range Other + 1 {
				try.Set(r)
				if try.Feed(sym) {
					ok = append(ok, sym)
				}
			}
			if len(ok) == 0 {
				if !r.Done() {
					t.Fatalf("stuck after %v", reply)
				}
				break
			}
			if r.Done() && rng.IntN(3) == 0 {
				break
			}
			// Favour structure, so that walks finish calls.
			sym := ok[rng.IntN(len(ok))]
			for _, c := range ok {
				if (c == Close || c == '}' || c == '"' || c == ':' || c == '{') && rng.IntN(2) == 0 {
					sym = c
				}
			}
			r.Feed(sym)
			reply = append(reply, sym)
		}
		if !r.Done() {
			return
		}
		// Each call is NAME{arguments} of a tool, valid against its schema.
		var bodies []string
		if qwen {
			var text []byte
			for _, sym := range reply {
				text = append(text, byte(sym))
			}
			for _, block := range strings.Split(string(text), "<tool_call>")[1:] {
				block, _, _ = strings.Cut(block, "</tool_call>")
				var call struct {
					Name      string
					Arguments json.RawMessage
				}
				if err := json.Unmarshal([]byte(block), &call); err != nil {
					t.Fatalf("call %q: %v", block, err)
				}
				bodies = append(bodies, call.Name+string(call.Arguments))
			}
		} else {
			var b strings.Builder
			for _, sym := range reply {
				switch sym {
				case Open:
					b.Reset()
				case Close:
					bodies = append(bodies, b.String())
				default:
					b.WriteByte(byte(sym))
				}
			}
		}
		if len(bodies) == 0 || !parallel && len(bodies) > 1 {
			t.Fatalf("done with %d calls: %q", len(bodies), bodies)
		}
		for _, body := range bodies {
			name, args, _ := strings.Cut(body, "{")
			switch name {
			case "delegate":
				checkDone(t, schemas[3], []byte("{"+args))
			case "d":
				checkDone(t, schemas[8], []byte("{"+args))
			default:
				t.Fatalf("call %q names no tool", body)
			}
		}
	})
}

// checkPlain fails if r claims Plain but a run of plain bytes is refused
// or leaves it otherwise.
func checkPlain(t *testing.T, r, try *Reply, rng *rand.Rand) {
	t.Helper()
	if !r.Plain() {
		return
	}
	try.Set(r)
	for range 1 + rng.IntN(8) {
		b := byte(0x20 + rng.IntN(0x5f))
		if !IsPlain(b) {
			continue
		}
		if !try.Feed(int(b)) {
			t.Fatalf("plain byte %q refused where Plain holds", b)
		}
	}
	if !try.Plain() {
		t.Fatal("a run of plain bytes left Plain")
	}
}

// FuzzPlain walks replies of free and JSON content under the Qwen syntax.
// There, content must avoid spelling <tool_call>. It checks Plain at every
// step and that the walk is never stuck.
func FuzzPlain(f *testing.F) {
	f.Add(uint64(1), uint8(0))
	f.Add(uint64(2), uint8(1))
	f.Add(uint64(3), uint8(2))
	f.Fuzz(func(t *testing.T, seed uint64, mode uint8) {
		var s Spec
		switch mode % 3 {
		case 0:
			s = Spec{Syntax: Qwen, MaxCalls: 1}
		case 1:
			s = Spec{Syntax: Qwen, JSON: true, Content: mustCompile(t, schemas[4]), NoCalls: true}
		case 2:
			s = Spec{Syntax: Qwen, Strict: true, Tools: []Tool{{Name: "delegate", Args: mustCompile(t, schemas[3])}}}
		}
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 4))
		r, try := NewReply(&s), NewReply(&s)
		alphabet := "<tool_call>\n{\"name\": \"delegate\", \"arguments\": }</tool_call>abq12,:[]"
		for range 300 {
			checkPlain(t, r, try, rng)
			var ok []int
			for sym := range Other + 1 {
				try.Set(r)
				if try.Feed(sym) {
					ok = append(ok, sym)
				}
			}
			if len(ok) == 0 {
				if !r.Done() {
					t.Fatal("stuck")
				}
				return
			}
			sym := ok[rng.IntN(len(ok))]
			if b := alphabet[rng.IntN(len(alphabet))]; slices.Contains(ok, int(b)) {
				sym = int(b)
			}
			r.Feed(sym)
		}
	})
}
