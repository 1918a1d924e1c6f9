package dataset

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/delegatelab/delegate"
)

var letters = [4]string{"A", "B", "C", "D"}

// mmluSubject is the subject from a file name: "abstract_algebra_test.csv"
// gives "abstract_algebra".
func mmluSubject(file string) string {
	b := base(file)
	for _, suf := range []string{"_test", "_val", "_dev"} {
		if s, ok := strings.CutSuffix(b, suf); ok {
			return s
		}
	}
	return b
}

// mmluPrompt renders a question and its lettered options.
func mmluPrompt(q string, opts []string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(q))
	b.WriteString("\n")
	for i, o := range opts {
		fmt.Fprintf(&b, "\n%s. %s", letters[i], strings.TrimSpace(o))
	}
	return b.String()
}

// recordSize is the bytes of a CSV record's fields and separators.
func recordSize(rec []string) int {
	n := len(rec) - 1
	for _, f := range rec {
		n += len(f)
	}
	return n
}

func (l *loader) mmlu(data []byte) ([]delegate.Task, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1 // counted here, so a bad record can be skipped
	// The official MMLU files have stray quotes inside unquoted fields (e.g.
	// val/college_medicine_val.csv line 6); the quote is part of the text,
	// as other CSV readers take it.
	r.LazyQuotes = true
	name := base(l.file)
	subj := mmluSubject(l.file)
	var out []delegate.Task
	for n := 1; ; n++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				return nil, fmt.Errorf("read %s: %w", l.file, err)
			}
			if err := l.bad(pe.StartLine, "record %d: %v", n, pe.Err); err != nil {
				return nil, err
			}
			continue
		}
		line, _ := r.FieldPos(0)
		if size := recordSize(rec); size > l.maxRecord() {
			if err := l.tooLarge(line, fmt.Sprintf("record %d", n), size); err != nil {
				return nil, err
			}
			continue
		}
		if len(rec) != 6 {
			if err := l.bad(line, "record %d: %d fields, want 6 (question,A,B,C,D,answer)", n, len(rec)); err != nil {
				return nil, err
			}
			continue
		}
		ans := strings.TrimSpace(rec[5])
		if len(ans) != 1 || ans < "A" || ans > "D" {
			if err := l.bad(line, "record %d: answer field %q is not a letter A-D", n, rec[5]); err != nil {
				return nil, err
			}
			continue
		}
		if strings.TrimSpace(rec[0]) == "" {
			if err := l.bad(line, "record %d: question field is empty", n); err != nil {
				return nil, err
			}
			continue
		}
		opts := append([]string(nil), rec[1:5]...)
		out = append(out, delegate.Task{
			ID: fmt.Sprintf("mmlu/%s/%d", name, n), Dataset: "mmlu", Subject: subj,
			Prompt: mmluPrompt(rec[0], opts), Answer: ans, Choices: opts,
		})
	}
	if len(out) == 0 && len(l.rep.Skipped) == 0 {
		return nil, fmt.Errorf("%s: %w", l.file, ErrEmpty)
	}
	return out, nil
}
