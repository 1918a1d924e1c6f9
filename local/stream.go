package local

import (
	"context"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/delegatelab/delegate/nn/infer"
)

// generate runs reqs on the engine. With emit set, it hands out each
// request's content while the engine samples it (see ChatStream).
func generate(ctx context.Context, e *infer.Engine, cd codec, reqs []infer.GenRequest, stops []string, emit func(int, string)) ([]infer.GenResult, error) {
	if emit == nil {
		return e.GenerateAll(ctx, reqs)
	}
	// The engine's scheduler appends tokens here and signals.
	// This goroutine decodes and emits them, so emit never runs on the
	// scheduler nor slows it.
	var mu sync.Mutex
	fresh := make([][]int, len(reqs))
	signal := make(chan struct{}, 1)
	for i := range reqs {
		reqs[i].OnToken = func(tok int) {
			mu.Lock()
			fresh[i] = append(fresh[i], tok)
			mu.Unlock()
			select {
			case signal <- struct{}{}:
			default: // a signal is pending already
			}
		}
	}
	type outcome struct {
		res []infer.GenResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := e.GenerateAll(ctx, reqs)
		done <- outcome{res, err}
	}()
	streams := make([]contentStream, len(reqs))
	for i := range streams {
		streams[i].stops, streams[i].codec = stops, cd
		if open := cd.callStart(); open != "" {
			streams[i].stops = append(slices.Clone(stops), open)
			streams[i].call = open
		}
	}
	batch := make([][]int, len(reqs))
	drain := func() {
		mu.Lock()
		for i := range fresh {
			batch[i] = append(batch[i][:0], fresh[i]...)
			fresh[i] = fresh[i][:0]
		}
		mu.Unlock()
		for i, toks := range batch {
			if text := streams[i].add(toks); text != "" {
				emit(i, text)
			}
		}
	}
	for {
		select {
		case <-signal:
			drain()
		case o := <-done:
			drain() // every token was appended before GenerateAll returned
			return o.res, o.err
		}
	}
}

// contentStream decodes one generation's tokens into the content
// ParseAssistant will find, as far as it is certain.
type contentStream struct {
	codec   codec
	call    string // text that opens a tool call ("" when calls are tokens)
	stops   []string
	pending strings.Builder // decoded, not handed out yet
	closed  bool            // a tool call or the end of the turn was met
}

// add decodes toks and returns the text now certain to be content.
func (c *contentStream) add(toks []int) string {
	for _, id := range toks {
		if c.closed {
			break
		}
		s, closes := c.codec.token(id)
		if closes {
			c.closed = true
			break
		}
		c.pending.WriteString(s)
	}
	text := c.pending.String()
	if c.call != "" {
		if i := strings.Index(text, c.call); i >= 0 {
			// Content ends where a call opens; the parser gives the rest.
			text, c.closed = text[:i], true
		}
	}
	keep := heldBack(text, c.stops)
	out := text[:len(text)-keep]
	c.pending.Reset()
	c.pending.WriteString(text[len(text)-keep:])
	return out
}

// heldBack returns how many bytes at the end of text must wait.
// Those are the longest suffix that is a proper prefix of a stop sequence or
// a whole one, and an incomplete UTF-8 character. The generation may end on
// a stop sequence, which is then cut.
func heldBack(text string, stops []string) int {
	keep := 0
	for _, s := range stops {
		for n := min(len(s), len(text)); n > keep; n-- {
			if strings.HasSuffix(text, s[:n]) {
				keep = n
				break
			}
		}
	}
	// An incomplete character at the end: at most 3 bytes of a rune
	// whose first byte announces more.
	for n := 1; n <= 3 && n <= len(text)-keep; n++ {
		b := text[len(text)-keep-n]
		if b < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(b) {
			if !utf8.FullRuneInString(text[len(text)-keep-n : len(text)-keep]) {
				keep += n
			}
			break
		}
	}
	return keep
}
