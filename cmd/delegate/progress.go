package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// isTerminal reports whether w is a character device, a terminal. There
// the commands draw live progress bars instead of plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// logSink is the writer of the command's log, such as a retried call's
// warning. It is stderr, or while progress bars are drawn their container.
// The container prints each record on its own line above the bars. Safe for
// concurrent use.
type logSink struct {
	mu   sync.Mutex
	base io.Writer
	bars *mpb.Progress
}

// logs is where main's logger writes; the bar-drawing views hand it their
// container while they draw.
var logs = &logSink{base: os.Stderr}

func (s *logSink) Write(b []byte) (int, error) {
	s.mu.Lock()
	bars := s.bars
	s.mu.Unlock()
	if bars != nil {
		n, err := bars.Write(b)
		if !errors.Is(err, mpb.ErrDone) {
			return n, err
		}
		// The bars finished between the lock and the write.
	}
	return s.base.Write(b)
}

// above sends the log above p's bars until release is called, after p's
// Wait. Records written after p is done reach base.
func (s *logSink) above(p *mpb.Progress) (release func()) {
	s.mu.Lock()
	s.bars = p
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.bars == p {
			s.bars = nil
		}
		s.mu.Unlock()
	}
}

// Progress display modes (--progress).
const (
	progressAuto  = "auto"
	progressBar   = "bar"
	progressPlain = "plain"
	progressNone  = "none"
)

// plainEvery is how often, at most, a plain progress line is printed
// between a phase's first and last.
const plainEvery = 10 * time.Second

// checkProgress rejects a --progress value that is not a mode.
func checkProgress(mode string) error {
	switch mode {
	case progressAuto, progressBar, progressPlain, progressNone:
		return nil
	}
	return fmt.Errorf("--progress %q: want auto, bar, plain or none", mode)
}

// resolveProgress turns progressAuto into what w gets: a bar on a
// terminal, plain lines elsewhere.
func resolveProgress(mode string, w io.Writer) string {
	if mode != progressAuto {
		return mode
	}
	if isTerminal(w) {
		return progressBar
	}
	return progressPlain
}

// progressView is the one progress display of the long commands (bench,
// process, pretrain). Work comes in phases, one at a time (a benchmark, a
// rollout run, each model pretrained). A phase counts units of work done
// out of a total, some perhaps done by an earlier run (resumed), and
// carries a status: the command's own figures (accuracy, reward, loss).
//
// Under --progress bar each phase is a bar,
//
//	NAME DONE/TOTAL UNIT  STATUS  [====    ]  PCT %  ETA T
//
// a finished phase's bar staying with its last figures, the command's
// own lines (note, text) and its log printed above the bars. Under plain a
// line
//
//	NAME DONE/TOTAL UNIT (PCT%[, N resumed])  STATUS  elapsed E  ETA T
//
// at most every plainEvery, at a phase's last unit, and at finish when
// something changed since the last line; notes are lines of their own.
// Under none, nothing but what goes through text. The ETA extrapolates the
// work this run did, resumed work left out, to the work left.
//
// Its methods are called from one goroutine at a time; they never wait
// for the terminal beyond mpb's own drawing.
type progressView struct {
	out     io.Writer
	mode    string
	p       *mpb.Progress
	release func() // gives the log back to stderr once the bars are done

	mu       sync.Mutex // guards the phases' figures, which the bars' decorators read
	cur      *phase
	lastLine time.Time
	pending  bool // plain: the figures changed since the last line
}

// phase is one bar's figures.
type phase struct {
	name, unit          string
	done, total, resume int
	elapsed             time.Duration // this run's time on the phase
	status              string
	start               time.Time // when begin was called: the clock when the caller gives none
	ended               bool      // plain: the line of the last unit is printed
	shown               string    // plain: the figures of the last line
	completed           bool      // bar: completed by update (touched only by the caller's goroutine)
	bar                 *mpb.Bar
}

func newProgressView(out io.Writer, mode string) *progressView {
	v := &progressView{out: out, mode: resolveProgress(mode, out)}
	if v.mode == progressBar {
		opts := []mpb.ContainerOption{mpb.WithOutput(out), mpb.WithRefreshRate(200 * time.Millisecond), mpb.WithAutoRefresh()}
		if !isTerminal(out) {
			opts = append(opts, mpb.WithWidth(120)) // --progress bar into a file: no terminal to measure
		}
		v.p = mpb.New(opts...)
		v.release = logs.above(v.p)
	}
	return v
}

// begin starts a phase named name counting units (plural: "steps",
// "items"); update gives its figures. The previous phase's bar,
// unfinished, stays where it stood.
func (v *progressView) begin(name, unit string) {
	ph := &phase{name: name, unit: unit, start: time.Now()}
	v.mu.Lock()
	prev := v.cur
	v.cur = ph
	v.lastLine = ph.start // the first plain line comes after plainEvery
	v.pending = false
	v.mu.Unlock()
	if v.mode != progressBar {
		return
	}
	if prev != nil && prev.bar != nil && !prev.completed {
		prev.bar.Abort(false)
	}
	// The figures come before the bar, so that a narrow terminal cuts the
	// bar rather than them.
	figures := func(f func(*phase) string) decor.Decorator {
		return decor.Any(func(decor.Statistics) string {
			v.mu.Lock()
			defer v.mu.Unlock()
			return f(ph)
		}, decor.WCSyncSpaceR)
	}
	ph.bar = v.p.AddBar(0, // a total set by update, which may change
		mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d "+unit, decor.WCSyncSpaceR),
			figures(func(ph *phase) string { return ph.status })),
		mpb.AppendDecorators(decor.Percentage(decor.WCSyncSpace), figures(func(ph *phase) string { return " ETA " + ph.eta() })),
	)
}

// progressFigures are a phase's figures at one moment.
type progressFigures struct {
	Done, Total int           // units done (resumed ones included) of the total, which may change
	Resumed     int           // units done by an earlier run
	Elapsed     time.Duration // this run's time on the phase; 0: the view's own clock since begin
	Status      string        // the command's figures
}

// update sets the current phase's figures.
func (v *progressView) update(f progressFigures) {
	v.mu.Lock()
	ph := v.cur
	if ph == nil {
		v.mu.Unlock()
		return
	}
	if f.Elapsed <= 0 {
		f.Elapsed = time.Since(ph.start)
	}
	ph.done, ph.total, ph.resume, ph.elapsed, ph.status = f.Done, f.Total, f.Resumed, f.Elapsed, f.Status
	done, total := f.Done, f.Total
	line := ""
	if v.mode == progressPlain {
		now := time.Now()
		last := done >= total && !ph.ended
		if last || now.Sub(v.lastLine) >= plainEvery {
			ph.ended = ph.ended || last
			v.lastLine = now
			line = ph.line()
		}
		v.pending = ph.figures() != ph.shown
	}
	v.mu.Unlock()
	if line != "" {
		fmt.Fprintln(v.out, line)
	}
	if ph.bar != nil {
		ph.bar.SetTotal(int64(total), false)
		ph.bar.SetCurrent(int64(done))
		if total > 0 && done >= total && !ph.completed {
			// Complete: the bar draws its last. The view keeps the fact
			// itself: mpb's Completed races with the last drawing.
			ph.completed = true
			ph.bar.SetTotal(int64(total), true)
		}
	}
}

// note prints a line of the command's own, an evaluation say. It goes
// above the bars or among the plain lines; under none, nowhere.
func (v *progressView) note(format string, args ...any) {
	switch v.mode {
	case progressBar, progressPlain:
		fmt.Fprintf(v.text(), format+"\n", args...)
	}
}

// text is where the command's own output goes while the view is drawn. It
// goes above the bars, or straight to the output.
func (v *progressView) text() io.Writer {
	if v.p != nil {
		return v.p
	}
	return v.out
}

// finish ends the display. Under bar, an unfinished bar stays where it
// stood and the log goes back to stderr; complete false or work left
// makes a bar unfinished. Under plain, the last figures are printed if no
// line showed them yet.
func (v *progressView) finish(complete bool) {
	v.mu.Lock()
	ph, pending := v.cur, v.pending
	line := ""
	if ph != nil && v.mode == progressPlain && pending {
		line = ph.line()
	}
	v.pending = false
	v.mu.Unlock()
	if line != "" {
		fmt.Fprintln(v.out, line)
	}
	if v.p == nil {
		return
	}
	if ph != nil && ph.bar != nil {
		ph.bar.SetCurrent(int64(ph.done))
		if !complete || !ph.completed {
			ph.bar.Abort(false)
		}
	}
	v.p.Wait()
	v.release()
}

// figures are what a plain line shows but the clock.
func (ph *phase) figures() string {
	return fmt.Sprintf("%d/%d %s", ph.done, ph.total, ph.status)
}

// line is the phase as a plain line, and marks its figures shown. Called
// with the view's mu held.
func (ph *phase) line() string {
	ph.shown = ph.figures()
	pct := 100 * float64(ph.done) / float64(max(ph.total, 1))
	s := fmt.Sprintf("%s %d/%d %s (%.0f%%", ph.name, ph.done, ph.total, ph.unit, pct)
	if ph.resume > 0 {
		s += fmt.Sprintf(", %d resumed", ph.resume)
	}
	s += ")"
	if ph.status != "" {
		s += "  " + ph.status
	}
	return s + fmt.Sprintf("  elapsed %s  ETA %s", ph.elapsed.Round(time.Second), ph.eta())
}

// eta extrapolates the units this run did to those left. Called with the
// view's mu held.
func (ph *phase) eta() string {
	run := ph.done - ph.resume
	left := ph.total - ph.done
	switch {
	case left <= 0:
		return "0s"
	case run <= 0:
		return "?"
	}
	d := time.Duration(float64(ph.elapsed) * float64(left) / float64(run))
	return d.Round(time.Second).String()
}
