package bench

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/delegatelab/delegate"
)

// RecordVersion is the format version of a results record. ReadResults
// fails on any other version with an error naming both.
const RecordVersion = 1

// Record is the result of one arm on one task: one line of the results
// file.
type Record struct {
	Version  int    `json:"version"`
	Arm      string `json:"arm"`
	Strategy string `json:"strategy"`
	TaskID   string `json:"task_id"`
	// PromptHash identifies the task's prompt.
	// A resumed run never mixes results of a task that changed under the same ID.
	PromptHash string `json:"prompt_sha256"`
	Reference  string `json:"reference,omitempty"` // the task's answer
	Answer     string `json:"answer"`              // the strategy's final answer
	Extracted  string `json:"extracted"`           // what the verifier read from it
	Correct    bool   `json:"correct"`
	// Score is the grader's score of the answer, such as a judge's 0-100 rating, when it gives one.
	Score *float64 `json:"score,omitempty"`
	// Roles holds the calls, tokens, cost and latency of each role; Total
	// sums them over all roles.
	Roles map[string]delegate.Totals `json:"roles"`
	Total delegate.Totals            `json:"total"`
	// Latency is the wall time of the whole run of the item.
	Latency time.Duration `json:"latency_ns"`
	// Failure is the strategy's own account of a run without a proper
	// answer (delegate.Trace.Failure); the answer was still verified.
	Failure string `json:"failure,omitempty"`
	// FailureKind is Failure's kind, for code to switch on. Records
	// written before it was kept get it from Failure when read.
	FailureKind delegate.FailureKind `json:"failure_kind,omitempty"`
	// Grading holds, by role, the calls a Grader such as a judge made to grade the answer.
	// They are not part of Roles and Total.
	Grading map[string]delegate.Totals `json:"grading,omitempty"`
	// Error says why the item could not be run or scored; Correct is then false.
	// Examples are a panic, a timeout or a verifier error.
	Error string          `json:"error,omitempty"`
	Time  time.Time       `json:"time"`
	Trace *delegate.Trace `json:"trace,omitempty"`
	// Labels are what Config.Label read off the trace.
	Labels map[string]string `json:"labels,omitempty"`
}

// plainRecord is Record without its UnmarshalJSON method.
type plainRecord Record

// UnmarshalJSON decodes a record. A record written before failure_kind
// was kept gets the kind read from its failure message.
func (r *Record) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, (*plainRecord)(r)); err != nil {
		return err
	}
	r.fillFailureKind()
	return nil
}

// fillFailureKind sets an unset FailureKind from Failure, as the trace
// reader does (delegate.ParseFailureKind).
func (r *Record) fillFailureKind() {
	if r.FailureKind == "" {
		r.FailureKind = delegate.ParseFailureKind(r.Failure)
	}
}

// Failed reports whether the item ended without a proper answer.
// A strategy failure is still graded; an error is counted wrong.
func (r *Record) Failed() bool { return r.Failure != "" || r.Error != "" }

// promptHash is the first 16 hex digits of the SHA-256 of a prompt.
func promptHash(prompt string) string {
	h := sha256.Sum256([]byte(prompt))
	return hex.EncodeToString(h[:8])
}

// Repair says what ReadResults did to a results file whose last line was cut short.
// That happens when a run is killed while writing.
type Repair struct {
	Line    int   // the line that was cut, from 1
	Dropped int64 // bytes removed from the end of the file
}

func (r Repair) String() string {
	return fmt.Sprintf("line %d was cut short: its %d bytes were removed and its item will run again", r.Line, r.Dropped)
}

// ReadResults reads the records of a results file. A missing file has no records.
// A last line cut short has no newline and is not valid JSON.
// The file is then truncated to the lines before it, and the repair is returned.
// Any other malformed line, and any record of another version, is an error naming the file and line.
// A complete last line that only lacks its newline is kept, and the newline added.
func ReadResults(path string) ([]Record, *Repair, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read results %s: %w", path, err)
	}
	var (
		recs   []Record
		repair *Repair
	)
	for line, off := 1, 0; off < len(data); line++ {
		end := bytes.IndexByte(data[off:], '\n')
		last := end < 0
		if last {
			end = len(data) - off
		}
		raw := data[off : off+end]
		next := off + end + 1
		if len(bytes.TrimSpace(raw)) == 0 {
			off = next
			continue
		}
		rec, err := decodeRecord(raw)
		if err != nil && last && !isVersionError(err) {
			if terr := os.Truncate(path, int64(off)); terr != nil {
				return nil, nil, fmt.Errorf("repair results %s line %d: %w", path, line, terr)
			}
			repair = &Repair{Line: line, Dropped: int64(len(raw))}
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read results %s line %d: %w", path, line, err)
		}
		if last {
			if err := appendNewline(path); err != nil {
				return nil, nil, fmt.Errorf("repair results %s line %d: %w", path, line, err)
			}
		}
		recs = append(recs, rec)
		off = next
	}
	return recs, repair, nil
}

type versionError struct{ got int }

func (e *versionError) Error() string {
	return fmt.Sprintf("record version %d, this program reads version %d: rerun into a new results file or use the matching version of delegate", e.got, RecordVersion)
}

func isVersionError(err error) bool {
	var ve *versionError
	return errors.As(err, &ve)
}

// decodeRecord parses one line strictly.
// Unknown fields, trailing data and a record without arm or task ID are errors.
func decodeRecord(raw []byte) (Record, error) {
	var head struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return Record{}, fmt.Errorf("decode record: %w", err)
	}
	if head.Version == nil {
		return Record{}, errors.New("decode record: no version")
	}
	if *head.Version != RecordVersion {
		return Record{}, &versionError{got: *head.Version}
	}
	// The decoder's strictness does not reach a type's own UnmarshalJSON:
	// decode the plain type and fill the kind here.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode((*plainRecord)(&r)); err != nil {
		return Record{}, fmt.Errorf("decode record: %w", err)
	}
	r.fillFailureKind()
	if dec.More() {
		return Record{}, errors.New("decode record: data after the record")
	}
	if r.Arm == "" || r.TaskID == "" {
		return Record{}, errors.New("decode record: arm and task_id must be set")
	}
	return r, nil
}

func appendNewline(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte{'\n'}); err != nil {
		f.Close() // the write error is the one to report
		return err
	}
	return f.Close()
}

// resultsWriter appends records to the results file, one line per record in a single write.
// A killed run then leaves at most its last line cut.
// Its methods may be called from many goroutines at once.
// On a nil writer, meaning no results file, they do nothing.
type resultsWriter struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

func openResults(path string) (*resultsWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open results %s: %w", path, err)
	}
	return &resultsWriter{path: path, f: f}, nil
}

// write appends r to the file without a buffer.
// The record is in the file when write returns.
func (rw *resultsWriter) write(r *Record) error {
	if rw == nil {
		return nil // no results file: the record is kept for the report only
	}
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode result %s/%s: %w", r.Arm, r.TaskID, err)
	}
	line = append(line, '\n')
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if _, err := rw.f.Write(line); err != nil {
		return fmt.Errorf("write results %s: %w", rw.path, err)
	}
	return nil
}

func (rw *resultsWriter) close() error {
	if rw == nil {
		return nil
	}
	if err := rw.f.Close(); err != nil {
		return fmt.Errorf("close results %s: %w", rw.path, err)
	}
	return nil
}
