package view

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// maxLine bounds one JSONL line; a longer one is an error naming it.
const maxLine = 256 << 20

// lines indexes a growing JSONL file by the offset of each complete line.
// A line not yet ended by a newline is left for the next update: its
// writer may still be writing it. The caller serialises its use.
type lines struct {
	path string
	offs []int64 // where each indexed line starts
	end  int64   // where the last indexed line ends, past its newline
	size int64   // the file's size at the last update
	more bool    // the last update stopped at its budget
	// behind says the background indexer has not reached the end yet.
	// Requests then leave the file to it and answer with what is indexed.
	behind bool
}

// advance indexes for at most requestBudget.
// When background, it is Server.catchUp's indexer.
// Otherwise it indexes for a request, and does nothing while the background indexer is behind.
func (l *lines) advance(background bool, fn func(i int, raw []byte) error) error {
	if !background {
		if l.behind {
			return nil
		}
		return l.update(requestBudget, fn)
	}
	err := l.update(requestBudget, fn)
	l.behind = err == nil && l.more
	return err
}

// Progress says how much of a file is indexed.
type Progress struct {
	Bytes int64 `json:"bytes"` // indexed
	Of    int64 `json:"of"`    // the file's size when last looked at
	// Complete is false while an update stopped at its time budget: the
	// figures served cover the lines indexed so far.
	Complete bool `json:"complete"`
}

func (l *lines) progress() Progress {
	return Progress{Bytes: l.end, Of: l.size, Complete: !l.more && !l.behind}
}

// updateStride is how many lines an update indexes between looks at
// the clock.
const updateStride = 32

// update indexes the lines written since the last update, for at most budget.
// A budget of 0 has no limit. It passes each line to fn with its number from 0.
// A later update goes on where it stopped. A missing file has no lines yet.
// When fn fails the line is not indexed and the error names it.
func (l *lines) update(budget time.Duration, fn func(i int, raw []byte) error) error {
	start := time.Now()
	l.more = false
	f, err := os.Open(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("index %s: %w", l.path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("index %s: %w", l.path, err)
	}
	l.size = st.Size()
	if st.Size() < l.end {
		return fmt.Errorf("index %s: the file shrank from %d to %d bytes: it was rewritten; restart the view", l.path, l.end, st.Size())
	}
	if st.Size() == l.end {
		return nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, l.end, st.Size()-l.end), 1<<20)
	var long []byte
	for n := 1; ; n++ {
		if budget > 0 && n%updateStride == 0 && time.Since(start) > budget {
			l.more = true
			return nil
		}
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, chunk...)
			if len(long) > maxLine {
				return fmt.Errorf("index %s line %d: longer than %d bytes", l.path, len(l.offs)+1, maxLine)
			}
			continue
		}
		if err != nil {
			return nil // io.EOF: what is left has no newline yet
		}
		raw := chunk
		if long != nil {
			raw = append(long, chunk...)
			long = nil
		}
		start := l.end
		if len(bytes.TrimSpace(raw)) > 0 {
			if err := fn(len(l.offs), raw); err != nil {
				return fmt.Errorf("index %s line %d: %w", l.path, len(l.offs)+1, err)
			}
			l.offs = append(l.offs, start)
		}
		l.end = start + int64(len(raw))
	}
}

// count is the lines indexed.
func (l *lines) count() int { return len(l.offs) }

// read returns line i as written, without its newline.
func (l *lines) read(i int) ([]byte, error) {
	if i < 0 || i >= len(l.offs) {
		return nil, notFound("%s has no record %d (it has %d)", l.path, i, len(l.offs))
	}
	end := l.end
	if i+1 < len(l.offs) {
		end = l.offs[i+1]
	}
	f, err := os.Open(l.path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", l.path, err)
	}
	defer f.Close()
	buf := make([]byte, end-l.offs[i])
	if _, err := f.ReadAt(buf, l.offs[i]); err != nil {
		return nil, fmt.Errorf("read %s record %d: %w", l.path, i, err)
	}
	// Blank lines after it belong to its span; trim them.
	if j := bytes.IndexByte(buf, '\n'); j >= 0 {
		buf = buf[:j]
	}
	return buf, nil
}

// readLine decodes line i of l, read under mu, as a T; what names the
// record in errors.
func readLine[T any](mu *sync.Mutex, l *lines, i int, what string) (*T, error) {
	mu.Lock()
	raw, err := l.read(i)
	mu.Unlock()
	if err != nil {
		return nil, err
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s %d: %w", what, i, err)
	}
	return &v, nil
}
