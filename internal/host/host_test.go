package host

import (
	"runtime"
	"testing"
)

func TestField(t *testing.T) {
	cpuinfo := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B45\nmodel name\t: second\n"
	if got := field(cpuinfo, "model name", ":"); got != "AMD EPYC 9B45" {
		t.Errorf("model name = %q", got)
	}
	status := "Name:\tbench\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n"
	if got := field(status, "Cpus_allowed_list", ":"); got != "0-1" {
		t.Errorf("Cpus_allowed_list = %q", got)
	}
	for _, text := range []string{"", "no colon here\n", "model: x\n"} {
		if got := field(text, "model name", ":"); got != "" {
			t.Errorf("field of %q = %q, want empty", text, got)
		}
	}
}

func TestParseLoad(t *testing.T) {
	avg, ok := parseLoad("0.52 1.25 2.00 1/123 4567\n")
	if !ok || avg != [3]float64{0.52, 1.25, 2} {
		t.Errorf("parseLoad = %v, %v", avg, ok)
	}
	for _, text := range []string{"", "0.5 1.0", "a b c", "0.5 -1 2"} {
		if avg, ok := parseLoad(text); ok {
			t.Errorf("parseLoad(%q) = %v, want not ok", text, avg)
		}
	}
}

// TestReadsThisMachine reads the real files where they exist.
func TestReadsThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	if CPUModel() == "" && runtime.GOARCH == "amd64" {
		t.Error("no CPU model in /proc/cpuinfo on linux/amd64")
	}
	if AllowedCPUs() == "" || OnlineCPUs() == "" {
		t.Errorf("allowed %q, online %q", AllowedCPUs(), OnlineCPUs())
	}
	if _, ok := LoadAverage(); !ok {
		t.Error("no load average in /proc/loadavg")
	}
}
