package score

import "testing"

// fuzzSeeds are realistic model outputs, awkward ones included.
var fuzzSeeds = []string{
	"Janet sells 16 - 3 - 4 = 9 duck eggs a day.\n#### 18",
	`The answer is $\boxed{\left( 3, \frac{\pi}{2} \right)}$.`,
	"The answer is -1,000.50 dollars",
	`\boxed{\frac{\sqrt{3}}{2}`,
	`\boxed{\boxed{}}`,
	`\fbox `,
	"So the answer is (B).",
	"Answer: D",
	"So the answer is ] ] >.",
	"So the answer is artillery bainite doris",
	`$x \in [-2,7]$`,
	"1/0 = ?",
	"the answer is 0.000000000000000000000001%",
	"",
	"\\",
	"{{{{}}",
}

func FuzzNumeric(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := Numeric(s, "18")
		if !r.Found {
			return
		}
		if n, ok := NormalizeNumber(r.Extracted); !ok || n != r.Extracted {
			t.Fatalf("Numeric(%q) extracted %q, which normalises to %q, %v", s, r.Extracted, n, ok)
		}
		if again := Numeric(s, r.Extracted); !again.Correct {
			t.Errorf("Numeric(%q, %q) = %+v; the extracted value must verify against itself", s, r.Extracted, again)
		}
	})
}

func FuzzExtractNumber(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ExtractNumber(s)
		if !ok {
			return
		}
		if m, ok := NormalizeNumber(n); !ok || m != n {
			t.Errorf("ExtractNumber(%q) = %q, not canonical (NormalizeNumber gives %q, %v)", s, n, m, ok)
		}
	})
}

func FuzzMath(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := Math(s, "3")
		if r.Found {
			if again := Math(s, r.Extracted); !again.Correct {
				t.Errorf("Math(%q, %q) = %+v; the extracted value must verify against itself", s, r.Extracted, again)
			}
		}
	})
}

func FuzzChoice(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := Choice(s, "A")
		if !r.Found {
			return
		}
		if len(r.Extracted) != 1 || r.Extracted < "A" || r.Extracted > "D" {
			t.Fatalf("Choice(%q) extracted %q; want a letter A-D", s, r.Extracted)
		}
		if again := Choice(s, r.Extracted); !again.Correct {
			t.Errorf("Choice(%q, %q) = %+v; the extracted value must verify against itself", s, r.Extracted, again)
		}
	})
}

func FuzzBBH(f *testing.F) {
	tasks := []string{"date_understanding", "boolean_expressions", "multistep_arithmetic_two", "word_sorting", "dyck_languages", "unknown"}
	targets := []string{"(B)", "True", "-50", "syndrome therefrom", "] ] >", "x"}
	for i, s := range fuzzSeeds {
		f.Add(i%len(tasks), s)
	}
	f.Fuzz(func(t *testing.T, k int, s string) {
		if k < 0 {
			k = -k
		}
		task := tasks[k%len(tasks)]
		r := BBH(task, s, targets[k%len(tasks)])
		if r.Found {
			if again := BBH(task, s, r.Extracted); !again.Correct {
				t.Errorf("BBH(%q, %q, %q) = %+v; the extracted value must verify against itself", task, s, r.Extracted, again)
			}
		}
	})
}
