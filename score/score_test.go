package score

import (
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
)

func TestNormalizeNumber(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"1,000", "1000", true},
		{"$6.00", "6", true},
		{"-3.50%", "-3.5", true},
		{"7 apples", "7", true},
		{"2,125", "2125", true}, // GSM8K test reference
		{"114,200", "114200", true},
		{"-10", "-10", true}, // GSM8K test reference
		{"0.5", "0.5", true},
		{".25", "0.25", true},
		{"3/4", "0.75", true},
		{"1/3", "1/3", true},
		{`\frac{3}{4}`, "0.75", true},
		{`-\dfrac{4}{3}`, "-4/3", true},
		{`\$15,\!000`, "15000", true}, // MATH boxed answer
		{`\$16,\!386.16`, "16386.16", true},
		{`44\%`, "44", true},
		{`118 \text{ dollars}`, "118", true},
		{"5 cm^2", "5", true},
		{"1/0", "", false},
		{"7 apples and 3 pears", "", false},
		{"1,-2", "", false},
		{"x", "", false},
		{"", "", false},
		{"12/25/2020", "", false},
		{"0." + strings.Repeat("0", 300) + "1", "", false}, // too long to be an answer
	}
	for _, tt := range tests {
		got, ok := NormalizeNumber(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("NormalizeNumber(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestExtractNumber(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"Janet sells 16 - 3 - 4 = 9 duck eggs and makes $18.", "18", true},
		{"The temperature fell to -5 degrees", "-5", true},
		{"16-3 = 13", "13", true},
		{"x-3", "3", true}, // a minus after a letter is subtraction
		{"costs $1,000.50 in total", "1000.5", true},
		{"it is 2.5 hours", "2.5", true},
		{"no digits", "", false},
	}
	for _, tt := range tests {
		got, ok := ExtractNumber(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ExtractNumber(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// gsm8kRefs are reference answers from /work/shared/datasets/gsm8k as the
// loader returns them (commas stripped), with answers as models write them.
var gsm8kRefs = []struct{ ref, resp string }{
	{"18", "She makes 9 * 2 = $<<9*2=18>>18 every day.\n#### 18"},
	{"-10", "The change is 10 - 20 = -10.\nThe answer is -10."},
	{"-3", "So the final temperature difference is \u22123 degrees. The answer is \u22123."},
	{"2125", "Total = 1,000 + 1,125 = 2,125. The answer is 2,125."},
	{"114200", "Final answer: $114,200"},
	{"276000", `\boxed{276,000}`},
	{"5600", "That is 5600 dollars in total."},
	{"1600", "The answer is 1,600.00"},
	{"70000", "The profit is $70,000."},
	{"3", "It takes 2 + 2/2 = 3 bolts. The answer is 3 bolts."},
}

func TestNumericRealAnswers(t *testing.T) {
	for _, tt := range gsm8kRefs {
		if got := Numeric(tt.resp, tt.ref); !got.Correct {
			t.Errorf("Numeric(%q, %q) = %+v; want correct", tt.resp, tt.ref, got)
		}
		// Off by a sign or a factor of ten must fail.
		for _, wrong := range []string{"-" + tt.ref, tt.ref + "0"} {
			if got := Numeric(tt.resp, wrong); got.Correct {
				t.Errorf("Numeric(%q, %q) = %+v; want incorrect", tt.resp, wrong, got)
			}
		}
	}
}

func TestNumeric(t *testing.T) {
	tests := []struct {
		name, resp, ref string
		correct, found  bool
		method          string
	}{
		{"gsm8k first item", "She makes 9 * 2 = $18 every day.\n#### 18", "18", true, true, "####"},
		{"boxed beats later numbers", `So the answer is $\boxed{18}$. Check: 9*2=18, 16-3-4=9.`, "18", true, true, "boxed"},
		{"answer is", "Total = 5 + 3 = 8. The answer is 8 apples.", "8", true, true, "answer is"},
		{"answer is, first number after", "The answer is 70,000, since 200,000 - 130,000 = 70,000.", "70000", true, true, "answer is"},
		{"thousands in reference", "The answer is 2125.", "2,125", true, true, "answer is"},
		{"thousands in response", "Final answer: 114,200", "114200", true, true, "final answer"},
		{"negative kept", "The change is -10 dollars, so the answer is -10.", "-10", true, true, "answer is"},
		{"negative wrong sign", "The answer is 3.", "-3", false, true, "answer is"},
		{"decimal equal", "The answer is $6.00.", "6", true, true, "answer is"},
		{"decimal not digits", "The answer is 2.5", "5", false, true, "answer is"},
		{"percent", "The answer is 25%.", "25", true, true, "answer is"},
		{"last number fallback", "First 3 then 4, giving 7", "7", true, true, "last number"},
		{"last number wrong", "First 3 then 4, giving 7", "12", false, true, "last number"},
		{"boxed latex frac", `\boxed{\frac{3}{2}}`, "1.5", true, true, "boxed"},
		{"boxed with text", `\boxed{18\text{ dollars}}`, "18", true, true, "boxed"},
		{"no number", "I cannot solve this.", "5", false, false, ""},
		{"empty", "", "5", false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Numeric(tt.resp, tt.ref)
			if got.Correct != tt.correct || got.Found != tt.found || got.Method != tt.method {
				t.Errorf("Numeric(%q, %q) = %+v; want correct %v found %v method %q", tt.resp, tt.ref, got, tt.correct, tt.found, tt.method)
			}
		})
	}
}

// mathRefs are reference answers from the shared MATH files, as written there.
// Each has a model answer that must match it and one that must not.
var mathRefs = []struct{ ref, same, other string }{
	{`\left( 3, \frac{\pi}{2} \right)`, `(3,\frac{\pi}{2})`, `(3,\frac{\pi}{3})`},
	{`\frac{14}{3}`, `\dfrac{14}{3}`, `\frac{14}{5}`},
	{`\frac{14}{3}`, `14/3`, `4.67`},
	{`90^\circ`, `90`, `180^\circ`},
	{`90^\circ`, `90^{\circ}`, `45`},
	{`145^\circ`, `145 degrees`, `35`},
	{`3\sqrt{13}`, `3\sqrt{13}`, `3\sqrt{12}`},
	{`11\sqrt2`, `11\sqrt{2}`, `11\sqrt{3}`},
	{`\frac43`, `\frac{4}{3}`, `\frac{3}{4}`},
	{`\frac{3}{56}`, `\tfrac{3}{56}`, `\frac{56}{3}`},
	{`1.25`, `\frac{5}{4}`, `1.2`},
	{`0.15`, `\frac{3}{20}`, `15`},
	{`-50`, `-50`, `50`},
	{`-\frac{\pi}{6}`, `-\dfrac{\pi}{6}`, `\frac{\pi}{6}`},
	{`x=5`, `5`, `6`},
	{`1,-2`, `-2, 1`, `1, 2`},
	{`3, 5, 7`, `7,5,3`, `3,5`},
	{`(6,31,-1)`, `(6, 31, -1)`, `(31,6,-1)`},
	{`(3,4]`, `(3, 4]`, `(3,4)`},
	{`(-2,1)`, `\left(-2,1\right)`, `[-2,1]`},
	{`[1,9]`, `[1, 9]`, `(1,9)`},
	{`(-\infty,0]\cup[4,\infty)`, `(-\infty, 0] \cup [4, \infty)`, `(-\infty,0)\cup[4,\infty)`},
	{`x \in [-2,7]`, `[-2,7]`, `(-2,7)`},
	{`\text{Evelyn}`, `Evelyn`, `Bob`},
	{`\text{east}`, `\text{East}`, `west`},
	{`6 - 5i`, `6-5i`, `6+5i`},
	{`52_8`, `52_8`, `52`},
	{`\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}`, `\begin{pmatrix}-1/3\\2/3\\5/3\end{pmatrix}`, `\begin{pmatrix}1/3\\2/3\\5/3\end{pmatrix}`},
	{`\$15,\!000`, `15000`, `1500`},
	{`44\%`, `44`, `0.44`},
	{`575\text{ students}`, `575`, `57`},
	{`440\text{ cm}^2`, `440`, `44`},
	{`65 \text{ children tickets }`, `65`, `56`},
	{`\frac{\sqrt6}3`, `\frac{\sqrt{6}}{3}`, `\frac{\sqrt{3}}{6}`},
	{`10\sqrt 2`, `10\sqrt{2}`, `10`},
	{`2k+2`, `2k + 2`, `2k`},
	{`1 \pm \sqrt{19}`, `1\pm\sqrt{19}`, `1+\sqrt{19}`},
}

func TestMathRealAnswers(t *testing.T) {
	for _, tt := range mathRefs {
		t.Run(tt.ref, func(t *testing.T) {
			if got := Math(`Hence $\boxed{`+tt.same+`}$.`, tt.ref); !got.Correct {
				t.Errorf("Math(boxed %q, %q) = %+v; want correct", tt.same, tt.ref, got)
			}
			if got := Math(`Hence $\boxed{`+tt.other+`}$.`, tt.ref); got.Correct {
				t.Errorf("Math(boxed %q, %q) = %+v; want incorrect", tt.other, tt.ref, got)
			}
		})
	}
}

func TestMathExtraction(t *testing.T) {
	tests := []struct {
		name, resp, ref string
		correct         bool
		method          string
	}{
		{"nested boxed", `$\boxed{\frac{\sqrt{3}}{3}}$ is it`, `\frac{\sqrt{3}}{3}`, true, "boxed"},
		{"last box wins", `first \boxed{2}, corrected: \boxed{3}`, "3", true, "boxed"},
		{"answer is", "Therefore, the answer is $\\frac{1}{2}$.", "0.5", true, "answer is"},
		{"final answer", "Final Answer: 42", "42", true, "final answer"},
		{"last number", "we find it equals 17", "17", true, "last number"},
		{"matrix across lines", "The answer is \\begin{pmatrix} 1 \\\\\n 2 \\end{pmatrix}", `\begin{pmatrix} 1 \\ 2 \end{pmatrix}`, true, "answer is"},
		{"fbox", `\fbox{7}`, "7", true, "boxed"},
		{"minerva format", "Final Answer: The final answer is $\\frac{1}{2}$. I hope it is correct.", "0.5", true, "answer is"},
		{"sentence after answer", "So the answer is 2.5. Let me double check: yes.", `\frac52`, true, "answer is"},
		{"display math", `The answer is \[x^2+1\] as shown.`, "x^2+1", true, "answer is"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Math(tt.resp, tt.ref)
			if got.Correct != tt.correct || got.Method != tt.method {
				t.Errorf("Math(%q, %q) = %+v; want correct %v method %q", tt.resp, tt.ref, got, tt.correct, tt.method)
			}
		})
	}
	if got := Math("no answer at all", "3"); got.Found || got.Correct {
		t.Errorf("Math without answer = %+v; want not found", got)
	}
}

func TestChoice(t *testing.T) {
	tests := []struct {
		name, resp, ref string
		want            string
		method          string
	}{
		{"paren", "I think (B) is right.", "B", "B", "letter"},
		{"line letter", "B) Because the field has degree 4.", "B", "B", "line letter"},
		{"line dot", "Reasoning...\nC. 24", "C", "C", "line letter"},
		{"answer is", "The answer is C.", "C", "C", "answer is"},
		{"answer colon", "Answer: D", "D", "D", "answer is"},
		{"bold answer", "**Answer: (A)**", "A", "A", "answer is"},
		{"lone letter", "B", "B", "B", "lone letter"},
		{"lone letter punct", " (d). ", "D", "D", "lone letter"},
		{"boxed", `$\boxed{C}$`, "C", "C", "boxed"},
		{"boxed text", `\boxed{\text{A}}`, "A", "A", "boxed"},
		{"last statement wins", "Option (A) looks tempting and (B) too, but the answer is C. Not A.", "C", "C", "answer is"},
		{"revised statement", "The answer is A. Wait, re-checking: the correct answer is B", "B", "B", "answer is"},
		{"wrong", "The answer is A", "B", "A", "answer is"},
		{"reference in parens", "Answer: B", "(B)", "B", "answer is"},
		{"none", "I am not sure.", "A", "", ""},
		{"final letter", "Options A and B fail on the boundary case. Therefore, D.", "D", "D", "final letter"},
		{"word ending is no letter", "It is hard to say. I would go with a guess.", "A", "", ""},
		{"vitamin is no letter", "The deficiency is of vitamin D.", "D", "", ""},
		{"article is not a letter", "The answer is a matter of definitions; I pick (C)", "C", "C", "answer is"},
		{"article then paren", "The answer is a matter of taste, but (C) fits.", "C", "C", "letter"},
		{"lower case in parens", "the answer is (d)", "D", "D", "answer is"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Choice(tt.resp, tt.ref)
			if got.Extracted != tt.want || got.Method != tt.method || got.Correct != (tt.want == strings.Trim(tt.ref, "()")) {
				t.Errorf("Choice(%q, %q) = %+v; want %q by %q", tt.resp, tt.ref, got, tt.want, tt.method)
			}
		})
	}
}

func TestBBH(t *testing.T) {
	// Targets are real BBH targets from /work/shared/datasets/bbh/bbh.
	tests := []struct {
		task, resp, target string
		correct            bool
	}{
		{"date_understanding", "Let's think step by step. ... So the answer is (B).", "(B)", true},
		{"date_understanding", "So the answer is B.", "(B)", true},
		{"date_understanding", "So the answer is B) 12/24/1937", "(B)", true},
		{"date_understanding", "So the answer is (A) 12/24/1937.", "(B)", false},
		{"geometric_shapes", "(J)", "(J)", true},
		{"reasoning_about_colored_objects", "the answer is (Q).", "(Q)", true},
		{"boolean_expressions", "So the answer is True.", "True", true},
		{"boolean_expressions", "So the answer is False.", "True", false},
		{"causal_judgement", "So the answer is **No**.", "No", true},
		{"formal_fallacies", "So the answer is invalid.", "valid", false},
		{"formal_fallacies", "So the answer is valid.", "valid", true},
		{"sports_understanding", "So the answer is yes.", "yes", true},
		{"web_of_lies", "Yes", "Yes", true},
		{"multistep_arithmetic_two", "So the answer is -11520.", "-11520", true},
		{"multistep_arithmetic_two", "So the answer is 11520.", "-11520", false},
		{"multistep_arithmetic_two", "So the answer is -50.", "-50", true},
		{"object_counting", "So the answer is 15.", "15", true},
		{"object_counting", "So the answer is fifteen.", "15", false},
		{"word_sorting", "So the answer is syndrome therefrom.", "syndrome therefrom", true},
		{"word_sorting", "So the answer is: artillery, bainite, doris, fda, harm, incongruous, monkey, prosody, vegetate, vivian", "artillery bainite doris fda harm incongruous monkey prosody vegetate vivian", true},
		{"word_sorting", "So the answer is therefrom syndrome.", "syndrome therefrom", false},
		{"word_sorting", "So the answer is syndrome therefrom. Both words are sorted.", "syndrome therefrom", true},
		{"navigate", "So the answer is No. Moving back to the start is impossible.", "No", true},
		{"dyck_languages", "So the answer is ] ] >.", "] ] >", true},
		{"dyck_languages", "So the answer is ]]>", "] ] >", true},
		{"dyck_languages", "So the answer is ] >.", "] ] >", false},
		{"unknown_task", "the answer is (C)", "(C)", true},
		{"unknown_task", "the answer is Paris.", "paris", true},
	}
	for _, tt := range tests {
		t.Run(tt.task, func(t *testing.T) {
			got := BBH(tt.task, tt.resp, tt.target)
			if got.Correct != tt.correct {
				t.Errorf("BBH(%q, %q, %q) = %+v; want correct %v", tt.task, tt.resp, tt.target, got, tt.correct)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	tests := []struct {
		task    delegate.Task
		resp    string
		correct bool
	}{
		{delegate.Task{ID: "g", Dataset: "gsm8k", Answer: "18"}, "#### 18", true},
		{delegate.Task{ID: "m", Dataset: "math", Answer: `\frac{1}{2}`}, `\boxed{0.5}`, true},
		{delegate.Task{ID: "u", Dataset: "mmlu", Answer: "B"}, "The answer is (B)", true},
		{delegate.Task{ID: "b", Dataset: "bbh", Subject: "navigate", Answer: "No"}, "So the answer is Yes.", false},
	}
	for _, tt := range tests {
		got, err := Verify(tt.task, tt.resp)
		if err != nil || got.Correct != tt.correct {
			t.Errorf("Verify(%s) = %+v, %v; want correct %v", tt.task.ID, got, err, tt.correct)
		}
	}
	if _, err := Verify(delegate.Task{ID: "open/1", Dataset: "open"}, "text"); err == nil || !strings.Contains(err.Error(), `"open"`) {
		t.Errorf("Verify(open) error = %v; want one naming the dataset", err)
	}
}
