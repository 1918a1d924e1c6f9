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
	r := &bbhReader{l: l, data: data, dec: json.NewDecoder(bytes.NewReader(data)), task: base(l.file)}
	if err := r.expect('{'); err != nil {
		return nil, r.broken(0, err)
	}
	var out []delegate.Task
	found := false
	for r.dec.More() {
		tok, err := r.dec.Token()
		if err != nil {
			return nil, r.broken(0, err)
		}
		if key, _ := tok.(string); key != "examples" {
			var skip json.RawMessage
			if err := r.dec.Decode(&skip); err != nil {
				return nil, r.broken(0, err)
			}
			continue
		}
		found = true
		if out, err = r.examples(out); err != nil {
			return nil, err
		}
	}
	if err := r.expect('}'); err != nil {
		return nil, r.broken(0, err)
	}
	if !found {
		return nil, &RecordError{File: l.file, Line: 1, Reason: `missing field "examples"`}
	}
	if len(out) == 0 && len(l.rep.Skipped) == 0 {
		return nil, fmt.Errorf("%s: %w", l.file, ErrEmpty)
	}
	return out, nil
}

// bbhReader is the state of reading one BBH file.
type bbhReader struct {
	l    *loader
	data []byte
	dec  *json.Decoder
	task string // the file's task name
}

// broken reports a broken file structure at line (0: where the decoder
// stopped). No later record can be trusted, so this is an error even
// with SkipBad.
func (r *bbhReader) broken(line int, err error) error {
	if line == 0 {
		line = lineAt(r.data, r.dec.InputOffset())
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line = lineAt(r.data, se.Offset)
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = errors.New("truncated JSON")
	}
	return &RecordError{File: r.l.file, Line: line, Reason: err.Error()}
}

// expect reads the delimiter want.
func (r *bbhReader) expect(want json.Delim) error {
	tok, err := r.dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("got %v, want %q", tok, want)
	}
	return nil
}

// examples reads the array of "examples", appending its tasks to out.
func (r *bbhReader) examples(out []delegate.Task) ([]delegate.Task, error) {
	if err := r.expect('['); err != nil {
		return nil, r.broken(0, fmt.Errorf(`"examples": %w`, err))
	}
	for n := 1; r.dec.More(); n++ {
		// InputOffset is at the separator before the element; the element
		// starts after blanks and a comma.
		off := r.dec.InputOffset()
		for off < int64(len(r.data)) && strings.ContainsRune(" \t\r\n,", rune(r.data[off])) {
			off++
		}
		line := lineAt(r.data, off)
		var raw json.RawMessage
		if err := r.dec.Decode(&raw); err != nil {
			return nil, r.broken(line, fmt.Errorf("example %d: %w", n, err))
		}
		t, ok, err := r.example(line, n, raw)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, t)
		}
	}
	if err := r.expect(']'); err != nil {
		return nil, r.broken(0, err)
	}
	return out, nil
}

// example reads example n at line; ok is false when it is skipped.
func (r *bbhReader) example(line, n int, raw json.RawMessage) (t delegate.Task, ok bool, err error) {
	l := r.l
	if len(raw) > l.maxRecord() {
		return t, false, l.tooLarge(line, fmt.Sprintf("example %d", n), len(raw))
	}
	obj, why := object(raw)
	if why == "" {
		var in, target string
		if in, why = field(obj, "input"); why == "" {
			if target, why = field(obj, "target"); why == "" {
				return delegate.Task{
					ID: fmt.Sprintf("bbh/%s/%d", r.task, n), Dataset: "bbh", Subject: r.task,
					Prompt: in, Answer: strings.TrimSpace(target),
				}, true, nil
			}
		}
	}
	return t, false, l.bad(line, "example %d: %s", n, why)
}
