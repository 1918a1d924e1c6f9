package main

import (
	"errors"
	"io"
	"os"
	"sync"

	"github.com/vbauerster/mpb/v8"
)

// isTerminal reports whether w is a character device (a terminal), where
// the commands draw live progress bars instead of plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// logSink is the writer of the command's log (warnings such as a retried
// call): stderr, or, while progress bars are drawn, their container,
// which prints each record on its own line above the bars instead of
// through them. Safe for concurrent use.
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
