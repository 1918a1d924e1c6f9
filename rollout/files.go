package rollout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/delegatelab/delegate/store"
)

// appendFile is one append-only JSONL output file. Its size is the length
// recorded in the state after the last committed record; writes go at that
// offset. It is used under the runner's write lock.
type appendFile struct {
	name string
	f    *os.File
	size int64
}

// openFiles opens the JSONL files of the run and repairs each against the state.
// Bytes past the recorded length are a line cut short,
// or a record written but not committed because the process died between the two.
// They are truncated away and their work is redone.
// A file shorter than its recorded length lost committed records, which is an error.
// fresh says the state holds no run yet; the files must then be empty or absent.
// The repairs made are returned, one sentence each.
func openFiles(ctx context.Context, dir string, db *store.DB, fresh bool, names ...string) (map[string]*appendFile, []string, error) {
	lengths, err := db.FileLengths(ctx)
	if err != nil {
		return nil, nil, err
	}
	files := map[string]*appendFile{}
	var repairs []string
	closeAll := func() {
		for _, af := range files {
			// Closing on an error path: the error returned matters more.
			_ = af.f.Close()
		}
	}
	for _, name := range names {
		path := filepath.Join(dir, name)
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("open %s: %w", path, err)
		}
		files[name] = &appendFile{name: name, f: f}
		st, err := f.Stat()
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("stat %s: %w", path, err)
		}
		size, want := st.Size(), lengths[name]
		switch {
		case fresh && size > 0:
			closeAll()
			return nil, nil, fmt.Errorf("%s has %d bytes but %s holds no run: use an empty output directory", path, size, StateFile)
		case size < want:
			closeAll()
			return nil, nil, fmt.Errorf("%s is %d bytes but the state recorded %d: committed records were lost outside this program; start a new output directory", path, size, want)
		case size > want:
			msg, err := repair(f, path, want, size)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			repairs = append(repairs, msg)
		}
		if want > 0 {
			last := make([]byte, 1)
			if _, err := f.ReadAt(last, want-1); err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("read %s: %w", path, err)
			}
			if last[0] != '\n' {
				closeAll()
				return nil, nil, fmt.Errorf("%s: the last recorded record at byte %d does not end a line: the file was changed outside this program", path, want)
			}
		}
		files[name].size = want
	}
	return files, repairs, nil
}

// repair truncates f from size back to want and describes what it removed.
func repair(f *os.File, path string, want, size int64) (string, error) {
	tail := make([]byte, size-want)
	if _, err := f.ReadAt(tail, want); err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if err := f.Truncate(want); err != nil {
		return "", fmt.Errorf("repair %s: truncate to %d bytes: %w", path, want, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("repair %s: %w", path, err)
	}
	complete := bytes.Count(tail, []byte{'\n'})
	partial := len(tail) - (bytes.LastIndexByte(tail, '\n') + 1)
	return fmt.Sprintf("%s: removed %d bytes after the last recorded record at byte %d (%d whole unrecorded lines, a partial line of %d bytes); that work is redone",
		path, len(tail), want, complete, partial), nil
}

// write appends line at the file's recorded end and syncs it.
// The caller commits the new length to the state, then calls advance.
func (af *appendFile) write(line []byte) (offset int64, err error) {
	if _, err := af.f.WriteAt(line, af.size); err != nil {
		return 0, fmt.Errorf("write %s: %w", af.name, err)
	}
	if err := af.f.Sync(); err != nil {
		return 0, fmt.Errorf("sync %s: %w", af.name, err)
	}
	return af.size, nil
}
