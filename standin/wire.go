package standin

import (
	"errors"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/delegatelab/delegate/openai/wire"
)

// reset empties r for reuse, keeping its slices' storage.
func reset(r *wire.ChatRequest) {
	clear(r.Messages) // drop the strings so the pool does not pin them
	clear(r.Tools)
	*r = wire.ChatRequest{Messages: r.Messages[:0], Tools: r.Tools[:0]}
}

// validate checks r against wire.ChatRequest.Validate and refuses what the stand-in does not do.
// It does not stream, and its filler obeys no parameter that constrains sampling.
func validate(r *wire.ChatRequest) error {
	if r.Stream {
		return errors.New("stream is not supported by the stand-in")
	}
	switch {
	case r.ResponseFormat != nil && r.ResponseFormat.Type != wire.FormatText:
		return errors.New("response_format is not supported by the stand-in")
	case r.ToolChoice != "" && r.ToolChoice != wire.ToolChoiceAuto:
		return errors.New("tool_choice is not supported by the stand-in")
	case r.ParallelToolCalls != nil:
		return errors.New("parallel_tool_calls is not supported by the stand-in")
	case r.FrequencyPenalty != nil || r.PresencePenalty != nil:
		return errors.New("frequency_penalty and presence_penalty are not supported by the stand-in")
	case len(r.LogitBias) > 0:
		return errors.New("logit_bias is not supported by the stand-in")
	}
	return r.Validate()
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json does.
func appendString[S ~string | ~[]byte](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))])) // at most 4 bytes: no allocation
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendHex appends v as 16 lower-case hex digits.
func appendHex(b []byte, v uint64) []byte {
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hexDigits[(v>>uint(shift))&0xf])
	}
	return b
}

func appendInt(b []byte, v int) []byte { return strconv.AppendInt(b, int64(v), 10) }

// readBody reads r to its end, appending to b.
func readBody(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
