package dataset

import (
	"bytes"
	"testing"

	"github.com/delegatelab/delegate"
)

// FuzzLoaders feeds arbitrary bytes to every format's parser.
// No parser may panic, and under SkipBad every record is a task or a skip.
func FuzzLoaders(f *testing.F) {
	f.Add(0, []byte(`{"question": "q", "answer": "a\n#### 1,000"}`+"\n"))
	f.Add(1, []byte(`{"problem": "p", "solution": "\\boxed{\\frac{1}{2}}", "type": "Algebra"}`))
	f.Add(2, []byte("q,a,b,c,d,A\r\n\"multi\nline\",a,b,c,d,E\n"))
	f.Add(3, []byte(`{"canary": "x", "examples": [{"input": "i", "target": "(A)"}, {"input": 3}]}`))
	f.Add(4, []byte(`{"id": "a", "prompt": "p"}`+"\n"+`{"id": "a", "prompt": "p"}`))
	f.Add(3, []byte(`{"examples": [`))
	f.Fuzz(func(t *testing.T, k int, data []byte) {
		for _, skip := range []bool{false, true} {
			rep := &Report{}
			l := &loader{file: "fuzz", opt: Options{SkipBad: skip}, rep: rep}
			var tasks []delegate.Task
			var err error
			switch uint(k) % 5 {
			case 0:
				tasks, err = l.gsm8k(bytes.NewReader(data))
			case 1:
				tasks, err = l.math(bytes.NewReader(data))
			case 2:
				tasks, err = l.mmlu(data)
			case 3:
				tasks, err = l.bbh(data)
			case 4:
				tasks, err = l.open(bytes.NewReader(data))
			}
			if err == nil {
				for _, task := range tasks {
					if task.ID == "" || task.Prompt == "" {
						t.Errorf("task %+v lacks ID or prompt", task)
					}
				}
			}
			if !skip && err == nil && len(rep.Skipped) > 0 {
				t.Errorf("skips %v recorded without SkipBad", rep.Skipped)
			}
		}
	})
}
