package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/vbauerster/mpb/v8"
)

// TestLogSinkWritesAboveBars checks where log records go. While bars are
// drawn, a record goes through the bars' container, whole, on its own
// line. Once they are done it goes to the base writer again.
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

// TestProgressViewPlain checks the plain view. A line comes at a phase's
// last unit, none before plainEvery. The ETA extrapolates only this run's
// units, and resumed ones are shown. Notes are lines of their own. A last
// line comes at finish only when the figures moved since. Under none,
// nothing is written.
func TestProgressViewPlain(t *testing.T) {
	tests := []struct {
		name, mode string
		updates    []progressFigures
		complete   bool
		want       string
	}{
		{"interrupted: the last figures at finish", progressPlain, []progressFigures{
			{Done: 2, Total: 10, Resumed: 2, Elapsed: time.Second, Status: "first"},
			{Done: 4, Total: 10, Resumed: 2, Elapsed: 2 * time.Second, Status: "second"},
		}, false, "bench 4/10 units (40%, 2 resumed)  second  elapsed 2s  ETA 6s\n"},
		{"done: one line at the last unit, then the note", progressPlain, []progressFigures{
			{Done: 3, Total: 3, Elapsed: 3 * time.Second, Status: "loss 1"},
		}, true, "bench 3/3 units (100%)  loss 1  elapsed 3s  ETA 0s\nnote\n"},
		{"none", progressNone, []progressFigures{{Done: 3, Total: 3, Status: "loss 1"}}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w syncWriter
			v := newProgressView(&w, tt.mode)
			v.begin("bench", "units")
			for _, f := range tt.updates {
				v.update(f)
			}
			if tt.complete {
				v.note("note")
			}
			v.finish(tt.complete)
			if got := w.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
