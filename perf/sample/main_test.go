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
		{shape: "a", procs: 1, load: "0.10", steps: 256, ref: 100, refMatch: true, one: 150, many: 500},
		{shape: "b", procs: 2, load: "0.10", steps: 256, ref: 100, refMatch: false, one: 90, many: 499},
	}, 32)
	out := buf.String()
	for _, want := range []string{"1.50", "5.00", "PASS", "0.90", "4.99", "MISS", "NO"} {
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

func TestParseProcs(t *testing.T) {
	if got, err := parseProcs("1, 2"); err != nil || len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("parseProcs(%q) = %v, %v, want [1 2]", "1, 2", got, err)
	}
	for _, bad := range []string{"", "0", "1,x", "-2"} {
		if _, err := parseProcs(bad); err == nil {
			t.Errorf("parseProcs(%q): no error", bad)
		}
	}
}

// The bandwidth line names the largest shape and the fraction its batch-1 rate reaches.
// In this test 4 MB per token at 1000 tok/s is 4 GB/s, 40% of 10 GB/s.
func TestPrintBandwidth(t *testing.T) {
	var buf bytes.Buffer
	printBandwidth(&buf, []result{
		{shape: "small", procs: 1, weights: 1e6, bw: 10e9, one: 5000, ref: 4000},
		{shape: "big", procs: 1, weights: 4e6, bw: 10e9, one: 1000, ref: 500},
	})
	out := buf.String()
	for _, want := range []string{"big", "10.0 GB/s", "4.0 GB/s, 40%", "runomp: 20%"} {
		if !strings.Contains(out, want) {
			t.Errorf("bandwidth line lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "small") {
		t.Errorf("bandwidth line names the smaller shape:\n%s", out)
	}
}

// The CPU-time comparison follows the wall-clock table, with a row for
// each of our measurements, runomp's or not.
func TestPrintTableCPU(t *testing.T) {
	var buf bytes.Buffer
	printTable(&buf, []result{
		{shape: "a", procs: 1, load: "3.00", steps: 256, ref: 100, refMatch: true, one: 90, many: 500, refCPU: 200, oneCPU: 250, manyCPU: 1300},
		{shape: "b", procs: 2, load: "3.00", steps: 256, ref: 100, refMatch: true, one: 90, many: 500, refCPU: 50, oneCPU: 75},
		{shape: "c", procs: 2, load: "3.00", steps: 256, one: 90, many: 500, oneCPU: 321},
	}, 32)
	out := buf.String()
	_, cpu, ok := strings.Cut(out, "(CPU time)")
	if !ok {
		t.Fatalf("no CPU-time table:\n%s", out)
	}
	for _, want := range []string{"1.25", "1.50", "321"} {
		if !strings.Contains(cpu, want) {
			t.Errorf("CPU-time table lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "b32 tok/cpu-s") || !strings.Contains(out, "6.50") {
		t.Errorf("no CPU-time comparison of batch 32's 1300 against 200 tok/cpu-s:\n%s", out)
	}
}

func TestMedianAndBest(t *testing.T) {
	tests := []struct {
		xs               []float64
		wantMed, wantTop float64
	}{
		{nil, 0, 0},
		{[]float64{3}, 3, 3},
		{[]float64{5, 1, 3}, 3, 5},
		{[]float64{4, 1, 3, 10}, 3.5, 10},
	}
	for _, tt := range tests {
		if got := median(tt.xs); got != tt.wantMed {
			t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.wantMed)
		}
		if got := best(tt.xs); got != tt.wantTop {
			t.Errorf("best(%v) = %v, want %v", tt.xs, got, tt.wantTop)
		}
	}
}

// The default run leaves out the shapes that take minutes; -shapes picks any.
func TestPickShapes(t *testing.T) {
	tests := []struct {
		list    string
		want    []string
		wantErr string
	}{
		{"", []string{"stories260K", "stories15M", "stories15M-v512"}, ""},
		{"stories42M,stories110M", []string{"stories42M", "stories110M"}, ""},
		{"stories15M", []string{"stories15M"}, ""},
		{"stories7B", nil, `unknown shape "stories7B"`},
	}
	for _, tt := range tests {
		t.Run(tt.list, func(t *testing.T) {
			got, err := pickShapes(tt.list)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("pickShapes(%q) error = %v, want one containing %q", tt.list, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range got {
				names = append(names, s.name)
				if err := s.cfg.WithDefaults().Validate(); err != nil {
					t.Errorf("shape %s: %v", s.name, err)
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.want, ",") {
				t.Errorf("pickShapes(%q) = %v, want %v", tt.list, names, tt.want)
			}
		})
	}
}
