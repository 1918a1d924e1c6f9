package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
)

const (
	lineA = `{"version":1,"arm":"a","strategy":"single","task_id":"1","prompt_sha256":"x","answer":"2","extracted":"2","correct":true,"roles":{},"total":{"calls":1,"usage":{"prompt_tokens":3,"completion_tokens":1},"cost":0,"latency_ns":0},"latency_ns":5,"time":"2026-11-23T00:00:00Z"}`
	lineB = `{"version":1,"arm":"a","strategy":"single","task_id":"2","prompt_sha256":"y","answer":"3","extracted":"3","correct":false,"roles":{},"total":{"calls":1,"usage":{"prompt_tokens":3,"completion_tokens":1},"cost":0,"latency_ns":0},"latency_ns":5,"time":"2026-11-23T00:00:00Z"}`
)

func TestReadResults(t *testing.T) {
	tests := []struct {
		name     string
		content  string
		records  int
		repaired *Repair
		after    string // the file afterwards; "" when unchanged
		err      string
	}{
		{name: "two lines", content: lineA + "\n" + lineB + "\n", records: 2},
		{name: "blank lines are skipped", content: lineA + "\n\n" + lineB + "\n", records: 2},
		{name: "last line cut short", content: lineA + "\n" + lineB[:40], records: 1,
			repaired: &Repair{Line: 2, Dropped: 40}, after: lineA + "\n"},
		{name: "complete last line without newline", content: lineA + "\n" + lineB, records: 2,
			after: lineA + "\n" + lineB + "\n"},
		{name: "malformed line in the middle", content: lineA + "\n{not json\n" + lineB + "\n", err: "line 2: decode record"},
		{name: "cut line followed by another", content: lineB[:40] + "\n" + lineA + "\n", err: "line 1: decode record"},
		{name: "another version", content: strings.Replace(lineA, `"version":1`, `"version":2`, 1) + "\n",
			err: "line 1: record version 2, this program reads version 1"},
		{name: "another version on the last line is not a cut line", content: lineA + "\n" + strings.Replace(lineB, `"version":1`, `"version":2`, 1),
			err: "line 2: record version 2"},
		{name: "no version", content: `{"arm":"a","task_id":"1"}` + "\n", err: "line 1: decode record: no version"},
		{name: "unknown field", content: strings.Replace(lineA, `"answer"`, `"answr"`, 1) + "\n", err: `line 1: decode record: json: unknown field "answr"`},
		{name: "no task id", content: strings.Replace(lineA, `"task_id":"1"`, `"task_id":""`, 1) + "\n", err: "arm and task_id must be set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "results.jsonl")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			recs, repair, err := ReadResults(path)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error %v, want one naming %s and containing %q", err, path, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadResults: %v", err)
			}
			if len(recs) != tt.records {
				t.Errorf("got %d records, want %d", len(recs), tt.records)
			}
			if (repair == nil) != (tt.repaired == nil) || repair != nil && *repair != *tt.repaired {
				t.Errorf("repair = %v, want %v", repair, tt.repaired)
			}
			want := tt.after
			if want == "" {
				want = tt.content
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Errorf("file afterwards = %q, want %q", got, want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		recs, repair, err := ReadResults(filepath.Join(t.TempDir(), "none.jsonl"))
		if recs != nil || repair != nil || err != nil {
			t.Errorf("ReadResults = %v, %v, %v, want nothing", recs, repair, err)
		}
	})
}

// FuzzReadResults checks that no file content makes the reader panic.
// What it keeps after a repair must read back cleanly.
func FuzzReadResults(f *testing.F) {
	f.Add(lineA + "\n" + lineB + "\n")
	f.Add(lineA + "\n" + lineB[:17])
	f.Add(`{"version":1}`)
	f.Add("\n\n{")
	f.Add(`{"version":1,"arm":"a","task_id":"1","roles":null}` + "\n")
	f.Fuzz(func(t *testing.T, content string) {
		path := filepath.Join(t.TempDir(), "r.jsonl")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		recs, _, err := ReadResults(path)
		if err != nil {
			return
		}
		again, repair, err := ReadResults(path)
		if err != nil || repair != nil || len(again) != len(recs) {
			t.Errorf("second read = %d records, repair %v, error %v; want the %d records, clean", len(again), repair, err, len(recs))
		}
	})
}

// TestRecordFailureKind checks that a record keeps the kind it was written with.
// One written before the kind was kept gets it from its message.
// Both hold through ReadResults and through json.Unmarshal.
func TestRecordFailureKind(t *testing.T) {
	withFailure := func(fields string) string {
		return strings.Replace(lineA, `"correct":true`, `"correct":true,`+fields, 1)
	}
	tests := []struct {
		name string
		line string
		want delegate.FailureKind
	}{
		{"no failure", lineA, ""},
		{"old call failure", withFailure(`"failure":"call failed: backend down"`), delegate.FailureCall},
		{"old rejected plan", withFailure(`"failure":"plan has no subtasks: none found"`), delegate.FailurePlan},
		{"old truncated plan", withFailure(`"failure":"plan truncated: at max_tokens"`), delegate.FailurePlanTruncated},
		{"kind written", withFailure(`"failure":"the whole reply","failure_kind":"answer format"`), delegate.FailureAnswerFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "results.jsonl")
			if err := os.WriteFile(path, []byte(tt.line+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			recs, _, err := ReadResults(path)
			if err != nil || len(recs) != 1 {
				t.Fatalf("ReadResults: %d records, %v; want 1, nil", len(recs), err)
			}
			if got := recs[0].FailureKind; got != tt.want {
				t.Errorf("ReadResults: kind %q, want %q", got, tt.want)
			}
			var r Record
			if err := json.Unmarshal([]byte(tt.line), &r); err != nil {
				t.Fatal(err)
			}
			if got := r.FailureKind; got != tt.want {
				t.Errorf("json.Unmarshal: kind %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRecordFailureKindRoundTrip: a written kind is read back as written,
// and the released fixture's records get theirs from the message.
func TestRecordFailureKindRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.jsonl")
	w, err := openResults(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Record{Version: RecordVersion, Arm: "a", TaskID: "1", Failure: "max turns: 8 turns", FailureKind: delegate.FailureMaxTurns}
	if err := w.write(&want); err != nil {
		t.Fatal(err)
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	recs, _, err := ReadResults(path)
	if err != nil || len(recs) != 1 {
		t.Fatalf("ReadResults: %d records, %v; want 1, nil", len(recs), err)
	}
	if got := recs[0]; got.Failure != want.Failure || got.FailureKind != want.FailureKind {
		t.Errorf("read back failure %q (%q), want %q (%q)", got.Failure, got.FailureKind, want.Failure, want.FailureKind)
	}

	old, _, err := ReadResults(fixturePath)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, r := range old {
		if got, want := r.FailureKind, delegate.ParseFailureKind(r.Failure); got != want {
			t.Errorf("fixture %s/%s: kind %q, want %q from %q", r.Arm, r.TaskID, got, want, r.Failure)
		}
		if r.Failure != "" {
			failed++
		}
	}
	if failed == 0 {
		t.Errorf("fixture %s has no failed record to read a kind from", fixturePath)
	}
}
