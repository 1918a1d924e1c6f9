package strategy

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParsePlan(t *testing.T) {
	three := []string{"Find the facts.", "Compare the options.", "Write the summary."}
	tests := []struct {
		name   string
		text   string
		want   Plan
		reason PlanReason
		check  func(t *testing.T, e *PlanError)
	}{
		{
			name: "end_subtask spelling",
			text: planText("Split it.", "<|end_subtask|>", three...),
			want: Plan{Reasoning: "Split it.", Subtasks: three},
		},
		{
			name: "slash end_subtask spelling (what the reference prompt asked for)",
			text: planText("Split it.", "</|end_subtask|>", three...),
			want: Plan{Reasoning: "Split it.", Subtasks: three},
		},
		{
			name: "slash subtask spelling",
			text: planText("Split it.", "</|subtask|>", three...),
			want: Plan{Reasoning: "Split it.", Subtasks: three},
		},
		{
			name: "mixed spellings and end_reasoning",
			text: "intro <|reasoning|>R<|end_reasoning|> <|subtask|>a<|end_subtask|><|subtask|>b</|subtask|>\n<|subtask|>c</|end_subtask|> trailing",
			want: Plan{Reasoning: "R", Subtasks: []string{"a", "b", "c"}},
		},
		{
			name: "subtask tags mentioned inside the reasoning are skipped",
			text: "<|reasoning|>I will write <|subtask|>x<|end_subtask|> blocks.</|reasoning|>" + strings.Repeat("<|subtask|>s<|end_subtask|>", 3),
			want: Plan{Reasoning: "I will write <|subtask|>x<|end_subtask|> blocks.", Subtasks: []string{"s", "s", "s"}},
		},
		{
			name: "five subtasks is the maximum",
			text: planText("R", "<|end_subtask|>", "1", "2", "3", "4", "5"),
			want: Plan{Reasoning: "R", Subtasks: []string{"1", "2", "3", "4", "5"}},
		},
		{name: "no reasoning", text: strings.Repeat("<|subtask|>s<|end_subtask|>", 3), reason: PlanNoReasoning},
		{name: "empty reasoning", text: "<|reasoning|>  \n</|reasoning|>" + strings.Repeat("<|subtask|>s<|end_subtask|>", 3), reason: PlanNoReasoning},
		{
			name: "unclosed reasoning", text: "ab<|reasoning|>thinking forever", reason: PlanUnclosedTag,
			check: func(t *testing.T, e *PlanError) {
				if e.Tag != ReasoningOpen || e.Offset != 2 {
					t.Errorf("unclosed %q at %d, want %q at 2", e.Tag, e.Offset, ReasoningOpen)
				}
			},
		},
		{
			name: "unclosed last subtask", text: "<|reasoning|>R</|reasoning|><|subtask|>a<|end_subtask|><|subtask|>b", reason: PlanUnclosedTag,
			check: func(t *testing.T, e *PlanError) {
				if want := strings.LastIndex("<|reasoning|>R</|reasoning|><|subtask|>a<|end_subtask|><|subtask|>b", SubtaskOpen); e.Offset != want {
					t.Errorf("offset = %d, want %d", e.Offset, want)
				}
			},
		},
		{
			name: "subtask opened inside another", text: "<|reasoning|>R</|reasoning|><|subtask|>a<|subtask|>b<|end_subtask|><|subtask|>c<|end_subtask|>", reason: PlanUnclosedTag,
			check: func(t *testing.T, e *PlanError) {
				if e.Offset != len("<|reasoning|>R</|reasoning|>") {
					t.Errorf("offset = %d, want %d", e.Offset, len("<|reasoning|>R</|reasoning|>"))
				}
			},
		},
		{
			name: "empty subtask", text: planText("R", "<|end_subtask|>", "a", " \n ", "c"), reason: PlanEmptySubtask,
			check: func(t *testing.T, e *PlanError) {
				if e.Index != 2 {
					t.Errorf("empty subtask index = %d, want 2", e.Index)
				}
			},
		},
		{
			name: "too few", text: planText("R", "<|end_subtask|>", "a", "b"), reason: PlanTooFewSubtasks,
			check: func(t *testing.T, e *PlanError) {
				if e.Count != 2 || e.Min != 3 {
					t.Errorf("count %d min %d, want 2 and 3", e.Count, e.Min)
				}
			},
		},
		{
			name: "too many", text: planText("R", "<|end_subtask|>", "1", "2", "3", "4", "5", "6"), reason: PlanTooManySubtasks,
			check: func(t *testing.T, e *PlanError) {
				if e.Count != 6 || e.Max != 5 {
					t.Errorf("count %d max %d, want 6 and 5", e.Count, e.Max)
				}
				if !strings.Contains(e.Error(), "6 subtasks, want at most 5") {
					t.Errorf("message %q does not state the counts", e.Error())
				}
			},
		},
		{name: "no subtasks at all", text: "<|reasoning|>R</|reasoning|> just prose", reason: PlanTooFewSubtasks},
		{name: "empty text", text: "", reason: PlanNoReasoning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePlan(tt.text, 3, 5)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("ParsePlan: %v", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("ParsePlan = %+v, want %+v", got, tt.want)
				}
				return
			}
			var pe *PlanError
			if !errors.As(err, &pe) {
				t.Fatalf("ParsePlan error = %v, want a *PlanError", err)
			}
			if pe.Reason != tt.reason {
				t.Errorf("reason = %q (%v), want %q", pe.Reason, err, tt.reason)
			}
			if !strings.HasPrefix(err.Error(), "plan "+string(tt.reason)+": ") {
				t.Errorf("message %q does not start with the reason", err.Error())
			}
			if tt.check != nil {
				tt.check(t, pe)
			}
		})
	}
}

func TestParsePlanBounds(t *testing.T) {
	text := planText("R", "<|end_subtask|>", "a", "b")
	if _, err := ParsePlan(text, 1, 2); err != nil {
		t.Errorf("ParsePlan(2 subtasks, 1..2) = %v, want nil", err)
	}
	if _, err := ParsePlan(text, 3, 3); err == nil {
		t.Error("ParsePlan(2 subtasks, 3..3) = nil, want too few")
	}
}

func FuzzParsePlan(f *testing.F) {
	seeds := []string{
		"",
		planText("R", "<|end_subtask|>", "a", "b", "c"),
		planText("R", "</|end_subtask|>", "a", "b", "c", "d"),
		planText("R", "</|subtask|>", "a", "b", "c", "d", "e", "f"),
		"<|reasoning|>R<|end_reasoning|><|subtask|><|subtask|>",
		"<|reasoning|><|subtask|></|reasoning|><|subtask|>x</|subtask|>",
		"<|subtask|>a<|end_subtask|><|reasoning|>r</|reasoning|><|subtask|>b<|end_subtask|><|subtask|>c<|end_subtask|>",
		"<|reasoning|>\xff\xfe</|reasoning|><|subtask|>\x00<|end_subtask|>",
	}
	for _, s := range seeds {
		f.Add(s, 3, 5)
	}
	f.Add("<|reasoning|>r</|reasoning|>", 0, 0)
	f.Add("<|reasoning|>r</|reasoning|><|subtask|>a</|subtask|>", 5, 1)
	f.Fuzz(func(t *testing.T, text string, min, max int) {
		p, err := ParsePlan(text, min, max)
		if err != nil {
			var pe *PlanError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *PlanError", err)
			}
			if pe.Reason == "" || err.Error() == "" {
				t.Fatalf("error without a reason: %#v", pe)
			}
			return
		}
		if n := len(p.Subtasks); n < min || n > max {
			t.Fatalf("%d subtasks accepted outside [%d, %d]", n, min, max)
		}
		if strings.TrimSpace(p.Reasoning) == "" || p.Reasoning != strings.TrimSpace(p.Reasoning) {
			t.Fatalf("reasoning %q is empty or untrimmed", p.Reasoning)
		}
		if !strings.Contains(text, p.Reasoning) {
			t.Fatalf("reasoning %q is not in the text", p.Reasoning)
		}
		for i, s := range p.Subtasks {
			if s == "" || s != strings.TrimSpace(s) {
				t.Fatalf("subtask %d = %q is empty or untrimmed", i+1, s)
			}
			if !strings.Contains(text, s) {
				t.Fatalf("subtask %d = %q is not in the text", i+1, s)
			}
		}
	})
}
