package dataset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/delegatelab/delegate"
)

// jsonLines calls fn with each non-blank line of data and its 1-based
// number. A record that fails to decode on a last line without a newline
// is reported as truncated.
func (l *loader) jsonLines(data []byte, fn func(line int, rec []byte) error) error {
	lines := bytes.Split(data, []byte("\n"))
	truncated := len(data) > 0 && data[len(data)-1] != '\n'
	for i, raw := range lines {
		raw = bytes.TrimSuffix(raw, []byte("\r"))
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		if !json.Valid(raw) {
			reason := "invalid JSON"
			if truncated && i == len(lines)-1 {
				reason = "truncated record (invalid JSON on a last line without newline)"
			}
			if err := l.bad(i+1, "%s", reason); err != nil {
				return err
			}
			continue
		}
		if err := fn(i+1, raw); err != nil {
			return err
		}
	}
	return nil
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

func (l *loader) gsm8k(data []byte) ([]delegate.Task, error) {
	var out []delegate.Task
	name := base(l.file)
	err := l.jsonLines(data, func(line int, rec []byte) error {
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

func (l *loader) math(data []byte) ([]delegate.Task, error) {
	var out []delegate.Task
	name := base(l.file)
	err := l.jsonLines(data, func(line int, rec []byte) error {
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

func (l *loader) open(data []byte) ([]delegate.Task, error) {
	var out []delegate.Task
	seen := map[string]int{}
	name := base(l.file)
	err := l.jsonLines(data, func(line int, rec []byte) error {
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
