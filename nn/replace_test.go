package nn

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestReplaceDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	write := func(text string) func(string) error {
		return func(tmp string) error {
			if err := os.MkdirAll(tmp, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(tmp, "f"), []byte(text), 0o644)
		}
	}
	read := func() string {
		t.Helper()
		cur, ok := CurrentDir(dir)
		if !ok {
			return "<none>"
		}
		b, err := os.ReadFile(filepath.Join(cur, "f"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(); got != "<none>" {
		t.Fatalf("before any save: %q", got)
	}
	for _, text := range []string{"one", "two"} {
		if err := ReplaceDir(dir, write(text)); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != text {
			t.Errorf("after saving %q: read %q", text, got)
		}
	}
	// A failed write leaves the previous contents in place.
	boom := errors.New("boom")
	if err := ReplaceDir(dir, func(string) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("failed write: %v, want boom", err)
	}
	if got := read(); got != "two" {
		t.Errorf("after a failed write: read %q, want two", got)
	}
	// A crash between the renames leaves only dir.old: CurrentDir finds it.
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "two" {
		t.Errorf("with only the .old copy: read %q, want two", got)
	}
	if err := ReplaceDir(dir, write("three")); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "three" {
		t.Errorf("saving over a lone .old: read %q", got)
	}
	if _, err := os.Stat(dir + ".old"); !os.IsNotExist(err) {
		t.Errorf("the .old copy survived a completed save: %v", err)
	}
}
