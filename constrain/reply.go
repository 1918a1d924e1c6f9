package constrain

import "fmt"

// A reply is read as symbols: a byte (0..255), or one of the markers
// below, which stand for a chat template's control tokens.
const (
	Open  = 256 + iota // opens a tool call (<|tool_call|>)
	Close              // closes it (<|end_tool_call|>)
	Other              // any other control token inside content
)

// Tool is a function a reply may call, with the schema of its arguments
// (nil: any object).
type Tool struct {
	Name string
	Args *Schema
}

// Spec is what a reply may hold: content, then tool calls written as
// Open NAME{arguments} Close, the template's compact call syntax.
type Spec struct {
	// JSON makes the content one JSON value valid against Content.
	JSON    bool
	Content *Schema
	// Required makes the reply tool calls only, from its first symbol.
	Required bool
	// NoCalls forbids Open.
	NoCalls bool
	// MaxCalls bounds the calls; 0: no bound.
	MaxCalls int
	// Strict makes a call's text NAME{arguments} for one of Tools, with
	// arguments valid against its schema. Required implies it.
	Strict bool
	Tools  []Tool
}

// Check reports a Spec that cannot be met: calls required or strict with
// no tool to call, or a tool whose name the compact syntax cannot write or
// whose schema allows no object. It restricts each tool's schema to
// objects (ObjectSchema), as a call's arguments are one.
func (s *Spec) Check() error {
	if !s.Required && !s.Strict {
		return nil
	}
	if len(s.Tools) == 0 {
		return fmt.Errorf("a tool call is required but no tool is declared")
	}
	if s.NoCalls {
		return fmt.Errorf("a tool call is required but calls are forbidden")
	}
	if len(s.Tools) > maxProps {
		return fmt.Errorf("%d tools; at most %d can be enforced", len(s.Tools), maxProps)
	}
	for i, t := range s.Tools {
		if !compactName(t.Name) {
			return fmt.Errorf("tool %q: only names of 1 to 64 letters, digits, _ and - can be enforced", t.Name)
		}
		args, err := ObjectSchema(t.Args)
		if err != nil {
			return fmt.Errorf("tool %q: %w", t.Name, err)
		}
		s.Tools[i].Args = args
	}
	return nil
}

// compactName is the chat template's rule for a call's name: 1 to 64
// letters, digits, _ and -, so that the arguments' { ends it.
func compactName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Phases of a Reply.
const (
	inContent  uint8 = iota // content, before any call
	wantOpen                // a call must open: Required, before the first
	inName                  // after Open: the tool's name
	inArgs                  // the arguments of a strict call
	inFreeCall              // a call that is not checked
	afterCall               // after Close
)

// Reply checks a reply symbol by symbol against a Spec. Every prefix it
// accepts can be completed. Like JSON it is a value, copied with Set.
type Reply struct {
	spec    *Spec
	phase   uint8
	calls   int
	content JSON // when spec.JSON
	args    JSON
	name    lexer
	names   []string
	tool    int
}

// NewReply returns a checker of replies to spec, which must not change
// while it is in use; spec.Check must have accepted it.
func NewReply(spec *Spec) *Reply {
	r := &Reply{spec: spec}
	if spec.Required {
		r.phase = wantOpen
	}
	if spec.JSON {
		r.content = NewJSON(spec.Content)
	}
	for _, t := range spec.Tools {
		r.names = append(r.names, t.Name)
	}
	return r
}

// Set makes r a copy of src, reusing r's storage.
func (r *Reply) Set(src *Reply) {
	content, args := r.content, r.args
	*r = *src
	r.content, r.args = content, args
	r.content.Set(&src.content)
	r.args.Set(&src.args)
}

// Done reports whether the reply may end here.
func (r *Reply) Done() bool {
	switch r.phase {
	case inContent:
		return !r.spec.JSON || r.content.Done()
	case inFreeCall, afterCall:
		return true
	}
	return false
}

// Feed reports whether sym extends the reply, and takes it if it does. A
// refused symbol may leave r changed: callers try symbols on a copy.
func (r *Reply) Feed(sym int) bool {
	switch r.phase {
	case inContent:
		switch {
		case sym == Open:
			return r.open()
		case sym == Close:
			return false
		case sym == Other:
			return !r.spec.JSON
		case r.spec.JSON:
			return r.content.Feed(byte(sym))
		}
		return true
	case wantOpen:
		return sym == Open && r.open()
	case inName:
		if sym >= 256 {
			return false
		}
		switch r.name.feed(byte(sym)) {
		case fedMore:
			return true
		case fedBefore:
			if sym != '{' {
				return false
			}
			r.tool = r.name.match()
			r.args = NewJSON(r.spec.Tools[r.tool].Args)
			r.phase = inArgs
			return r.args.Feed('{')
		}
		return false
	case inArgs:
		if sym == Close {
			if !r.args.Done() {
				return false
			}
			return r.close()
		}
		return sym < 256 && r.args.Feed(byte(sym))
	case inFreeCall:
		if sym == Close {
			return r.close()
		}
		return sym != Open && sym != Other
	case afterCall:
		if sym == Open {
			return r.open()
		}
		if r.spec.Required || r.spec.Strict {
			return false // a checked call ends the reply, or another follows
		}
		r.phase = inContent
		return r.Feed(sym)
	}
	return false
}

// open takes an Open: allowed while calls are, and, in JSON content, only
// before the content starts.
func (r *Reply) open() bool {
	s := r.spec
	if s.NoCalls || s.MaxCalls > 0 && r.calls >= s.MaxCalls {
		return false
	}
	if r.phase == inContent && s.JSON && r.content.Started() {
		return false
	}
	if s.Required || s.Strict {
		r.phase = inName
		r.name = lexer{kind: lexLiteral, cands: r.names, alive: uint64(1)<<len(r.names) - 1}
		return true
	}
	r.phase = inFreeCall
	return true
}

func (r *Reply) close() bool {
	r.calls++
	r.phase = afterCall
	return true
}
