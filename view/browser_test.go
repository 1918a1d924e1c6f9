package view

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/delegatelab/delegate/rl"
)

// chromiumPath finds a Chromium or Chrome binary, "" when there is none.
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artifactDir is where the browser test leaves its screenshots:
// $DELEGATE_TEST_ARTIFACTS when set, else a temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("DELEGATE_TEST_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// TestBrowser opens every page in headless Chromium over a fixture directory.
// No page may log a console error or throw.
// A trace's node opens on click, a bench point lists its items,
// and the training chart gains a point when a metrics line is appended.
// A gateway session opens with its calls, and the live page of running servers gains points.
func TestBrowser(t *testing.T) {
	if raceEnabled {
		t.Skip("browser test: slow beside the race detector; the README's second test command runs it without")
	}
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no chromium binary found on PATH (install Debian's chromium: apt-get install chromium)")
	}
	dir := fixtureDir(t)
	gwDir := t.TempDir()
	finished, _ := gatewayFixture(t, gwDir)
	servers, _ := liveServers(t)
	s, hs := serve(t, config(func(c *Config) { c.Paths, c.Servers, c.Poll = []string{dir, gwDir}, servers, 50*time.Millisecond }))
	artifacts := artifactDir(t)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 760),
	)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()

	var mu sync.Mutex
	var problems []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	// The first action starts the browser: no timeout on it.
	if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/")); err != nil {
		t.Fatalf("open the view: %v", err)
	}

	// page goes to a route, runs the checks and saves a screenshot.
	page := func(name, hash string, checks ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		defer scancel()
		steps := append([]chromedp.Action[chromedp.Void]{chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.hash = %q", hash))}, checks...)
		if err := chromedp.Do(sctx, steps...); err != nil {
			t.Fatalf("%s page: %v", name, err)
		}
		// Let late errors, of scripts still running, arrive.
		time.Sleep(200 * time.Millisecond)
		png, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("%s page: screenshot: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(artifacts, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(problems) > 0 {
			t.Errorf("%s page: console: %s", name, strings.Join(problems, "; "))
			problems = nil
		}
	}
	// count reads how many elements match sel.
	count := func(sel string) int {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		defer scancel()
		n, err := chromedp.Run(sctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
		if err != nil {
			t.Fatalf("count %s: %v", sel, err)
		}
		return n
	}

	page("runs", "#/", chromedp.WaitVisible(chromedp.CSS(`#runs tr.click`)))
	if got, want := count(`#runs tr.click`), len(s.Runs()); got != want {
		t.Errorf("runs page: got %d rows, want %d", got, want)
	}

	trace := runID(t, s, KindTrace, "trace.json")
	page("trace", fmt.Sprintf("#/trace/%d", trace),
		chromedp.WaitVisible(chromedp.CSS(`#tree .node[data-id="0"] > .body`)),
		chromedp.WaitNotVisible(chromedp.CSS(`.node[data-id="1"] > .body`)),
		chromedp.Click(chromedp.CSS(`.node[data-id="1"] > .head`)),
		chromedp.WaitVisible(chromedp.CSS(`.node[data-id="1"] > .body .msg`)),
		chromedp.Click(chromedp.CSS(`.node[data-id="2"] > .head`)),
		chromedp.WaitVisible(chromedp.CSS(`.node.failed[data-id="4"] > .head`)))
	if got, want := count(`.node.critical`), 5; got != want {
		t.Errorf("trace page: got %d nodes on the critical path, want %d", got, want)
	}

	benchID := runID(t, s, KindBench, "results.jsonl")
	page("bench", fmt.Sprintf("#/bench/%d", benchID),
		chromedp.WaitVisible(chromedp.CSS(`#frontier circle.point[data-arm="weak"]`)),
		chromedp.Click(chromedp.CSS(`#frontier circle.point[data-arm="weak"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#items tr.item`)))
	if got, want := count(`#items tr.item`), 20; got != want {
		t.Errorf("bench page: the weak arm lists %d items, want %d", got, want)
	}
	if got := count(`#frontier circle.oracle`); got != 1 {
		t.Errorf("bench page: %d oracle points, want 1", got)
	}
	page("item", fmt.Sprintf("#/bench/%d/task/t000", benchID),
		chromedp.WaitVisible(chromedp.CSS(`.cols .col a[href^="#/trace/"]`)))
	if got, want := count(`.cols .col`), 3; got != want {
		t.Errorf("item page: got %d arms side by side, want %d", got, want)
	}
	page("item-trace", fmt.Sprintf("#/trace/%d/0", benchID), chromedp.WaitVisible(chromedp.CSS(`#tree .node`)))

	ro := runID(t, s, KindRollouts, "artifacts.jsonl")
	page("rollouts", fmt.Sprintf("#/rollouts/%d", ro), chromedp.WaitVisible(chromedp.CSS(`#rollouts tr.click`)))
	page("rollout", fmt.Sprintf("#/rollouts/%d/0", ro), chromedp.WaitVisible(chromedp.CSS(`a[href="#/trace/`+fmt.Sprint(ro)+`/0/trace"]`)))

	page("train", "#/train", chromedp.WaitVisible(chromedp.CSS(`svg[data-metric="reward"][data-points="18"]`)))
	appendLines(t, filepath.Join(dir, "train", "a", rl.MetricsFile), metrics(11, 1))
	page("train-live", "#/train", chromedp.WaitVisible(chromedp.CSS(`svg[data-metric="reward"][data-points="19"]`)))

	gw := runID(t, s, KindGateway, "gateway.db")
	key := digestOf(finished)
	page("gateway", fmt.Sprintf("#/gateway/%d", gw), chromedp.WaitVisible(chromedp.CSS(`#sessions tr[data-key="`+key+`"]`)))
	if got := count(`#sessions tr.click`); got != 2 {
		t.Errorf("gateway page: %d sessions, want 2", got)
	}
	page("session", fmt.Sprintf("#/gateway/%d", gw),
		chromedp.Click(chromedp.CSS(`#sessions tr[data-key="`+key+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tree .node[data-index="0"] > .body .msg`)),
		chromedp.WaitNotVisible(chromedp.CSS(`.node[data-index="2"] > .body`)),
		chromedp.Click(chromedp.CSS(`.node[data-index="2"] > .head`)),
		chromedp.WaitVisible(chromedp.CSS(`.node[data-index="2"] > .body .msg`)))
	if got := count(`#tree .node[data-index="0"] .node[data-index="2"]`); got != 1 {
		t.Errorf("session page: the continuing call is not a child of the first")
	}

	page("live", "#/live", chromedp.WaitVisible(chromedp.CSS(`svg[data-metric="sessions"]`)))
	if got := count(`#live-servers tr td.ok`); got != len(servers) {
		t.Errorf("live page: %d servers up, want %d", got, len(servers))
	}
	// points reads how many points the sessions chart draws.
	points := func() int {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		defer scancel()
		n, err := chromedp.Run(sctx, chromedp.Evaluate[int](`Number(document.querySelector('svg[data-metric="sessions"]').getAttribute('data-points'))`))
		if err != nil {
			t.Fatalf("live page: %v", err)
		}
		return n
	}
	before := points()
	for deadline := time.Now().Add(10 * time.Second); points() <= before; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("live page: the sessions chart stayed at %d points", before)
		}
	}
	page("live-later", "#/live", chromedp.WaitVisible(chromedp.CSS(`svg[data-metric="throughput"]`)))
	t.Logf("screenshots in %s", artifacts)
}
