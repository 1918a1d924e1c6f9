package wire

import (
	"strconv"
)

// DecodeResponse reads data, a whole response body, into w as
// json.Unmarshal would. It takes the plain shape most servers send: id,
// object, created, model, choices and usage, each at most once; choices of
// index, message, logprobs null and finish_reason; messages of role,
// string or null content, a name, a tool call id, and tool calls with
// string arguments.
// system_fingerprint, service_tier, refusal and reasoning_content may be
// there as strings or null; they are skipped. ok is false for anything
// else, and for anything json.Unmarshal refuses. w is then in no defined
// state, and the caller decodes data with encoding/json. It makes one pass
// over the body, where encoding/json makes two and reflects.
func DecodeResponse(data []byte, w *ChatResponse) (ok bool) {
	d := decoder{data: data}
	*w = ChatResponse{}
	var seen [6]bool
	more, ok := d.begin('{', '}')
	for ; more && ok; more, ok = d.next('}') {
		key, ok := d.key()
		if !ok {
			return false
		}
		switch string(key) {
		case "id":
			ok = d.once(&seen[0]) && d.str(&w.ID)
		case "object":
			ok = d.once(&seen[1]) && d.str(&w.Object)
		case "created":
			ok = d.once(&seen[2]) && d.int64(&w.Created)
		case "model":
			ok = d.once(&seen[3]) && d.str(&w.Model)
		case "choices":
			ok = d.once(&seen[4]) && d.choices(&w.Choices)
		case "usage":
			ok = d.once(&seen[5]) && d.usage(&w.Usage)
		case "system_fingerprint", "service_tier":
			ok = d.ignored()
		default:
			ok = false
		}
		if !ok {
			return false
		}
	}
	return ok && d.space() == len(data)
}

// decoder reads a response body. Every method reports false for input it
// does not take, and never reads past data. An object or an array is read
// by begin and next around its members:
//
//	more, ok := d.begin('{', '}')
//	for ; more && ok; more, ok = d.next('}') { ... }
type decoder struct {
	data []byte
	pos  int
}

// space skips JSON white space and returns the position after it.
func (d *decoder) space() int {
	d.pos = skipSpace(d.data, d.pos)
	return d.pos
}

// eat consumes c after white space.
func (d *decoder) eat(c byte) bool {
	if d.space() < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

// begin consumes an object's or array's opening; more reports that a
// member follows.
func (d *decoder) begin(open, close byte) (more, ok bool) {
	if !d.eat(open) {
		return false, false
	}
	if d.eat(close) {
		return false, true
	}
	return true, true
}

// next consumes what follows a member: a comma, then more, or the closing.
func (d *decoder) next(close byte) (more, ok bool) {
	if d.eat(close) {
		return false, true
	}
	return true, d.eat(',')
}

// once marks a field seen; a second time it is refused, since
// encoding/json would merge or replace it.
func (d *decoder) once(seen *bool) bool {
	if *seen {
		return false
	}
	*seen = true
	return true
}

// null consumes a null.
func (d *decoder) null() bool {
	if d.space()+4 <= len(d.data) && string(d.data[d.pos:d.pos+4]) == "null" {
		d.pos += 4
		return true
	}
	return false
}

// key reads an object key of plain ASCII and the colon after it.
func (d *decoder) key() ([]byte, bool) {
	if d.space() >= len(d.data) || d.data[d.pos] != '"' {
		return nil, false
	}
	start := d.pos + 1
	end := start
	for end < len(d.data) && d.data[end] != '"' {
		if c := d.data[end]; c == '\\' || c < 0x20 || c >= 0x80 {
			return nil, false
		}
		end++
	}
	if end == len(d.data) {
		return nil, false
	}
	key := d.data[start:end]
	d.pos = end + 1
	return key, d.eat(':')
}

// str reads a JSON string as encoding/json reads it into a string.
func (d *decoder) str(s *string) bool {
	if d.space() >= len(d.data) {
		return false
	}
	end := stringEnd(d.data, d.pos)
	if end < 0 {
		return false
	}
	v, ok := unquote(d.data[d.pos:end])
	if !ok {
		return false
	}
	*s, d.pos = v, end
	return true
}

// strOrNull reads a string, or null, which leaves s as it was.
func (d *decoder) strOrNull(s *string) bool {
	return d.null() || d.str(s)
}

// ignored reads the string or null of a field that ChatResponse has no
// place for, as encoding/json skips it. Such a field's name matches none
// of ChatResponse's, even ignoring case, which encoding/json would fill.
func (d *decoder) ignored() bool {
	var s string
	return d.strOrNull(&s)
}

// int64 reads an integer as encoding/json reads it into an int64: no
// fraction or exponent.
func (d *decoder) int64(v *int64) bool {
	start := d.space()
	end := numberEnd(d.data, start)
	if end < 0 {
		return false
	}
	n, err := strconv.ParseInt(string(d.data[start:end]), 10, 64)
	if err != nil {
		return false
	}
	*v, d.pos = n, end
	return true
}

// int reads an integer into an int.
func (d *decoder) int(v *int) bool {
	var n int64
	if !d.int64(&n) || n != int64(int(n)) {
		return false
	}
	*v = int(n)
	return true
}

func (d *decoder) choices(cs *[]Choice) bool {
	*cs = []Choice{}
	more, ok := d.begin('[', ']')
	for ; more && ok; more, ok = d.next(']') {
		*cs = append(*cs, Choice{})
		if !d.choice(&(*cs)[len(*cs)-1]) {
			return false
		}
	}
	return ok
}

func (d *decoder) choice(c *Choice) bool {
	var seen [4]bool
	more, ok := d.begin('{', '}')
	for ; more && ok; more, ok = d.next('}') {
		key, ok := d.key()
		if !ok {
			return false
		}
		switch string(key) {
		case "index":
			ok = d.once(&seen[0]) && d.int(&c.Index)
		case "message":
			ok = d.once(&seen[1]) && d.message(&c.Message)
		case "logprobs":
			ok = d.once(&seen[2]) && d.null()
		case "finish_reason":
			ok = d.once(&seen[3]) && d.strOrNull(&c.FinishReason)
		default:
			ok = false
		}
		if !ok {
			return false
		}
	}
	return ok
}

func (d *decoder) message(m *Message) bool {
	var seen [5]bool
	more, ok := d.begin('{', '}')
	for ; more && ok; more, ok = d.next('}') {
		key, ok := d.key()
		if !ok {
			return false
		}
		switch string(key) {
		case "role":
			ok = d.once(&seen[0]) && d.str(&m.Role)
		case "content":
			ok = d.once(&seen[1]) && d.content(&m.Content)
		case "tool_calls":
			ok = d.once(&seen[2]) && d.toolCalls(&m.ToolCalls)
		case "name":
			ok = d.once(&seen[3]) && d.str(&m.Name)
		case "tool_call_id":
			ok = d.once(&seen[4]) && d.str(&m.ToolCallID)
		case "refusal", "reasoning_content":
			ok = d.ignored()
		default:
			ok = false
		}
		if !ok {
			return false
		}
	}
	return ok
}

// content reads a string or null, as Content.UnmarshalJSON does.
func (d *decoder) content(c *Content) bool {
	if d.null() {
		return true
	}
	var s string
	if !d.str(&s) {
		return false
	}
	c.Value = &s
	return true
}

func (d *decoder) toolCalls(tcs *[]ToolCall) bool {
	if d.null() {
		return true
	}
	*tcs = []ToolCall{}
	more, ok := d.begin('[', ']')
	for ; more && ok; more, ok = d.next(']') {
		*tcs = append(*tcs, ToolCall{})
		if !d.toolCall(&(*tcs)[len(*tcs)-1]) {
			return false
		}
	}
	return ok
}

func (d *decoder) toolCall(tc *ToolCall) bool {
	var seen [5]bool
	more, ok := d.begin('{', '}')
	for ; more && ok; more, ok = d.next('}') {
		key, ok := d.key()
		if !ok {
			return false
		}
		switch string(key) {
		case "id":
			ok = d.once(&seen[0]) && d.str(&tc.ID)
		case "type":
			ok = d.once(&seen[1]) && d.str(&tc.Type)
		case "function":
			ok = d.once(&seen[2]) && d.function(&tc.Function, &seen[3], &seen[4])
		default:
			ok = false
		}
		if !ok {
			return false
		}
	}
	return ok
}

// function reads a tool call's function; name and args say whether those
// fields were seen.
func (d *decoder) function(f *Function, name, args *bool) bool {
	more, ok := d.begin('{', '}')
	for ; more && ok; more, ok = d.next('}') {
		key, ok := d.key()
		if !ok {
			return false
		}
		switch string(key) {
		case "name":
			ok = d.once(name) && d.str(&f.Name)
		case "arguments":
			var s string
			ok = d.once(args) && d.str(&s)
			f.Arguments = Arguments(s)
		default:
			ok = false
		}
		if !ok {
			return false
		}
	}
	return ok
}

func (d *decoder) usage(u **Usage) bool {
	if d.null() {
		return true
	}
	*u = &Usage{}
	var seen [5]bool
	more, ok := d.begin('{', '}')
	for ; more && ok; more, ok = d.next('}') {
		key, ok := d.key()
		if !ok {
			return false
		}
		switch string(key) {
		case "prompt_tokens":
			ok = d.once(&seen[0]) && d.int(&(*u).PromptTokens)
		case "completion_tokens":
			ok = d.once(&seen[1]) && d.int(&(*u).CompletionTokens)
		case "total_tokens":
			ok = d.once(&seen[2]) && d.int(&(*u).TotalTokens)
		case "prompt_tokens_details":
			ok = d.once(&seen[3]) && d.details(&(*u).PromptTokensDetails, &seen[4])
		default:
			ok = false
		}
		if !ok {
			return false
		}
	}
	return ok
}

func (d *decoder) details(p **PromptTokensDetails, cached *bool) bool {
	if d.null() {
		return true
	}
	*p = &PromptTokensDetails{}
	more, ok := d.begin('{', '}')
	for ; more && ok; more, ok = d.next('}') {
		key, ok := d.key()
		if !ok || string(key) != "cached_tokens" || !d.once(cached) || !d.int(&(*p).CachedTokens) {
			return false
		}
	}
	return ok
}
