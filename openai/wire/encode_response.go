package wire

import "strconv"

// AppendResponse appends r as JSON to dst, the bytes json.Marshal(r) gives.
// The server encodes every whole answer with it: encoding/json reflects
// over each field and scans what each MarshalJSON returned again. A
// number encoding/json refuses (NaN, an infinity) is an error, as there.
func AppendResponse(dst []byte, r *ChatResponse) ([]byte, error) {
	start := len(dst)
	b, err := appendResponse(dst, r)
	if err != nil {
		return dst[:start], err
	}
	return b, nil
}

func appendResponse(b []byte, r *ChatResponse) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"object":`...)
	b = appendString(b, r.Object)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, r.Created, 10)
	b = append(b, `,"model":`...)
	b = appendString(b, r.Model)
	b = append(b, `,"choices":`...)
	if r.Choices == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		var err error
		for i := range r.Choices {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendChoice(b, &r.Choices[i]); err != nil {
				return b, err
			}
		}
		b = append(b, ']')
	}
	if u := r.Usage; u != nil {
		b = append(b, `,"usage":{"prompt_tokens":`...)
		b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
		b = append(b, `,"completion_tokens":`...)
		b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
		b = append(b, `,"total_tokens":`...)
		b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
		if d := u.PromptTokensDetails; d != nil {
			b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
			b = strconv.AppendInt(b, int64(d.CachedTokens), 10)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if len(r.PromptTokenIDs) > 0 {
		b = append(b, `,"prompt_token_ids":[`...)
		for i, id := range r.PromptTokenIDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(id), 10)
		}
		b = append(b, ']')
	}
	if r.PolicyVersion != nil {
		b = append(b, `,"policy_version":`...)
		b = strconv.AppendInt(b, int64(*r.PolicyVersion), 10)
	}
	if e := r.Error; e != nil {
		b = append(b, `,"error":`...)
		b = appendErrorDetail(b, e)
	}
	return append(b, '}'), nil
}

func appendChoice(b []byte, c *Choice) ([]byte, error) {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(c.Index), 10)
	b = append(b, `,"message":`...)
	b = appendMessage(b, &c.Message)
	b = append(b, `,"finish_reason":`...)
	b = appendString(b, c.FinishReason)
	b = append(b, `,"logprobs":`...)
	switch {
	case c.Logprobs == nil:
		b = append(b, "null"...)
	case c.Logprobs.Content == nil:
		b = append(b, `{"content":null}`...)
	default:
		b = append(b, `{"content":[`...)
		var err error
		for i := range c.Logprobs.Content {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendLogprob(b, &c.Logprobs.Content[i]); err != nil {
				return b, err
			}
		}
		b = append(b, `]}`...)
	}
	return append(b, '}'), nil
}

func appendLogprob(b []byte, lp *Logprob) ([]byte, error) {
	b = append(b, `{"token":`...)
	b = appendString(b, lp.Token)
	b = append(b, `,"logprob":`...)
	var err error
	if b, err = appendFloat(b, lp.Logprob); err != nil {
		return b, err
	}
	b = append(b, `,"bytes":`...)
	if lp.Bytes == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, v := range lp.Bytes {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(v), 10)
		}
		b = append(b, ']')
	}
	if len(lp.TopLogprobs) > 0 {
		b = append(b, `,"top_logprobs":[`...)
		for i := range lp.TopLogprobs {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendLogprob(b, &lp.TopLogprobs[i]); err != nil {
				return b, err
			}
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// appendErrorDetail appends e, its empty param and code as null.
func appendErrorDetail(b []byte, e *ErrorDetail) []byte {
	b = append(b, `{"message":`...)
	b = appendString(b, e.Message)
	b = append(b, `,"type":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"param":`...)
	b = appendNullable(b, e.Param)
	b = append(b, `,"code":`...)
	b = appendNullable(b, e.Code)
	return append(b, '}')
}

// appendNullable appends n as Nullable.MarshalJSON writes it.
func appendNullable(b []byte, n Nullable) []byte {
	if n == "" {
		return append(b, "null"...)
	}
	return appendString(b, string(n))
}
