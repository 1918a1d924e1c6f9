package main

import (
	"github.com/delegatelab/delegate/perf/internal/runc"

	"bytes"
	"strings"
	"testing"
)

func TestParseAchieved(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		wantErr string
	}{
		{"achieved tok/s: 5795.275591\n", 5795.275591, ""},
		{"some text\nachieved tok/s: 12\n", 12, ""},
		{"achieved tok/s: inf\n", 0, "not a usable rate"},
		{"segfault\n", 0, "no \"achieved tok/s\" line"},
	}
	for _, tt := range tests {
		got, err := parseAchieved(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseAchieved(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseAchieved(%q) = %v, %v, want %v", tt.in, got, err, tt.want)
		}
	}
}

// The table's ratios and verdicts come from the measured rates.
func TestPrintTableVerdicts(t *testing.T) {
	var buf bytes.Buffer
	printTable(&buf, []result{
		{shape: "a", steps: 256, ref: 100, refMatch: true, one: 150, many: 400},
		{shape: "b", steps: 256, ref: 100, refMatch: false, one: 90, many: 100},
	}, 32)
	out := buf.String()
	for _, want := range []string{"1.50", "4.00", "PASS", "0.90", "1.00", "MISS", "NO"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	rows := strings.Split(out, "\n")
	if !strings.Contains(rows[1], "PASS") || strings.Contains(rows[1], "MISS") {
		t.Errorf("row a should pass both targets: %q", rows[1])
	}
	if strings.Count(rows[2], "MISS") != 2 {
		t.Errorf("row b should miss both targets: %q", rows[2])
	}
}

func TestOneMoreToken(t *testing.T) {
	seq := []int{1, 3 + 'h', 3 + 'i'}
	want := runc.Text(seq)
	if want != "hi" {
		t.Fatalf("runCText = %q, want %q", want, "hi")
	}
	if !oneMoreToken("hi!\n", want, seq[len(seq)-1], 272) {
		t.Error("hi! should be want plus one token")
	}
	if oneMoreToken("hi!!\n", want, seq[len(seq)-1], 272) {
		t.Error("hi!! is two tokens more")
	}
	if oneMoreToken("ho!\n", want, seq[len(seq)-1], 272) {
		t.Error("ho! does not start with want")
	}
}
