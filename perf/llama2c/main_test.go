package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/delegatelab/delegate/tokenizer"
)

func TestPromptTokens(t *testing.T) {
	if got, want := promptTokens(""), []int{tokenizer.BOS}; !slices.Equal(got, want) {
		t.Errorf("promptTokens(\"\") = %v, want %v", got, want)
	}
	got := promptTokens("ab")
	want := []int{tokenizer.BOS, ' ' + 3, 'a' + 3, 'b' + 3}
	if !slices.Equal(got, want) {
		t.Errorf("promptTokens(\"ab\") = %v, want %v", got, want)
	}
}

// TestRunDeterministic runs the command twice on the same seed.
// The text, the checkpoint and the exported files must be identical.
// Reloading the saved checkpoint must give the same text again.
func TestRunDeterministic(t *testing.T) {
	args := []string{"-n", "12", "-dim", "16", "-hidden", "24", "-heads", "2", "-kv-heads", "1", "-context", "16", "-prompt", "hi"}
	var outs [2]bytes.Buffer
	dirs := [2]string{t.TempDir(), t.TempDir()}
	for i := range 2 {
		if err := run(append([]string{"-out", dirs[i]}, args...), &outs[i], &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
	}
	if outs[0].String() != outs[1].String() {
		t.Errorf("same seed, different text: %q vs %q", outs[0].String(), outs[1].String())
	}
	for _, f := range []string{"model.bin", "tokenizer.bin", "ckpt/model.safetensors"} {
		a, err1 := os.ReadFile(filepath.Join(dirs[0], f))
		b, err2 := os.ReadFile(filepath.Join(dirs[1], f))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between runs (errors %v, %v)", f, err1, err2)
		}
	}
	var again bytes.Buffer
	if err := run([]string{"-out", t.TempDir(), "-ckpt", filepath.Join(dirs[0], "ckpt"), "-n", "12", "-prompt", "hi"}, &again, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if again.String() != outs[0].String() {
		t.Errorf("reloaded checkpoint gives %q, want %q", again.String(), outs[0].String())
	}
}
