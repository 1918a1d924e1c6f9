package wire

import "strconv"

// DecodeRequest reads data, a whole request body, into r as json.Unmarshal
// would. It takes the plain shape agents send: model and messages, the
// sampling numbers and the boolean switches, each at most once; messages
// as DecodeResponse takes them, with a name and a tool call id. ok is
// false for anything else (tools, tool_choice, stop, logit_bias, content
// parts, keys in other cases), and for anything json.Unmarshal refuses.
// r is then in no defined state, and the caller decodes data with
// encoding/json, which reports what is wrong. PlainKey names the
// top-level keys it reads.
func DecodeRequest(data []byte, r *ChatRequest) (ok bool) {
	d := decoder{data: data}
	*r = ChatRequest{}
	var seen [15]bool
	more, ok := d.begin('{', '}')
	for ; more && ok; more, ok = d.next('}') {
		key, ok := d.key()
		if !ok {
			return false
		}
		switch string(key) {
		case "model":
			ok = d.once(&seen[0]) && d.str(&r.Model)
		case "messages":
			ok = d.once(&seen[1]) && d.messages(&r.Messages)
		case "temperature":
			ok = d.once(&seen[2]) && d.floatOrNull(&r.Temperature)
		case "top_p":
			ok = d.once(&seen[3]) && d.floatOrNull(&r.TopP)
		case "frequency_penalty":
			ok = d.once(&seen[4]) && d.floatOrNull(&r.FrequencyPenalty)
		case "presence_penalty":
			ok = d.once(&seen[5]) && d.floatOrNull(&r.PresencePenalty)
		case "max_tokens":
			ok = d.once(&seen[6]) && d.int(&r.MaxTokens)
		case "max_completion_tokens":
			ok = d.once(&seen[7]) && d.int(&r.MaxCompletionTokens)
		case "n":
			ok = d.once(&seen[8]) && d.int(&r.N)
		case "top_logprobs":
			ok = d.once(&seen[9]) && d.int(&r.TopLogprobs)
		case "seed":
			ok = d.once(&seen[10]) && d.seed(&r.Seed)
		case "logprobs":
			ok = d.once(&seen[11]) && d.bool(&r.Logprobs)
		case "stream":
			ok = d.once(&seen[12]) && d.bool(&r.Stream)
		case "return_tokens_as_token_ids":
			ok = d.once(&seen[13]) && d.bool(&r.ReturnTokensAsTokenIDs)
		case "return_token_ids":
			ok = d.once(&seen[14]) && d.bool(&r.ReturnTokenIDs)
		default:
			ok = false
		}
		if !ok {
			return false
		}
	}
	return ok && d.space() == len(data)
}

// messages reads a list of messages; null is left to encoding/json.
func (d *decoder) messages(ms *[]Message) bool {
	*ms = []Message{}
	more, ok := d.begin('[', ']')
	for ; more && ok; more, ok = d.next(']') {
		*ms = append(*ms, Message{})
		if !d.message(&(*ms)[len(*ms)-1]) {
			return false
		}
	}
	return ok
}

// floatOrNull reads a number as encoding/json reads it into a *float64,
// or null, which leaves v nil.
func (d *decoder) floatOrNull(v **float64) bool {
	if d.null() {
		return true
	}
	start := d.space()
	end := numberEnd(d.data, start)
	if end < 0 {
		return false
	}
	f, err := strconv.ParseFloat(string(d.data[start:end]), 64)
	if err != nil {
		return false
	}
	*v, d.pos = &f, end
	return true
}

// seed reads an integer into a *int64, or null, which leaves v nil.
func (d *decoder) seed(v **int64) bool {
	if d.null() {
		return true
	}
	var n int64
	if !d.int64(&n) {
		return false
	}
	*v = &n
	return true
}

// bool reads true or false.
func (d *decoder) bool(v *bool) bool {
	rest := d.data[d.space():]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		*v, d.pos = true, d.pos+4
	case len(rest) >= 5 && string(rest[:5]) == "false":
		*v, d.pos = false, d.pos+5
	default:
		return false
	}
	return true
}

// PlainKey reports whether DecodeRequest reads the top-level key key. A
// server that walks a body's keys before it decodes the body need try
// DecodeRequest only when each is one of these.
func PlainKey(key string) bool {
	switch key {
	case "model", "messages", "temperature", "top_p", "frequency_penalty", "presence_penalty",
		"max_tokens", "max_completion_tokens", "n", "top_logprobs", "seed",
		"logprobs", "stream", "return_tokens_as_token_ids", "return_token_ids":
		return true
	}
	return false
}
