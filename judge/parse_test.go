package judge

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestParseScores(t *testing.T) {
	tests := []struct {
		name string
		text string
		a, b float64
	}{
		{"plain", "Score A: 85\nReasoning A: good.\nScore B: 70\nReasoning B: fine.", 85, 70},
		{"bold label", "**Score A:** 85/100\n**Reasoning A:** ok\n**Score B:** 60/100", 85, 60},
		{"equals and decimal", "Score A = 85.5\nScore B = 0", 85.5, 0},
		{"bare labels", "A: 85\nB: 90", 85, 90},
		{"any order", "Reasoning B: meh\nScore B: 40\nScore A: 95\nReasoning A: great", 95, 40},
		{"extra text", "Here is my evaluation.\n\nScore A: 72\nReasoning A: decent.\n\nScore B: 88\nReasoning B: better.\nOverall, B wins.", 72, 88},
		{"headings and lists", "### Score A: 50\n- Score B: 100", 50, 100},
		{"code and quotes", "> `Score A: 10`\n> `Score B: 20`", 10, 20},
		{"same line", "Score A: 81, Score B: 79", 81, 79},
		{"lowercase", "score a: 33\nscore b: 44", 33, 44},
		{"answer form", "Answer A score: 64\nResponse B score: 46", 64, 46},
		{"score for answer", "Score for Answer A: 12\nScore for Answer B: 21", 12, 21},
		{"parenthesised", "Score (A): 77\nScore (B): 66", 77, 66},
		{"dash", "Score A - 55\nScore B - 45", 55, 45},
		{"out of 100", "Score A: 90 out of 100\nScore B: 80 out of 100", 90, 80},
		{"bracketed", "Score A: [75]\nScore B: [80]", 75, 80},
		{"last wins", "Score A: 50\nScore B: 50\nOn reflection:\nScore A: 60\nScore B: 40", 60, 40},
		{"strong beats bare", "A: 3 steps were missing\nScore A: 70\nScore B: 65", 70, 65},
		{"reasoning with numbers ignored", "Score A: 70\nReasoning A: covers 3 of 4 parts, 20 points off.\nScore B: 65\nReasoning B: 2 errors.", 70, 65},
		{"crlf", "Score A: 1\r\nScore B: 2\r\n", 1, 2},
		{"bounds", "Score A: 0\nScore B: 100", 0, 100},
		{"bold number", "Score A: **85**\nScore B: *70*", 85, 70},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b, err := ParseScores(tt.text)
			if err != nil {
				t.Fatalf("ParseScores(%q): %v", tt.text, err)
			}
			if a != tt.a || b != tt.b {
				t.Errorf("ParseScores(%q) = %v, %v; want %v, %v", tt.text, a, b, tt.a, tt.b)
			}
		})
	}
}

func TestParseScoresErrors(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		missing []string
		invalid string // substring of the one invalid entry, "" for none
	}{
		{"empty", "", []string{"Score A", "Score B"}, ""},
		{"refusal", "I'm sorry, but I can't evaluate these responses.", []string{"Score A", "Score B"}, ""},
		{"garbage", "\x00\x01 lorem ipsum }{ 42", []string{"Score A", "Score B"}, ""},
		{"missing B", "Score A: 80\nReasoning A: fine\nReasoning B: also fine", []string{"Score B"}, ""},
		{"missing A", "Score B: 80", []string{"Score A"}, ""},
		{"placeholder", "Score A: [score]\nScore B: N/A", []string{"Score A", "Score B"}, ""},
		{"above range", "Score A: 150\nScore B: 20", nil, "Score A: 150 is outside 0..100"},
		{"negative", "Score A: 20\nScore B: -5", nil, "Score B: -5 is outside 0..100"},
		{"other scale", "Score A: 8/10\nScore B: 70", nil, "Score A: 8 out of 10"},
		{"lowercase bare label", "a: 80\nb: 70", []string{"Score A", "Score B"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ParseScores(tt.text)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("ParseScores(%q) error = %v, want *ParseError", tt.text, err)
			}
			if !reflect.DeepEqual(pe.Missing, tt.missing) {
				t.Errorf("Missing = %q, want %q", pe.Missing, tt.missing)
			}
			switch {
			case tt.invalid == "" && len(pe.Invalid) != 0:
				t.Errorf("Invalid = %q, want none", pe.Invalid)
			case tt.invalid != "" && (len(pe.Invalid) != 1 || !strings.Contains(pe.Invalid[0], tt.invalid)):
				t.Errorf("Invalid = %q, want one containing %q", pe.Invalid, tt.invalid)
			}
			if !strings.Contains(err.Error(), "parse judge scores") {
				t.Errorf("error %q does not say what failed", err)
			}
		})
	}
}

func TestParseScore(t *testing.T) {
	tests := []struct {
		text    string
		want    float64
		wantErr string
	}{
		{"Score: 85\nReasoning: clear.", 85, ""},
		{"**Score:** 85/100", 85, ""},
		{"Rating = 72.5", 72.5, ""},
		{"Overall score: 40\nReasoning: thin.\nFinal score: 45", 45, ""},
		{"Reasoning: good\n\nScore: 0", 0, ""},
		{"I refuse.", 0, "missing Score"},
		{"Score A: 80\nScore B: 70", 0, "missing Score"},
		{"Score: 101", 0, "outside 0..100"},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := ParseScore(tt.text)
			if tt.wantErr != "" {
				var pe *ParseError
				if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseScore(%q) error = %v, want *ParseError containing %q", tt.text, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseScore(%q) = %v, %v; want %v, nil", tt.text, got, err, tt.want)
			}
		})
	}
}

func FuzzParseScores(f *testing.F) {
	seeds := []string{
		"", "Score A: 85\nScore B: 70", "**Score A:** 85/100", "A: 1\nB: 2", "Score A: 150",
		"Score A = 85.5\nReasoning A: x\nScore B = 9", "score b: 1e9", "Score A: 99999999999999999999999",
		"Score A: 8/0", "Score (B) - 3", "Answer A's score: 4", "\xff\xfe Score A:\n",
	}
	for _, s := range seeds {
		f.Add(s, uint8(50), uint8(60))
	}
	f.Fuzz(func(t *testing.T, text string, a, b uint8) {
		ga, gb, err := ParseScores(text)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("ParseScores(%q) error %T, want *ParseError", text, err)
			}
			if len(pe.Missing)+len(pe.Invalid) == 0 {
				t.Fatalf("ParseScores(%q): empty ParseError", text)
			}
		} else {
			for _, v := range []float64{ga, gb} {
				if math.IsNaN(v) || v < 0 || v > 100 {
					t.Fatalf("ParseScores(%q) = %v, %v: outside 0..100", text, ga, gb)
				}
			}
		}
		// Well-formed lines after any text are read exactly: the last
		// labelled score wins.
		wa, wb := float64(a%101), float64(b%101)
		text2 := text + fmt.Sprintf("\nScore A: %v\nReasoning A: fine\nScore B: %v\n", wa, wb)
		ga, gb, err = ParseScores(text2)
		if err != nil || ga != wa || gb != wb {
			t.Fatalf("ParseScores(%q) = %v, %v, %v; want %v, %v, nil", text2, ga, gb, err, wa, wb)
		}
	})
}

func FuzzParseScore(f *testing.F) {
	for _, s := range []string{"", "Score: 85", "**Rating:** 85/100", "Score: 101", "Score A: 1\nScore: 2", "score = -0", "Final score is 99.99"} {
		f.Add(s, uint8(7))
	}
	f.Fuzz(func(t *testing.T, text string, n uint8) {
		got, err := ParseScore(text)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || len(pe.Missing)+len(pe.Invalid) == 0 {
				t.Fatalf("ParseScore(%q) error %v, want a non-empty *ParseError", text, err)
			}
		} else if math.IsNaN(got) || got < 0 || got > 100 {
			t.Fatalf("ParseScore(%q) = %v, outside 0..100", text, got)
		}
		want := float64(n % 101)
		text2 := text + fmt.Sprintf("\nScore: %v\nReasoning: ok\n", want)
		if got, err := ParseScore(text2); err != nil || got != want {
			t.Fatalf("ParseScore(%q) = %v, %v; want %v", text2, got, err, want)
		}
	})
}

func BenchmarkParseScores(b *testing.B) {
	text := "Here is my evaluation of the two answers.\n\n**Score A:** 85/100\n**Reasoning A:** Covers every part of the request with accurate detail, though the second section is long.\n\n**Score B:** 62/100\n**Reasoning B:** Relevant but misses the budget constraint and has one factual slip.\n"
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, _, err := ParseScores(text); err != nil {
			b.Fatal(err)
		}
	}
}
