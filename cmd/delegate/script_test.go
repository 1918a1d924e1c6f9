package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/delegatelab/delegate/standin"
)

// TestMain lets the scripts run the delegate command (and the stand-in
// server) as child processes of the test binary.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"delegate": main,
		"standin":  standinMain,
	})
}

// standinMain is `go run ./perf/standin -addr ADDR`. It runs package
// standin's server on ADDR, answering fast, until SIGINT or SIGTERM.
func standinMain() {
	fs := flag.NewFlagSet("standin", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "loopback address to listen on")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: Parse exits on a bad flag
	sc := standin.DefaultConfig()
	sc.Latency = time.Millisecond
	s, err := standin.New(sc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "standin:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := s.Start(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "standin:", err)
		os.Exit(1)
	}
	fmt.Printf("standin listening on %s\n", s.URL())
	<-ctx.Done()
	_ = s.Close() // the process ends here; nothing is in flight worth waiting for
}

// endToEnd skips t under the race detector. It runs child processes or
// trains for many steps, which the race detector slows many times over;
// the README's second test command runs it without.
func endToEnd(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("end to end: the README's second test command runs it without the race detector")
	}
}

// raceCovered skips t under the race detector. t runs a job in process
// whose concurrency the race detector checks in the tests that where
// names; under it t would repeat their work many times slower. The
// README's second test command runs t without the race detector.
func raceCovered(t *testing.T, where string) {
	t.Helper()
	if raceEnabled {
		t.Skipf("under the race detector %s covers this job's concurrency; the README's second test command runs it without", where)
	}
}

// repoRoot is the module root, two levels above this package.
const repoRoot = "../.."

// TestScripts runs testdata/script/*.txtar: every command the README
// shows, as written. The work directory is laid out like a fresh clone.
// It holds copies of examples/, models/, the dataset file and the engine
// fixtures the README names.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "script"),
		Setup: func(env *testscript.Env) error {
			standinAddr, err := freeAddr()
			if err != nil {
				return err
			}
			serveAddr, err := freeAddr()
			if err != nil {
				return err
			}
			apiAddr, err := freeAddr()
			if err != nil {
				return err
			}
			envAddr, err := freeAddr()
			if err != nil {
				return err
			}
			gatewayAddr, err := freeAddr()
			if err != nil {
				return err
			}
			viewAddr, err := freeAddr()
			if err != nil {
				return err
			}
			env.Setenv("VIEW_ADDR", viewAddr)
			env.Setenv("ENV_ADDR", envAddr)
			env.Setenv("GATEWAY_ADDR", gatewayAddr)
			env.Setenv("STANDIN_ADDR", standinAddr)
			env.Setenv("SERVE_ADDR", serveAddr)
			env.Setenv("API_ADDR", apiAddr)
			// The README's stand-in runs on 127.0.0.1:18080; here on a free
			// port.
			if err := copyTree(env.WorkDir, "examples", func(b []byte) []byte {
				return []byte(strings.ReplaceAll(string(b), "127.0.0.1:18080", standinAddr))
			}); err != nil {
				return err
			}
			for _, dir := range []string{"models/solver", "models/router", "dataset/testdata/gsm8k", "nn/infer/testdata/gguf", "nn/infer/testdata/hf/qwen2-bias"} {
				if err := copyTree(env.WorkDir, dir, nil); err != nil {
					return err
				}
			}
			return nil
		},
		// [race]: under the race detector train and pretrain run fewer
		// steps and evaluations (their figures are not checked here).
		Condition: func(cond string) (bool, error) {
			if cond == "race" {
				return raceEnabled, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfor": cmdWaitFor,
			"post":    cmdPost,
		},
	})
}

// freeAddr returns a loopback address with a port free now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// copyTree copies the files of the repository's directory dir to the same
// path under root. Subdirectories are skipped. edit, when not nil, edits
// each file.
func copyTree(root, dir string, edit func([]byte) []byte) error {
	src := filepath.Join(repoRoot, dir)
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if edit != nil {
			b = edit(b)
		}
		if err := os.WriteFile(filepath.Join(root, dir, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// cmdWaitFor waits until URL answers an HTTP GET (any status), for a
// server started in the background: waitfor URL.
func cmdWaitFor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfor URL")
	}
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := client.Get(args[0])
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfor %s: no answer in 60s: %v", args[0], err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cmdPost POSTs a JSON body to URL and writes the response body to the
// script's stdout. A status other than 200 fails, or succeeds with !.
// Usage: post URL BODY.
func cmdPost(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: post URL BODY")
	}
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Post(args[0], "application/json", strings.NewReader(args[1]))
	ts.Check(err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	ts.Check(err)
	fmt.Fprintf(ts.Stdout(), "%s\n", b)
	if ok := resp.StatusCode == http.StatusOK; ok == neg {
		ts.Fatalf("post %s: status %d: %s", args[0], resp.StatusCode, b)
	}
}
