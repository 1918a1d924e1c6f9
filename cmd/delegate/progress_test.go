package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/vbauerster/mpb/v8"
)

// TestLogSinkWritesAboveBars: while bars are drawn, a log record goes
// through the bars' container (whole, on its own line), and once they are
// done it goes to the base writer again.
func TestLogSinkWritesAboveBars(t *testing.T) {
	var base, screen syncWriter
	sink := &logSink{base: &base}
	log := slog.New(slog.NewTextHandler(sink, nil))

	p := mpb.New(mpb.WithOutput(&screen), mpb.WithWidth(40), mpb.WithAutoRefresh(), mpb.WithRefreshRate(10*time.Millisecond))
	bar := p.AddBar(2)
	release := sink.above(p)
	log.Warn("retrying call", "attempt", 1)
	bar.Increment()
	bar.Increment()
	p.Wait()
	release()
	log.Warn("after the bars")

	if !strings.Contains(screen.String(), "msg=\"retrying call\" attempt=1\n") {
		t.Errorf("the record written while bars were drawn is not above them:\n%q", screen.String())
	}
	if got := base.String(); strings.Contains(got, "retrying call") || !strings.Contains(got, "after the bars") {
		t.Errorf("base got %q, want only the record written after the bars", got)
	}
	// A container that is done but not yet released: records still arrive.
	p2 := mpb.New(mpb.WithOutput(&screen), mpb.WithAutoRefresh())
	release2 := sink.above(p2)
	p2.Wait()
	log.Warn("late record")
	release2()
	if !strings.Contains(base.String(), "late record") {
		t.Errorf("a record written after the bars' Wait was lost: base %q", base.String())
	}
}

// TestProgressViewPlain: a plain line at a phase's last unit (not before
// plainEvery), the ETA extrapolating only this run's units, resumed ones
// shown, and a last line at finish only when the figures moved since.
func TestProgressViewPlain(t *testing.T) {
	var w syncWriter
	v := newProgressView(&w, progressPlain)
	v.begin("bench", "items")
	v.update(progressFigures{Done: 2, Total: 10, Resumed: 2, Elapsed: time.Second, Status: "first"})
	v.update(progressFigures{Done: 4, Total: 10, Resumed: 2, Elapsed: 2 * time.Second, Status: "second"})
	if got := w.String(); got != "" {
		t.Fatalf("lines before plainEvery and before the last unit:\n%s", got)
	}
	v.finish(false)
	if got, want := w.String(), "bench 4/10 items (40%, 2 resumed)  second  elapsed 2s  ETA 6s\n"; got != want {
		t.Errorf("finish wrote %q, want %q", got, want)
	}

	w = syncWriter{}
	v = newProgressView(&w, progressPlain)
	v.begin("solver", "steps")
	v.update(progressFigures{Done: 3, Total: 3, Elapsed: 3 * time.Second, Status: "loss 1"})
	v.note("solver step %d held-out %.1f", 3, 0.5)
	v.finish(true)
	if got, want := w.String(), "solver 3/3 steps (100%)  loss 1  elapsed 3s  ETA 0s\nsolver step 3 held-out 0.5\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}

	w = syncWriter{}
	v = newProgressView(&w, progressNone)
	v.begin("solver", "steps")
	v.update(progressFigures{Done: 3, Total: 3, Status: "loss 1"})
	v.note("a note")
	v.finish(true)
	if got := w.String(); got != "" {
		t.Errorf("--progress none wrote %q", got)
	}
}
