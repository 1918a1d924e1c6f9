package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/delegatelab/delegate"
)

// jsonLines calls fn with each non-blank line of r and its 1-based
// number. It reads a line at a time: a line over the record limit is
// reported with its size and skipped over, never held whole. A record
// that fails to decode on a last line without a newline is reported as
// truncated; a file with no non-blank line is ErrEmpty.
func (l *loader) jsonLines(r io.Reader, fn func(line int, rec []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	limit := l.maxRecord()
	var buf []byte
	records := false
	for n := 1; ; n++ {
		raw, size, last, err := readLine(br, limit, buf[:0])
		if err != nil {
			return fmt.Errorf("read %s: %w", l.file, err)
		}
		buf = raw
		if n == 1 {
			raw = trimBOM(raw)
		}
		switch {
		case size > limit:
			records = true
			if err := l.tooLarge(n, "line", size); err != nil {
				return err
			}
		case len(bytes.TrimSpace(raw)) == 0:
		case !json.Valid(raw):
			records = true
			reason := "invalid JSON"
			if last && size > 0 {
				reason = "truncated record (invalid JSON on a last line without newline)"
			}
			if err := l.bad(n, "%s", reason); err != nil {
				return err
			}
		default:
			records = true
			if err := fn(n, raw); err != nil {
				return err
			}
		}
		if last {
			break
		}
	}
	if !records {
		return fmt.Errorf("%s: %w", l.file, ErrEmpty)
	}
	return nil
}

// readLine appends the next line of br to buf while it fits in limit bytes.
// The line goes without its "\n" or "\r\n". It returns the line and its
// full size. last is set when the line ended at the end of input, not at a
// newline.
func readLine(br *bufio.Reader, limit int, buf []byte) (line []byte, size int, last bool, err error) {
	var prev byte // the byte before the newline
	for {
		chunk, err := br.ReadSlice('\n')
		end := len(chunk)
		if err == nil {
			end-- // the "\n"
			switch {
			case end > 0 && chunk[end-1] == '\r':
				end--
			case end == 0 && prev == '\r':
				size--
				if len(buf) > 0 && buf[len(buf)-1] == '\r' {
					buf = buf[:len(buf)-1]
				}
			}
		}
		if end > 0 {
			prev = chunk[end-1]
		}
		size += end
		if size <= limit {
			buf = append(buf, chunk[:end]...)
		}
		switch {
		case err == nil:
			return buf, size, false, nil
		case errors.Is(err, io.EOF):
			return buf, size, true, nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return nil, 0, false, err
		}
	}
}

// field returns a required non-empty string field of a JSON object, or
// the reason it is not one.
func field(obj map[string]json.RawMessage, name string) (string, string) {
	raw, ok := obj[name]
	if !ok {
		return "", fmt.Sprintf("missing field %q", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Sprintf("field %q is not a string", name)
	}
	if strings.TrimSpace(s) == "" {
		return "", fmt.Sprintf("field %q is empty", name)
	}
	return s, ""
}

// object decodes a JSON object record.
func object(rec []byte) (map[string]json.RawMessage, string) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(rec, &obj); err != nil || obj == nil {
		return nil, "record is not a JSON object"
	}
	return obj, ""
}

func (l *loader) gsm8k(r io.Reader) ([]delegate.Task, error) {
	var out []delegate.Task
	name := base(l.file)
	err := l.jsonLines(r, func(line int, rec []byte) error {
		obj, why := object(rec)
		if why != "" {
			return l.bad(line, "%s", why)
		}
		q, why := field(obj, "question")
		if why != "" {
			return l.bad(line, "%s", why)
		}
		a, why := field(obj, "answer")
		if why != "" {
			return l.bad(line, "%s", why)
		}
		i := strings.LastIndex(a, "####")
		if i < 0 {
			return l.bad(line, `field "answer" has no "####" final answer`)
		}
		ans := strings.ReplaceAll(strings.TrimSpace(a[i+4:]), ",", "")
		if ans == "" {
			return l.bad(line, `field "answer" is empty after "####"`)
		}
		out = append(out, delegate.Task{
			ID: fmt.Sprintf("gsm8k/%s/%d", name, line), Dataset: "gsm8k", Prompt: q, Answer: ans,
		})
		return nil
	})
	return out, err
}

func (l *loader) math(r io.Reader) ([]delegate.Task, error) {
	var out []delegate.Task
	name := base(l.file)
	err := l.jsonLines(r, func(line int, rec []byte) error {
		obj, why := object(rec)
		if why != "" {
			return l.bad(line, "%s", why)
		}
		p, why := field(obj, "problem")
		if why != "" {
			return l.bad(line, "%s", why)
		}
		var ans string
		if _, ok := obj["answer"]; ok {
			if ans, why = field(obj, "answer"); why != "" {
				return l.bad(line, "%s", why)
			}
		} else {
			sol, why := field(obj, "solution")
			if why != "" {
				return l.bad(line, `%s (and no "answer" field)`, why)
			}
			var ok bool
			if ans, ok = delegate.Boxed(sol); !ok {
				return l.bad(line, `field "solution" has no \boxed{} answer (and no "answer" field)`)
			}
		}
		subj := ""
		for _, k := range []string{"subject", "type"} {
			if _, ok := obj[k]; ok {
				if subj, why = field(obj, k); why != "" {
					return l.bad(line, "%s", why)
				}
				break
			}
		}
		out = append(out, delegate.Task{
			ID: fmt.Sprintf("math/%s/%d", name, line), Dataset: "math", Subject: subj,
			Prompt: p, Answer: strings.TrimSpace(ans),
		})
		return nil
	})
	return out, err
}

func (l *loader) open(r io.Reader) ([]delegate.Task, error) {
	var out []delegate.Task
	seen := map[string]int{}
	name := base(l.file)
	err := l.jsonLines(r, func(line int, rec []byte) error {
		obj, why := object(rec)
		if why != "" {
			return l.bad(line, "%s", why)
		}
		p, why := field(obj, "prompt")
		if why != "" {
			return l.bad(line, "%s", why)
		}
		id := fmt.Sprintf("open/%s/%d", name, line)
		if _, ok := obj["id"]; ok {
			if id, why = field(obj, "id"); why != "" {
				return l.bad(line, "%s", why)
			}
		}
		if prev, dup := seen[id]; dup {
			return l.bad(line, "duplicate id %q (first on line %d)", id, prev)
		}
		seen[id] = line
		out = append(out, delegate.Task{ID: id, Dataset: "open", Prompt: p})
		return nil
	})
	return out, err
}
