// Command gzipbomb measures the peak memory of `delegate api` when gzip bombs arrive.
// It posts each case to a fresh binary on loopback and prints the statuses and peak RSS.
// README.md lists the cases; docs/api.md the figures.
//
// Usage: go run ./perf/gzipbomb -bin ./delegate
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

func main() {
	bin := flag.String("bin", "./delegate", "the delegate binary to measure")
	addr := flag.String("addr", "127.0.0.1:18431", "loopback address for delegate api")
	flag.Parse()
	if err := run(*bin, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "gzipbomb:", err)
		os.Exit(1)
	}
}

func run(bin, addr string) error {
	one, err := compress(1<<20, gzip.BestCompression)
	if err != nil {
		return err
	}
	multi := bytes.Repeat(one, 1024) // 1 GiB inflated; each member's trailer says 1 MiB
	single, err := compress(1<<30, gzip.BestSpeed)
	if err != nil {
		return err
	}
	cases := []struct {
		name string
		body []byte
		n    int
	}{
		{"1,024 members, 1 GiB inflated", multi, 1},
		{"one member of 1 GiB", single, 1},
		{"four bombs of 1,024 members at once", multi, 4},
	}
	for _, c := range cases {
		if err := measure(bin, addr, c.name, c.body, c.n); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return nil
}

// compress is n zero bytes, gzip'd at level.
func compress(n int, level int) ([]byte, error) {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, level)
	if err != nil {
		return nil, err
	}
	chunk := make([]byte, 1<<20)
	for left := n; left > 0; left -= len(chunk) {
		if _, err := zw.Write(chunk[:min(left, len(chunk))]); err != nil {
			return nil, err
		}
	}
	err = zw.Close()
	return b.Bytes(), err
}

func measure(bin, addr, name string, body []byte, n int) error {
	dir, err := os.MkdirTemp("", "gzipbomb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(bin, "api", "--addr", addr, "--data", dir)
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Kill() // the measurement is taken; how it ends does not matter
		_ = cmd.Wait()
	}()
	url := "http://" + addr
	for i := 0; ; i++ {
		resp, err := http.Get(url + "/status")
		if err == nil {
			resp.Body.Close()
			break
		}
		if i == 300 {
			return fmt.Errorf("delegate api did not answer: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	before := hwm(cmd.Process.Pid)
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, err := http.NewRequest("POST", url+"/scored_data", bytes.NewReader(body))
			if err != nil {
				return
			}
			req.Header.Set("Content-Encoding", "gzip")
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	fmt.Printf("%s (%d bytes sent each): statuses %v, peak RSS %s before, %s after\n", name, len(body), statuses, before, hwm(cmd.Process.Pid))
	return nil
}

// hwm is the process's peak resident set (VmHWM), or "?" off Linux.
func hwm(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
