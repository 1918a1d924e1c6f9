package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagValueThatIsAFlag checks that a value-taking flag does not
// swallow the next flag: "api --data --help" served from ./--help.
func TestFlagValueThatIsAFlag(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"api", "--data", "--help"}, `--data got "--help"`},
		{[]string{"gateway", "--config", "--addr", "127.0.0.1:0"}, `--config got "--addr"`},
		{[]string{"api", "--data", "d", "--allow-host", "--addr=127.0.0.1:0"}, `--allow-host got "--addr=127.0.0.1:0"`},
	}
	for _, tt := range tests {
		_, err := execute(t, func(string) string { return "" }, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: got error %v, want one containing %s", tt.args, err, tt.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "--help")); err == nil {
		t.Errorf("a directory named --help was created")
	}
}
