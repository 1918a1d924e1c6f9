package atropos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStartEmbeddedStoreDir starts the embedded server on bad store
// directories. Each must fail at once, naming the path and the cause. A
// missing one is created.
func TestStartEmbeddedStoreDir(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(root, "ro")
	if err := os.Mkdir(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	// A store whose jetstream entry is a file: JetStream itself refuses
	// it, which the server reports only to its logger.
	jsFile := filepath.Join(root, "js")
	if err := os.MkdirAll(jsFile, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jsFile, "jetstream"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir string
		want      []string // parts of the error
		root      bool     // skipped as root, who writes anywhere
	}{
		{"a file", file, []string{file, "not a directory"}, false},
		{"under a file", filepath.Join(file, "sub"), []string{filepath.Join(file, "sub"), "not a directory"}, false},
		{"read-only", readOnly, []string{readOnly, "not writable", "permission denied"}, true},
		{"jetstream refuses", jsFile, []string{jsFile, "JetStream"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() == 0 {
				t.Skip("root writes in a read-only directory")
			}
			start := time.Now()
			e, err := StartEmbedded(embeddedAt(tt.dir))
			if err == nil {
				e.Shutdown()
				t.Fatal("started; want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v; want it to name %q", err, w)
				}
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("failed after %v; want at once", d)
			}
		})
	}
	t.Run("missing is created", func(t *testing.T) {
		dir := filepath.Join(root, "new", "store")
		e, err := StartEmbedded(embeddedAt(dir))
		if err != nil {
			t.Fatalf("StartEmbedded: %v", err)
		}
		e.Shutdown()
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			t.Errorf("store %s: %v; want a directory", dir, err)
		}
	})
}

// embeddedAt is DefaultEmbeddedConfig storing in dir.
func embeddedAt(dir string) EmbeddedConfig {
	c := DefaultEmbeddedConfig()
	c.Dir = dir
	return c
}
