package local

import (
	"errors"
	"fmt"
	"slices"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/constrain"
	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/tokenizer"
)

// This file enforces a request's sampling constraints. The penalties and
// logit bias go to the sampler as they are. tool_choice,
// parallel_tool_calls, strict tool calls and response_format become a
// constrain.Reply. At every step it masks the tokens that would leave what
// the request allows.

// vocabSyms are the tokens of a vocabulary as constrain's symbols, made
// once per model on the first constrained request.
type vocabSyms struct {
	syms  [][]int // nil: never allowed under a constraint
	stop  []bool  // ends the turn: allowed where the reply may end
	plain []bool  // every symbol is a plain byte (constrain.IsPlain)
}

// markPlain sets v.plain from v.syms.
func (v *vocabSyms) markPlain() *vocabSyms {
	v.plain = make([]bool, len(v.syms))
	for id, syms := range v.syms {
		v.plain[id] = len(syms) > 0 && !slices.ContainsFunc(syms, func(s int) bool { return s >= 256 || !constrain.IsPlain(byte(s)) })
	}
	return v
}

// builtinSyms reads package tokenizer's vocabulary, padded to the model's.
// Bytes are themselves, the call tokens Open and Close, and the ends of a
// turn stops. Role tokens, which end a message's parse without ending the
// generation, are refused; other special tokens are Other.
func builtinSyms(vocab int) *vocabSyms {
	v := &vocabSyms{syms: make([][]int, vocab), stop: make([]bool, vocab)}
	for id := range vocab {
		switch {
		case tokenizer.IsByte(id):
			v.syms[id] = []int{id - tokenizer.ByteOffset}
		case id == tokenizer.ToolCall:
			v.syms[id] = []int{constrain.Open}
		case id == tokenizer.EndToolCall:
			v.syms[id] = []int{constrain.Close}
		case id == tokenizer.End || id == tokenizer.EOS:
			v.stop[id] = true
		case id == tokenizer.System || id == tokenizer.User || id == tokenizer.Assistant || id == tokenizer.Tool || id == tokenizer.Tools:
		default:
			v.syms[id] = []int{constrain.Other}
		}
	}
	return v
}

// hfSyms reads a Hugging Face vocabulary: a token is the bytes it decodes to.
// Special tokens other than the stops, and ids past the tokenizer's, are
// refused.
func (c *hfCodec) syms(vocab int) *vocabSyms {
	v := &vocabSyms{syms: make([][]int, vocab), stop: make([]bool, vocab)}
	for id := range min(vocab, c.t.VocabSize()) {
		if slices.Contains(c.stopID, id) {
			v.stop[id] = true
			continue
		}
		if c.t.Special(id) {
			continue
		}
		s, err := c.t.Decode([]int{id})
		if err != nil || s == "" {
			continue
		}
		syms := make([]int, len(s))
		for i := 0; i < len(s); i++ {
			syms[i] = int(s[i])
		}
		v.syms[id] = syms
	}
	return v
}

// replyConstraint is an infer.Constraint over one choice's reply. It
// remembers, until the next Accept, which first symbols the reply takes,
// so that most tokens a state refuses cost one lookup.
type replyConstraint struct {
	r, try *constrain.Reply
	v      *vocabSyms
	first  [constrain.Other + 1]int8 // 0 unknown, 1 taken, -1 refused
	plain  int8                      // whether r.Plain(): 0 unknown, 1, -1
}

func (c *replyConstraint) Allows(id int) bool {
	if id >= len(c.v.syms) {
		return false
	}
	if c.v.stop[id] {
		return c.r.Done()
	}
	syms := c.v.syms[id]
	if syms == nil {
		return false
	}
	if c.v.plain[id] {
		if c.plain == 0 {
			c.plain = -1
			if c.r.Plain() {
				c.plain = 1
			}
		}
		if c.plain > 0 {
			return true
		}
	}
	f := &c.first[syms[0]]
	if *f == 0 {
		c.try.Set(c.r)
		*f = -1
		if c.try.Feed(syms[0]) {
			*f = 1
		}
	}
	if *f < 0 || len(syms) == 1 {
		return *f > 0
	}
	c.try.Set(c.r)
	for _, s := range syms {
		if !c.try.Feed(s) {
			return false
		}
	}
	return true
}

func (c *replyConstraint) Accept(id int) {
	c.first, c.plain = [constrain.Other + 1]int8{}, 0
	if id >= len(c.v.syms) {
		return
	}
	for _, s := range c.v.syms[id] {
		c.r.Feed(s)
	}
}

// refuse is the 400 a local model answers a request it cannot serve as
// asked, naming the parameter.
func (m *Model) refuse(param, format string, args ...any) *delegate.APIError {
	return &delegate.APIError{Status: 400, Type: "invalid_request_error", Model: m.cfg.Name, Attempts: 1, Param: param,
		Message: param + ": " + fmt.Sprintf(format, args...)}
}

// sampling sets gen's penalties and logit bias from req.
// It returns the tools to render and, when req constrains the reply, a
// function making one constraint per choice; else that function is nil.
func (m *Model) sampling(req *delegate.Request, gen *infer.GenRequest) ([]delegate.Tool, func() infer.Constraint, error) {
	for _, p := range []struct {
		name string
		v    *float64
		dst  *float64
	}{{"frequency_penalty", req.FrequencyPenalty, &gen.FrequencyPenalty}, {"presence_penalty", req.PresencePenalty, &gen.PresencePenalty}} {
		if p.v == nil {
			continue
		}
		if !(*p.v >= -2 && *p.v <= 2) {
			return nil, nil, m.refuse(p.name, "%v is outside -2..2", *p.v)
		}
		*p.dst = *p.v
	}
	vocab := m.engine.Vocab()
	for id, b := range req.LogitBias {
		if id < 0 || id >= vocab {
			return nil, nil, m.refuse("logit_bias", "token %d is outside this model's vocabulary of %d", id, vocab)
		}
		if !(b >= -100 && b <= 100) {
			return nil, nil, m.refuse("logit_bias", "bias %v of token %d is outside -100..100", b, id)
		}
		gen.LogitBias = append(gen.LogitBias, infer.TokenBias{Token: id, Bias: float32(b)})
	}
	slices.SortFunc(gen.LogitBias, func(a, b infer.TokenBias) int { return a.Token - b.Token })

	spec, tools, err := m.spec(req)
	if err != nil || spec == nil {
		return tools, nil, err
	}
	v := m.vocabSyms()
	return tools, func() infer.Constraint {
		return &replyConstraint{r: constrain.NewReply(spec), try: constrain.NewReply(spec), v: v}
	}, nil
}

// spec is what req allows the reply to be, or nil when it allows anything.
// It also returns the tools to render, none under tool_choice "none".
func (m *Model) spec(req *delegate.Request) (*constrain.Spec, []delegate.Tool, error) {
	spec := &constrain.Spec{}
	active := false
	tools := req.Tools
	calls := "" // the parameter that constrains calls, for a refusal
	switch tc := req.ToolChoice; tc {
	case "", "auto":
		if req.StrictToolCalls && len(tools) > 0 {
			spec.Strict, spec.Tools, active, calls = true, nil, true, "tools"
		}
	case "none":
		tools, spec.NoCalls, active, calls = nil, true, true, "tool_choice"
	case "required":
		spec.Required, active, calls = true, true, "tool_choice"
	default:
		i := slices.IndexFunc(tools, func(t delegate.Tool) bool { return t.Name == tc })
		if i < 0 {
			return nil, nil, m.refuse("tool_choice", "function %q is not among the tools", tc)
		}
		spec.Required, active, calls = true, true, "tool_choice"
		spec.Tools = []constrain.Tool{{Name: tc}}
	}
	if len(tools) == 0 {
		spec.NoCalls = true // nothing to call: the model sees no tools
	}
	if p := req.ParallelToolCalls; p != nil && !*p && len(tools) > 0 {
		spec.MaxCalls, active = 1, true
		if calls == "" {
			calls = "parallel_tool_calls"
		}
	}
	if spec.Required || spec.Strict {
		if spec.Tools == nil {
			for _, t := range tools {
				spec.Tools = append(spec.Tools, constrain.Tool{Name: t.Name})
			}
		}
		for i := range spec.Tools {
			j := slices.IndexFunc(tools, func(t delegate.Tool) bool { return t.Name == spec.Tools[i].Name })
			s, err := constrain.Compile(tools[j].Parameters)
			if err != nil {
				return nil, nil, m.refuseSchema(fmt.Sprintf("tools[%d].function.parameters", j), err)
			}
			spec.Tools[i].Args = s
		}
		if err := spec.Check(); err != nil {
			return nil, nil, m.refuse(calls, "%v", err)
		}
	}
	if f := req.ResponseFormat; f != nil {
		switch f.Type {
		case "", delegate.FormatText:
		case delegate.FormatJSONObject:
			spec.JSON, active = true, true
			spec.Content, _ = constrain.ObjectSchema(nil)
		case delegate.FormatJSONSchema:
			s, err := constrain.Compile(f.Schema)
			if err != nil {
				return nil, nil, m.refuseSchema("response_format.json_schema.schema", err)
			}
			spec.JSON, spec.Content, active = true, s, true
		default:
			return nil, nil, m.refuse("response_format.type", "%q is not text, json_object or json_schema", f.Type)
		}
	}
	if !active {
		return nil, tools, nil
	}
	if c, ok := m.codec.(*hfCodec); ok && c.callStart() == qwenCallOpen {
		spec.Syntax = constrain.Qwen
	}
	// Other templates either are the builtin one, or have no calls
	// (Llama 3: tools are refused when the prompt is rendered).
	return spec, tools, nil
}

// refuseSchema is the 400 of a schema that uses what constrain cannot
// enforce, naming the keyword.
func (m *Model) refuseSchema(param string, err error) error {
	var se *constrain.SchemaError
	if errors.As(err, &se) {
		return m.refuse(param, "%s: %s", se.Keyword, se.Message)
	}
	return m.refuse(param, "%v", err)
}

// vocabSyms returns the model's vocabulary as symbols, made on first use.
func (m *Model) vocabSyms() *vocabSyms {
	m.syms.once.Do(func() {
		vocab := m.engine.Vocab()
		switch c := m.codec.(type) {
		case *hfCodec:
			m.syms.v = c.syms(vocab).markPlain()
		default:
			m.syms.v = builtinSyms(vocab).markPlain()
		}
	})
	return m.syms.v
}
