// Package host reads what benchmarks print about the machine behind a figure.
// It reads the CPU model, the load average and the CPUs a process may run on
// from /proc and /sys. Off Linux, or where a file is missing or malformed, a
// reader returns false or "" instead of failing. A benchmark then still
// runs, and its header says unknown.
package host

import (
	"os"
	"strconv"
	"strings"
)

// CPUModel is the first "model name" of /proc/cpuinfo; "" when unknown.
func CPUModel() string { return field(read("/proc/cpuinfo"), "model name", ":") }

// AllowedCPUs is this process's Cpus_allowed_list (e.g. "0-1"); "" when
// unknown.
func AllowedCPUs() string { return field(read("/proc/self/status"), "Cpus_allowed_list", ":") }

// OnlineCPUs is the machine's online CPU list (e.g. "0-15"); "" when
// unknown.
func OnlineCPUs() string { return strings.TrimSpace(read("/sys/devices/system/cpu/online")) }

// LoadAverage is the 1, 5 and 15 minute load averages of /proc/loadavg;
// ok is false when they cannot be read.
func LoadAverage() (avg [3]float64, ok bool) { return parseLoad(read("/proc/loadavg")) }

func read(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// field returns the value of the first "key<sep>value" line whose key is key.
// Key and value are trimmed; it returns "" when there is no such line.
func field(text, key, sep string) string {
	for line := range strings.SplitSeq(text, "\n") {
		if k, v, ok := strings.Cut(line, sep); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// parseLoad reads the first three fields of /proc/loadavg's text.
func parseLoad(text string) (avg [3]float64, ok bool) {
	f := strings.Fields(text)
	if len(f) < 3 {
		return avg, false
	}
	for i := range avg {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || v < 0 {
			return [3]float64{}, false
		}
		avg[i] = v
	}
	return avg, true
}
