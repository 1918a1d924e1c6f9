package dataset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
)

func load(t *testing.T, format, path string, opt Options) ([]delegate.Task, Report) {
	t.Helper()
	tasks, rep, err := Load(format, filepath.Join("testdata", path), opt)
	if err != nil {
		t.Fatalf("Load(%s, %s): %v", format, path, err)
	}
	return tasks, rep
}

func TestLoadSamples(t *testing.T) {
	tests := []struct {
		format, path string
		n            int
		first        delegate.Task // Prompt checked by prefix
	}{
		{"gsm8k", "gsm8k/test.jsonl", 5, delegate.Task{ID: "gsm8k/test/1", Dataset: "gsm8k", Answer: "18", Prompt: "Janet"}},
		{"math", "math/test.jsonl", 5, delegate.Task{ID: "math/test/1", Dataset: "math", Subject: "Algebra", Answer: "2", Prompt: "How many vertical asymptotes"}},
		{"math", "math/math500_test.jsonl", 5, delegate.Task{ID: "math/math500_test/1", Dataset: "math", Subject: "Precalculus", Answer: `\left( 3, \frac{\pi}{2} \right)`, Prompt: "Convert the point"}},
		{"mmlu", "mmlu/test", 9, delegate.Task{ID: "mmlu/abstract_algebra_test/1", Dataset: "mmlu", Subject: "abstract_algebra", Answer: "B", Prompt: "Find the degree for the given field extension"}},
		{"bbh", "bbh", 12, delegate.Task{ID: "bbh/date_understanding/1", Dataset: "bbh", Subject: "date_understanding", Answer: "(B)", Prompt: "Today is Christmas Eve of 1937"}},
		{"bbh", "bbh/dyck_languages.json", 4, delegate.Task{ID: "bbh/dyck_languages/1", Dataset: "bbh", Subject: "dyck_languages", Answer: "] ]", Prompt: "Complete the rest of the sequence"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			tasks, rep := load(t, tt.format, tt.path, Options{})
			if len(tasks) != tt.n || rep.Read != tt.n || len(rep.Skipped) != 0 {
				t.Fatalf("got %d tasks, Read %d, %d skipped; want %d, none skipped", len(tasks), rep.Read, len(rep.Skipped), tt.n)
			}
			got, want := tasks[0], tt.first
			if got.ID != want.ID || got.Dataset != want.Dataset || got.Subject != want.Subject || got.Answer != want.Answer || !strings.HasPrefix(got.Prompt, want.Prompt) {
				t.Errorf("first task = %+v; want %+v (prompt prefix)", got, want)
			}
		})
	}
}

func TestLoadGSM8KThousands(t *testing.T) {
	tasks, rep := load(t, "gsm8k", "bad/gsm8k_bad.jsonl", Options{SkipBad: true})
	var answers []string
	for _, task := range tasks {
		answers = append(answers, task.Answer)
	}
	if got, want := strings.Join(answers, ","), "7,2250"; got != want || rep.Read != 2 {
		t.Errorf("answers = %s (Read %d); want %s", got, rep.Read, want)
	}
}

func TestMMLUPrompt(t *testing.T) {
	tasks, _ := load(t, "mmlu", "mmlu/test/high_school_us_history_test.csv", Options{})
	last := tasks[len(tasks)-1]
	// The question line, a blank line and four option lines make five
	// newlines; more means a field's own newline survived.
	if strings.Count(last.Prompt, "\n") <= 5 {
		t.Errorf("record with a newline in a field lost it: %q", last.Prompt)
	}
	task := tasks[0]
	if len(task.Choices) != 4 {
		t.Fatalf("Choices = %q; want 4", task.Choices)
	}
	for i, c := range task.Choices {
		if want := string(rune('A'+i)) + ". " + strings.TrimSpace(c); !strings.Contains(task.Prompt, want) {
			t.Errorf("prompt %q lacks option line %q", task.Prompt, want)
		}
	}
}

func TestLoadBad(t *testing.T) {
	tests := []struct {
		name, format, path string
		firstLine          int    // line of the first bad record
		firstReason        string // part of its reason
		skipped            []int  // lines counted under SkipBad
		read               int    // tasks kept under SkipBad
	}{
		{"gsm8k", "gsm8k", "bad/gsm8k_bad.jsonl", 2, "invalid JSON", []int{2, 3, 4, 6}, 2},
		{"math", "math", "bad/math_bad.jsonl", 2, `missing field "problem"`, []int{2, 3, 5}, 2},
		{"mmlu columns and letter", "mmlu", "bad/mmlu", 2, "4 fields, want 6", []int{2, 3}, 2},
		{"bbh", "bbh", "bad/bbh_bad.json", 5, `missing field "target"`, []int{5, 6}, 2},
		{"open duplicate and empty", "jsonl", "open/requests.jsonl", 3, "duplicate id", []int{3, 4}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join("testdata", tt.path)
			_, _, err := Load(tt.format, path, Options{})
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("Load error = %v; want a *RecordError", err)
			}
			if !strings.HasSuffix(re.File, filepath.Base(path)) && !strings.Contains(re.File, path) {
				t.Errorf("error file = %q; want %q", re.File, path)
			}
			if re.Line != tt.firstLine || !strings.Contains(re.Reason, tt.firstReason) {
				t.Errorf("error at line %d %q; want line %d containing %q", re.Line, re.Reason, tt.firstLine, tt.firstReason)
			}
			if msg := err.Error(); !strings.Contains(msg, re.File) {
				t.Errorf("message %q does not name the file", msg)
			}

			tasks, rep, err := Load(tt.format, path, Options{SkipBad: true})
			if err != nil {
				t.Fatalf("Load with SkipBad: %v", err)
			}
			var lines []int
			for _, s := range rep.Skipped {
				lines = append(lines, s.Line)
				if s.File == "" || s.Reason == "" {
					t.Errorf("skip %+v lacks file or reason", s)
				}
			}
			if !equalInts(lines, tt.skipped) || len(tasks) != tt.read || rep.Read != tt.read {
				t.Errorf("skipped lines %v, %d tasks (Read %d); want %v, %d", lines, len(tasks), rep.Read, tt.skipped, tt.read)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLoadEdgeCases(t *testing.T) {
	t.Run("mmlu bad letter", func(t *testing.T) {
		_, rep, _ := Load("mmlu", "testdata/bad/mmlu", Options{SkipBad: true})
		if len(rep.Skipped) < 2 || !strings.Contains(rep.Skipped[1].Reason, `"E" is not a letter A-D`) {
			t.Errorf("skips = %+v; want the second to name answer \"E\"", rep.Skipped)
		}
	})
	t.Run("bom and crlf", func(t *testing.T) {
		tasks, _ := load(t, "gsm8k", "bad/bom_crlf.jsonl", Options{})
		if len(tasks) != 2 || tasks[0].Answer != "-3" || tasks[1].ID != "gsm8k/bom_crlf/3" {
			t.Errorf("tasks = %+v; want answers -3, 4 with IDs from lines 1 and 3", tasks)
		}
	})
	t.Run("empty file", func(t *testing.T) {
		_, _, err := Load("gsm8k", "testdata/bad/empty.jsonl", Options{SkipBad: true})
		if !errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), "empty.jsonl") {
			t.Errorf("err = %v; want ErrEmpty naming the file", err)
		}
	})
	t.Run("truncated last line", func(t *testing.T) {
		_, rep, _ := Load("gsm8k", "testdata/bad/gsm8k_bad.jsonl", Options{SkipBad: true})
		last := rep.Skipped[len(rep.Skipped)-1]
		if !strings.Contains(last.Reason, "truncated") {
			t.Errorf("last skip = %+v; want it reported as truncated", last)
		}
	})
	t.Run("truncated last line that parses", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "x.jsonl")
		if err := os.WriteFile(p, []byte(`{"id":"a","prompt":"p"}`+"\n"+`{"id":"b","prompt":"q"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		tasks, _, err := Load("jsonl", p, Options{})
		if err != nil || len(tasks) != 2 {
			t.Errorf("got %d tasks, %v; want 2", len(tasks), err)
		}
	})
	t.Run("open is jsonl", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "x.jsonl")
		if err := os.WriteFile(p, []byte(`{"id":"a","prompt":"p"}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		open, _, err := Load("open", p, Options{})
		jsonl, _, jerr := Load("jsonl", p, Options{})
		if err != nil || jerr != nil || len(open) != 1 || !reflect.DeepEqual(open, jsonl) {
			t.Errorf("open: %+v, %v; jsonl: %+v, %v; want the same one task", open, err, jsonl, jerr)
		}
	})
	t.Run("bbh truncated file", func(t *testing.T) {
		_, _, err := Load("bbh", "testdata/bad/bbh_truncated.json", Options{SkipBad: true})
		var re *RecordError
		if !errors.As(err, &re) || re.Line != 3 || !strings.Contains(re.Reason, "truncated") {
			t.Errorf("err = %v; want a truncated-JSON error at line 3 even with SkipBad", err)
		}
	})
	t.Run("math answer field wins", func(t *testing.T) {
		tasks, _ := load(t, "math", "bad/math_bad.jsonl", Options{SkipBad: true})
		if got := tasks[1].Answer; got != `\frac{1}{2}` {
			t.Errorf("answer = %q; want the answer field, not the boxed solution", got)
		}
	})
	t.Run("unknown format", func(t *testing.T) {
		if _, _, err := Load("csv", "testdata/gsm8k/test.jsonl", Options{}); err == nil || !strings.Contains(err.Error(), "unknown format") {
			t.Errorf("err = %v; want unknown format", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		if _, _, err := Load("gsm8k", "testdata/nope.jsonl", Options{}); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("err = %v; want ErrNotExist", err)
		}
	})
	t.Run("directory for jsonl", func(t *testing.T) {
		if _, _, err := Load("gsm8k", "testdata/gsm8k", Options{}); err == nil {
			t.Error("err = nil; want an error for a directory")
		}
	})
}

func TestSample(t *testing.T) {
	tasks := make([]delegate.Task, 100)
	for i := range tasks {
		tasks[i].ID = string(rune('a'+i%26)) + strings.Repeat("x", i/26)
	}
	a := Sample(tasks, 10, 7)
	b := Sample(tasks, 10, 7)
	c := Sample(tasks, 10, 8)
	if len(a) != 10 {
		t.Fatalf("len = %d; want 10", len(a))
	}
	seen := map[string]bool{}
	same := true
	for i := range a {
		if a[i].ID != b[i].ID {
			t.Errorf("same seed differs at %d: %s vs %s", i, a[i].ID, b[i].ID)
		}
		if seen[a[i].ID] {
			t.Errorf("%s drawn twice", a[i].ID)
		}
		seen[a[i].ID] = true
		same = same && a[i].ID == c[i].ID
	}
	if same {
		t.Error("seeds 7 and 8 gave the same sample")
	}
	if got := Sample(tasks, 500, 1); len(got) != 100 {
		t.Errorf("n > len: got %d; want all 100", len(got))
	}
	if got := Sample(tasks, 0, 1); len(got) != 0 {
		t.Errorf("n = 0: got %d; want none", len(got))
	}
	// Pinned: a change of generator would silently change every benchmark
	// sample, so it must show up here.
	var ids []string
	for _, t := range Sample(tasks, 5, 42) {
		ids = append(ids, t.ID)
	}
	if got, want := strings.Join(ids, ","), pinnedSample; got != want {
		t.Errorf("Sample(100, 5, 42) = %s; want %s", got, want)
	}
}

// pinnedSample is Sample(tasks, 5, 42) of TestSample.
const pinnedSample = "c,j,n,fxxx,ixxx"

func TestBuiltin(t *testing.T) {
	train, test := Builtin()
	if len(train) != 30 || len(test) != 10 {
		t.Fatalf("split %d/%d; want 30/10", len(train), len(test))
	}
	ids := map[string]bool{}
	prompts := map[string]bool{}
	for _, task := range append(append([]delegate.Task(nil), train...), test...) {
		if ids[task.ID] || prompts[task.Prompt] {
			t.Errorf("%s repeats an ID or prompt across or within parts", task.ID)
		}
		ids[task.ID], prompts[task.Prompt] = true, true
		if task.Dataset != "open" || task.Answer != "" || len(task.Prompt) < 40 {
			t.Errorf("task %+v: want Dataset open, no answer, a real prompt", task)
		}
	}
	again, _ := Builtin()
	for i := range train {
		if train[i].ID != again[i].ID {
			t.Fatalf("split not deterministic at %d", i)
		}
	}
}

func TestLoadRecordLimit(t *testing.T) {
	big := strings.Repeat("x", 200)
	tests := []struct {
		name, format, file, content string
		line                        int // of the large record
	}{
		{"gsm8k", "gsm8k", "a.jsonl", `{"question":"q","answer":"#### 1"}` + "\n" + `{"question":"` + big + `","answer":"#### 2"}` + "\n" + `{"question":"q","answer":"#### 3"}` + "\n", 2},
		{"gsm8k crlf", "gsm8k", "a.jsonl", `{"question":"q","answer":"#### 1"}` + "\r\n" + `{"question":"` + big + `","answer":"#### 2"}` + "\r\n" + `{"question":"q","answer":"#### 3"}`, 2},
		{"math last line", "math", "m.jsonl", `{"problem":"p","answer":"1"}` + "\n" + `{"problem":"q","answer":"2"}` + "\n" + `{"problem":"` + big + `","answer":"3"}`, 3},
		{"open", "jsonl", "o.jsonl", `{"prompt":"p"}` + "\n\n" + `{"prompt":"` + big + `"}` + "\n" + `{"prompt":"q"}` + "\n", 3},
		{"mmlu", "mmlu", "s_test.csv", "q,a,b,c,d,A\n\"" + big + "\",a,b,c,d,B\nq2,a,b,c,d,C\n", 2},
		{"bbh", "bbh", "t.json", "{\"examples\": [\n{\"input\": \"i\", \"target\": \"t\"},\n{\"input\": \"" + big + "\", \"target\": \"t\"},\n{\"input\": \"j\", \"target\": \"t\"}]}\n", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tt.file)
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := Load(tt.format, path, Options{MaxRecord: 100})
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("Load error = %v; want a *RecordError", err)
			}
			if re.File != path || re.Line != tt.line || !strings.Contains(re.Reason, "over the limit of 100 bytes") || !errors.Is(err, ErrTooLarge) {
				t.Errorf("error = %v; want %s:%d over the limit of 100 bytes", err, path, tt.line)
			}
			tasks, rep, err := Load(tt.format, path, Options{MaxRecord: 100, SkipBad: true})
			if err != nil || len(tasks) != 2 || len(rep.Skipped) != 1 || rep.Skipped[0].Line != tt.line {
				t.Errorf("SkipBad: %d tasks, skips %+v, %v; want 2 tasks and line %d skipped", len(tasks), rep.Skipped, err, tt.line)
			}
			if _, _, err := Load(tt.format, path, Options{MaxRecord: 1000}); err != nil {
				t.Errorf("limit 1000: %v; want the file accepted", err)
			}
		})
	}
}

func TestLoadRecordLimitDefault(t *testing.T) {
	// A line of exactly the limit passes, one byte more fails, with CRLF
	// endings not counted.
	rec := func(size int) string {
		pad := size - len(`{"prompt":""}`)
		return `{"prompt":"` + strings.Repeat("y", pad) + `"}`
	}
	path := filepath.Join(t.TempDir(), "big.jsonl")
	content := rec(DefaultMaxRecord) + "\r\n" + rec(DefaultMaxRecord+1) + "\r\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load("jsonl", path, Options{})
	want := fmt.Sprintf("%s:2: line is %d bytes, over the limit of %d bytes", path, DefaultMaxRecord+1, DefaultMaxRecord)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v; want it to contain %q", err, want)
	}
}
