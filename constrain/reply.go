package constrain

import "fmt"

// A reply is read as symbols: a byte 0..255, or one of the markers below.
// The markers stand for a chat template's control tokens.
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

// Syntax is how a chat template writes a tool call.
// A call is Open Prefix NAME Mid ARGUMENTS Suffix Close, and calls are
// separated by Sep. An empty Open or Close is the marker symbol of that
// name; a Close marker goes with an empty Suffix.
type Syntax struct {
	Open, Prefix, Mid, Suffix, Close, Sep string
}

// Qwen is the Qwen templates' call syntax, written as they write it:
// <tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>, calls
// one per line. Content never spells <tool_call>, which would open a call.
var Qwen = Syntax{Open: "<tool_call>", Prefix: "\n{\"name\": \"", Mid: "\", \"arguments\": ", Suffix: "}\n", Close: "</tool_call>", Sep: "\n"}

// Spec is what a reply may hold: content, then tool calls. The zero
// Syntax is the builtin template's compact calls, Open NAME{arguments}
// Close.
type Spec struct {
	Syntax Syntax
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

// Check reports a Spec that cannot be met. Such a Spec requires calls, or is
// strict, with no tool to call. Or it has a tool whose name the compact
// syntax cannot write, or whose schema allows no object. Check restricts
// each tool's schema to objects with ObjectSchema, since a call's arguments
// are one.
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

// compactName is the chat template's rule for a call's name.
// A name is 1 to 64 letters, digits, _ and -, so the arguments' { ends it.
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
	inLit                   // a fixed text of the call syntax
	inName                  // the tool's name (and Mid)
	inArgs                  // the arguments of a strict call
	inFreeCall              // a call that is not checked
	afterCall               // after a call's Close
)

// What follows a fixed text.
const (
	thenOpen  uint8 = iota // the text was Open (or Sep and Open): a call opens
	thenName               // the text was Prefix: the name follows
	thenClose              // the text was Suffix and Close: the call is over
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
	names   []string // each tool's name followed by Mid
	lit     string   // the fixed text being read, from litPos
	litPos  int
	then    uint8
	openAt  int // bytes of a textual Open matched at the end of content
	closeAt int // bytes of a textual Close matched at the end of a free call
}

// NewReply returns a checker of replies to spec. spec.Check must have
// accepted spec, and spec must not change while the checker is in use.
func NewReply(spec *Spec) *Reply {
	r := &Reply{spec: spec}
	if spec.JSON {
		r.content = NewJSON(spec.Content)
	}
	for _, t := range spec.Tools {
		r.names = append(r.names, t.Name+spec.Syntax.Mid)
	}
	if spec.Required {
		r.expect(spec.Syntax.Open, thenOpen)
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

// Plain reports whether the reply now takes any run of plain bytes unchanged.
// Unchanged means the same state but for its length. That holds inside a
// JSON string, in free content, or in an unchecked call. A sampler may then
// allow a token of plain bytes, as IsPlain defines them, without feeding it.
func (r *Reply) Plain() bool {
	switch r.phase {
	case inContent:
		return r.openAt == 0 && (!r.spec.JSON || r.content.plainString())
	case inArgs:
		return r.args.plainString()
	case inFreeCall:
		return r.closeAt == 0
	}
	return false
}

// IsPlain reports whether b is printable ASCII other than the quote, backslash and <.
// The < is excluded because it starts a textual Open or Close.
func IsPlain(b byte) bool { return b >= 0x20 && b < 0x7f && b != '"' && b != '\\' && b != '<' }

// expect makes the reply continue with text, or with the Open marker when
// text is empty and then is thenOpen.
func (r *Reply) expect(text string, then uint8) {
	r.phase, r.lit, r.litPos, r.then = inLit, text, 0, then
}

// callsLeft reports whether another call may open.
func (r *Reply) callsLeft() bool {
	s := r.spec
	return !s.NoCalls && (s.MaxCalls == 0 || r.calls < s.MaxCalls)
}

func (r *Reply) checked() bool { return r.spec.Required || r.spec.Strict }

// Feed reports whether sym extends the reply, and takes it if it does. A
// refused symbol may leave r changed: callers try symbols on a copy.
func (r *Reply) Feed(sym int) bool {
	switch r.phase {
	case inContent:
		return r.feedContent(sym)
	case inLit:
		return r.feedLit(sym)
	case inName:
		return r.feedName(sym)
	case inArgs:
		return r.feedArgs(sym)
	case inFreeCall:
		return r.feedFreeCall(sym)
	case afterCall:
		return r.feedAfterCall(sym)
	}
	return false
}

// feedLit reads the next symbol of an expected literal or of the Open
// marker. Once that is complete, it moves on to what follows it.
func (r *Reply) feedLit(sym int) bool {
	if r.lit == "" { // the Open marker
		return sym == Open && r.open()
	}
	if sym >= 256 || byte(sym) != r.lit[r.litPos] {
		return false
	}
	if r.litPos++; r.litPos < len(r.lit) {
		return true
	}
	switch r.then {
	case thenOpen:
		return r.open()
	case thenName:
		r.startName()
		return true
	}
	return r.close()
}

// feedName reads a byte of a checked call's tool name; the { after a
// whole name starts its arguments.
func (r *Reply) feedName(sym int) bool {
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
		r.args = NewJSON(r.spec.Tools[r.name.match()].Args)
		r.phase = inArgs
		return r.args.Feed('{')
	}
	return false
}

// feedArgs reads a byte of a checked call's arguments, then white space
// or the call's suffix and Close.
func (r *Reply) feedArgs(sym int) bool {
	if !r.args.Done() {
		return sym < 256 && r.args.Feed(byte(sym))
	}
	syn := &r.spec.Syntax
	end := syn.Suffix + syn.Close
	switch {
	case end == "":
		return sym == Close && r.close()
	case sym < 256 && byte(sym) == end[0]:
		r.expect(end, thenClose)
		return r.Feed(sym)
	}
	return sym < 256 && r.args.Feed(byte(sym)) // trailing white space
}

// feedFreeCall reads a symbol of an unchecked call, up to its Close.
func (r *Reply) feedFreeCall(sym int) bool {
	syn := &r.spec.Syntax
	if syn.Close == "" {
		if sym == Close {
			return r.close()
		}
		return sym != Open && sym != Other
	}
	if sym >= 256 {
		return false
	}
	if r.closeAt = advance(syn.Close, r.closeAt, byte(sym)); r.closeAt == len(syn.Close) {
		return r.close()
	}
	return true
}

// feedAfterCall reads the symbol after a call. After a checked call only
// another call may follow; after an unchecked one, content goes on.
func (r *Reply) feedAfterCall(sym int) bool {
	if r.checked() {
		// A checked call ends the reply, or another follows.
		if !r.callsLeft() {
			return false
		}
		syn := &r.spec.Syntax
		r.expect(syn.Sep+syn.Open, thenOpen)
		if syn.Sep+syn.Open == "" {
			return sym == Open && r.open()
		}
		return r.Feed(sym)
	}
	r.phase = inContent
	return r.Feed(sym)
}

// feedContent reads a content symbol: free text, or JSON. A textual Open
// spelled in content opens a call where calls are allowed (in JSON
// content, only before the value starts) and is refused elsewhere.
func (r *Reply) feedContent(sym int) bool {
	s := r.spec
	open := s.Syntax.Open
	canOpen := r.callsLeft() && (!s.JSON || !r.content.Started())
	switch {
	case sym == Open:
		return open == "" && canOpen && r.open()
	case sym == Close:
		return false
	case sym == Other:
		return !s.JSON
	case open == "":
		return !s.JSON || r.content.Feed(byte(sym))
	}
	b := byte(sym)
	k := advance(open, r.openAt, b)
	if k == len(open) {
		r.openAt = 0
		return canOpen && r.open()
	}
	if s.JSON && canOpen && (r.openAt > 0 || k > 0) {
		// Before the value: on the way to Open, which no JSON value
		// starts like.
		if k != r.openAt+1 {
			return false
		}
		r.openAt = k
		return true
	}
	r.openAt = k
	return !s.JSON || r.content.Feed(b)
}

// open starts a call, its Open read.
func (r *Reply) open() bool {
	if !r.callsLeft() {
		return false
	}
	r.openAt = 0
	if !r.checked() {
		r.phase, r.closeAt = inFreeCall, 0
		return true
	}
	if p := r.spec.Syntax.Prefix; p != "" {
		r.expect(p, thenName)
		return true
	}
	r.startName()
	return true
}

func (r *Reply) startName() {
	r.phase = inName
	r.name = lexer{kind: lexLiteral, cands: r.names, alive: uint64(1)<<len(r.names) - 1}
}

func (r *Reply) close() bool {
	r.calls++
	r.phase = afterCall
	return true
}

// advance is how much of pattern ends the text after b, given k before.
// It is the classic string-matching automaton. Its fallbacks are found by
// direct comparison, since patterns are short.
func advance(pattern string, k int, b byte) int {
	for {
		if pattern[k] == b {
			return k + 1
		}
		if k == 0 {
			return 0
		}
		k = border(pattern[:k])
	}
}

// border is the length of the longest proper prefix of p that is also a
// suffix of it.
func border(p string) int {
	for l := len(p) - 1; l > 0; l-- {
		if p[:l] == p[len(p)-l:] {
			return l
		}
	}
	return 0
}
