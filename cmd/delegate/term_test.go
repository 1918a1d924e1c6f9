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
