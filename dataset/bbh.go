package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/delegatelab/delegate"
)

// lineAt is the 1-based line of byte offset off in data.
func lineAt(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// bbh reads {"examples":[{"input","target"}, ...]} with a streaming
// decoder so that each bad example is reported with its line.
func (l *loader) bbh(data []byte) ([]delegate.Task, error) {
	task := base(l.file)
	dec := json.NewDecoder(bytes.NewReader(data))
	// failAt reports a broken file structure at line (0: where the decoder
	// stopped).
	failAt := func(line int, err error) ([]delegate.Task, error) {
		if line == 0 {
			line = lineAt(data, dec.InputOffset())
			var se *json.SyntaxError
			if errors.As(err, &se) {
				line = lineAt(data, se.Offset)
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("truncated JSON")
		}
		// The file's structure is broken: no later record can be trusted,
		// so this is an error even with SkipBad.
		return nil, &RecordError{File: l.file, Line: line, Reason: err.Error()}
	}
	fail := func(err error) ([]delegate.Task, error) { return failAt(0, err) }
	expect := func(want json.Delim) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); !ok || d != want {
			return fmt.Errorf("got %v, want %q", tok, want)
		}
		return nil
	}
	if err := expect('{'); err != nil {
		return fail(err)
	}
	var out []delegate.Task
	found := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		if key, _ := tok.(string); key != "examples" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fail(err)
			}
			continue
		}
		found = true
		if err := expect('['); err != nil {
			return fail(fmt.Errorf(`"examples": %w`, err))
		}
		for n := 1; dec.More(); n++ {
			// InputOffset is at the separator before the element; the
			// element starts after blanks and a comma.
			off := dec.InputOffset()
			for off < int64(len(data)) && strings.ContainsRune(" \t\r\n,", rune(data[off])) {
				off++
			}
			line := lineAt(data, off)
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return failAt(line, fmt.Errorf("example %d: %w", n, err))
			}
			if len(raw) > l.maxRecord() {
				if err := l.tooLarge(line, fmt.Sprintf("example %d", n), len(raw)); err != nil {
					return nil, err
				}
				continue
			}
			obj, why := object(raw)
			if why != "" {
				if err := l.bad(line, "example %d: %s", n, why); err != nil {
					return nil, err
				}
				continue
			}
			in, why := field(obj, "input")
			if why == "" {
				var t string
				if t, why = field(obj, "target"); why == "" {
					out = append(out, delegate.Task{
						ID: fmt.Sprintf("bbh/%s/%d", task, n), Dataset: "bbh", Subject: task,
						Prompt: in, Answer: strings.TrimSpace(t),
					})
					continue
				}
			}
			if err := l.bad(line, "example %d: %s", n, why); err != nil {
				return nil, err
			}
		}
		if err := expect(']'); err != nil {
			return fail(err)
		}
	}
	if err := expect('}'); err != nil {
		return fail(err)
	}
	if !found {
		return nil, &RecordError{File: l.file, Line: 1, Reason: `missing field "examples"`}
	}
	if len(out) == 0 && len(l.rep.Skipped) == 0 {
		return nil, fmt.Errorf("%s: %w", l.file, ErrEmpty)
	}
	return out, nil
}
