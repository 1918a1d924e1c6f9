// Package dataset loads benchmark and open-ended task files as delegate.Task values.
// It reads GSM8K, MATH, MMLU, BBH and our own open-ended JSONL, with the
// same input rules for every format. It samples tasks deterministically, so
// that runs compare on the same items. Load states the formats and rules.
// Nothing is dropped silently: a malformed record is an error, or a listed
// skip under Options.SkipBad.
package dataset

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/delegatelab/delegate"
)

// Options controls loading.
type Options struct {
	// SkipBad leaves malformed records out, listing each in
	// Report.Skipped, instead of failing on the first one.
	SkipBad bool
	// MaxRecord is the largest record in bytes: a JSONL line, a CSV
	// record or a BBH example. 0 means DefaultMaxRecord. JSONL files are
	// read a line at a time, so a longer line is never held whole.
	MaxRecord int
}

// DefaultMaxRecord is the default Options.MaxRecord: 1 MiB. A benchmark
// item is a few kilobytes; a larger record is almost surely a broken file.
const DefaultMaxRecord = 1 << 20

// Skip is one record left out under Options.SkipBad.
type Skip struct {
	File   string
	Line   int // 1-based line where the record starts
	Reason string
}

// Report says what a Load read and what it left out.
type Report struct {
	Read    int    // records loaded as tasks
	Skipped []Skip // malformed records left out (only with SkipBad)
}

// RecordError is a malformed record: the file, the 1-based line where the
// record starts, and what is wrong.
type RecordError struct {
	File   string
	Line   int
	Reason string
	// Err is the kind of defect where it has one (ErrTooLarge), or nil.
	Err error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
}

// Unwrap returns the kind of defect, so that errors.Is finds ErrTooLarge.
func (e *RecordError) Unwrap() error { return e.Err }

// ErrTooLarge is the Err of a RecordError for a record over
// Options.MaxRecord bytes.
var ErrTooLarge = errors.New("record over the size limit")

// ErrEmpty is returned (wrapped) for a file holding no records.
var ErrEmpty = errors.New("file holds no records")

// Formats lists the formats Load accepts. Load also takes "open" for "jsonl":
// it is the commands' name for open-ended requests, which the judge scores.
var Formats = []string{"gsm8k", "math", "mmlu", "bbh", "jsonl"}

// Load reads the tasks of one dataset file, or of a directory for mmlu and bbh.
// A directory's *.csv or *.json files are read in name order.
//
// The formats:
//   - gsm8k: JSONL, the answer after "####";
//   - math: JSONL, the "answer" field or the last \boxed{} of "solution";
//   - mmlu: headerless CSV of question,A,B,C,D,answer;
//   - bbh: JSON {"examples":[{"input","target"}]};
//   - jsonl: open-ended requests {"id","prompt"}.
//
// The input rules are the same for every format. A record is a JSONL line, a
// CSV record or a BBH example, of at most Options.MaxRecord bytes; a larger
// one is malformed. A UTF-8 byte order mark is ignored, CRLF line endings
// are accepted, and blank JSONL lines are ignored. A file with no records is
// an error. A last line without a newline is accepted when it parses and
// reported as truncated when it does not. A malformed record is an error
// naming the file, the line and, where it applies, the field. Under
// Options.SkipBad it is left out and listed in Report.Skipped instead.
//
// Task IDs are stable: the dataset, the file name without extension, and the
// record's JSONL line or 1-based CSV or BBH position. Examples are
// "gsm8k/test/17", "mmlu/anatomy_test/3" and "bbh/navigate/250". Open-ended
// records keep their own "id".
func Load(format, path string, opt Options) ([]delegate.Task, Report, error) {
	if format == "open" {
		format = "jsonl"
	}
	var rep Report
	files, err := inputFiles(format, path)
	if err != nil {
		return nil, rep, err
	}
	if opt.MaxRecord < 0 {
		return nil, rep, fmt.Errorf("load %s: max record size %d is negative", format, opt.MaxRecord)
	}
	var tasks []delegate.Task
	for _, f := range files {
		l := &loader{file: f, opt: opt, rep: &rep}
		got, err := l.load(format)
		if err != nil {
			return nil, rep, fmt.Errorf("load %s: %w", format, err)
		}
		tasks = append(tasks, got...)
	}
	rep.Read = len(tasks)
	return tasks, rep, nil
}

// load reads l.file in format: JSONL a line at a time, CSV and BBH whole.
func (l *loader) load(format string) ([]delegate.Task, error) {
	f, err := os.Open(l.file)
	if err != nil {
		return nil, err
	}
	defer f.Close() // read only: a close error loses nothing
	switch format {
	case "gsm8k":
		return l.gsm8k(f)
	case "math":
		return l.math(f)
	case "jsonl":
		return l.open(f)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", l.file, err)
	}
	data = trimBOM(data)
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: %w", l.file, ErrEmpty)
	}
	if format == "mmlu" {
		return l.mmlu(data)
	}
	return l.bbh(data)
}

// inputFiles resolves path to the files to read.
func inputFiles(format, path string) ([]string, error) {
	ext := ""
	switch format {
	case "gsm8k", "math", "jsonl":
	case "mmlu":
		ext = ".csv"
	case "bbh":
		ext = ".json"
	default:
		return nil, fmt.Errorf("load %q: unknown format (want one of %s)", format, strings.Join(Formats, ", "))
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", format, err)
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	if ext == "" {
		return nil, fmt.Errorf("load %s %s: is a directory; give the file", format, path)
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", format, err)
	}
	var files []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ext) {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("load %s %s: no *%s files in directory", format, path, ext)
	}
	return files, nil
}

func trimBOM(b []byte) []byte {
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		return b[3:]
	}
	return b
}

// base is the file name without directory and extension.
func base(file string) string {
	b := filepath.Base(file)
	return strings.TrimSuffix(b, filepath.Ext(b))
}

// loader reads one file, routing bad records to an error or a Skip.
type loader struct {
	file string
	opt  Options
	rep  *Report
}

// maxRecord is the record size limit in bytes.
func (l *loader) maxRecord() int {
	if l.opt.MaxRecord > 0 {
		return l.opt.MaxRecord
	}
	return DefaultMaxRecord
}

// tooLarge records a record over the size limit, as bad does.
func (l *loader) tooLarge(line int, what string, size int) error {
	err := l.bad(line, "%s is %d bytes, over the limit of %d bytes per record", what, size, l.maxRecord())
	var re *RecordError
	if errors.As(err, &re) {
		re.Err = ErrTooLarge
	}
	return err
}

// bad records a malformed record: an error to return, or nil after
// counting it as skipped.
func (l *loader) bad(line int, format string, args ...any) error {
	reason := fmt.Sprintf(format, args...)
	if l.opt.SkipBad {
		l.rep.Skipped = append(l.rep.Skipped, Skip{File: l.file, Line: line, Reason: reason})
		return nil
	}
	return &RecordError{File: l.file, Line: line, Reason: reason}
}
