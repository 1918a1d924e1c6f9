package nn

import (
	"errors"
	"fmt"
	"os"
)

// ReplaceDir writes a directory whole and swaps it in for dir.
// A crash leaves the previous contents or the new ones, never a mix. write
// fills dir+".tmp", emptied first; then dir moves to dir+".old", the new one
// to dir, and dir+".old" is removed. CurrentDir finds what a crash between
// the two renames left. Training state is saved this way: rl's checkpoints
// and pretrain's resumable state.
func ReplaceDir(dir string, write func(tmp string) error) error {
	tmp, old := dir+".tmp", dir+".old"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	if err := write(tmp); err != nil {
		return err
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	if err := os.Rename(dir, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	return nil
}

// CurrentDir returns the directory ReplaceDir last completed for dir.
// That is dir itself, or dir+".old" when a crash came between the two
// renames. ok is false when there is neither.
func CurrentDir(dir string) (string, bool) {
	for _, d := range []string{dir, dir + ".old"} {
		if _, err := os.Stat(d); err == nil {
			return d, true
		}
	}
	return "", false
}
