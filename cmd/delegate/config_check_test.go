package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
)

// saveTinyCheckpoint writes a small random checkpoint to dir; edit, when
// not nil, changes its weights first.
func saveTinyCheckpoint(t *testing.T, dir string, edit func(p *nn.Params)) {
	t.Helper()
	p, err := nn.Alloc(nn.Config{Vocab: tokenizer.VocabSize, Dim: 8, Layers: 1, Heads: 2, Hidden: 16, Context: 32}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	p.Init(1)
	if edit != nil {
		edit(p)
	}
	if err := nn.Save(dir, p, nil); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// localConfig is a config of one local model at checkpoint.
func localConfig(checkpoint string) string {
	return "models:\n  tiny:\n    kind: local\n    checkpoint: " + checkpoint + "\nroles:\n  default: tiny\n"
}

// config check finds what a run would: a checkpoint that is missing, not
// a checkpoint, or not loadable. Relative paths are the config file's.
func TestConfigCheckCheckpoints(t *testing.T) {
	root := t.TempDir()
	saveTinyCheckpoint(t, filepath.Join(root, "cfg", "ckpt"), nil)
	saveTinyCheckpoint(t, filepath.Join(root, "nan"), func(p *nn.Params) { p.Layers[0].W1[5] = float32(math.NaN()) })
	writeFile(t, filepath.Join(root, "notckpt", "config.json"), "{")
	if err := os.MkdirAll(filepath.Join(root, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The working directory holds a "ckpt" too, which must not be taken.
	wd := t.TempDir()
	t.Chdir(wd)
	if err := os.MkdirAll(filepath.Join(wd, "cfg", "missing"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		checkpoint string
		want       []string // substrings of the error; none: ok
	}{
		{"relative to the config file", "ckpt", nil},
		{"relative, upwards", "../cfg/ckpt", nil},
		{"absolute", filepath.Join(root, "cfg", "ckpt"), nil},
		{"shipped", "shipped:solver", nil},
		{"missing relative names the key, line and resolved path", "missing", []string{"line 4", "models.tiny.checkpoint",
			`"missing" resolves to ` + filepath.Join(root, "cfg", "missing"), "taken from the config file's directory", "no such checkpoint directory", "shipped:solver"}},
		{"missing absolute", filepath.Join(root, "nowhere"), []string{"line 4", "models.tiny.checkpoint", "no such checkpoint directory"}},
		{"no config.json", filepath.Join(root, "empty"), []string{"line 4", "not a checkpoint", "config.json"}},
		{"unreadable config.json", filepath.Join(root, "notckpt"), []string{"line 4", "not a checkpoint", "unexpected end of JSON input"}},
		{"NaN weights", filepath.Join(root, "nan"), []string{"line 4", "models.tiny.checkpoint", "tensor layers.0.feed_forward.w1.weight holds NaN at index 5"}},
		{"unknown shipped model", "shipped:oracle", []string{"line 4", `no shipped model "oracle"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(root, "cfg", "delegate.yaml")
			writeFile(t, path, localConfig(tt.checkpoint))
			out, err := execute(t, testEnv, "config", "check", path)
			if len(tt.want) == 0 {
				if err != nil || !strings.Contains(out, "ok (1 models)") {
					t.Fatalf("config check = %q, %v; want ok", out, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("config check passed (%q), want an error containing %q", out, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// A YAML syntax error is reported at the line that breaks the document. It
// is not reported where its enclosing block began.
func TestParseConfigSyntaxLine(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"key indented less", "models:\n  a:\n    base_url: http://x/v1\n   model: m\n", []string{"line 4:", "indentation", "model: m"}},
		{"key indented more deep in the file", "models:\n  a:\n    base_url: http://x/v1\n    model: m\n  b:\n    base_url: http://x/v1\n      model: m\n", []string{"line 7:", "indentation"}},
		{"after a flow mapping over two lines", "models:\n  a: {base_url: http://x/v1,\n      model: m}\n  b:\n    model: m\n   base_url: x\n", []string{"line 6:"}},
		{"tab", "models:\n\ta:\n    base_url: http://x/v1\n", []string{"line 2:", "tab"}},
		{"unclosed quote", "models:\n  a:\n    base_url: \"http://x/v1\n    model: m\n", []string{"line 3:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.doc))
			if err == nil {
				t.Fatal("ParseConfig succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseConfigRequestsPerMinute(t *testing.T) {
	doc := func(rpm string) string {
		return "models:\n  a:\n    base_url: http://x/v1\n    model: m\n    requests_per_minute: " + rpm + "\n"
	}
	for _, ok := range []string{"0", "1", "600"} {
		if _, err := ParseConfig([]byte(doc(ok))); err != nil {
			t.Errorf("requests_per_minute %s: %v", ok, err)
		}
	}
	for _, bad := range []struct{ rpm, want string }{
		{"0.0001", "would make a request wait 166h40m0s"},
		{"0.5", "would make a request wait 2m0s"},
		{"-3", "is not a rate"},
		{".nan", "is not a rate"},
	} {
		_, err := ParseConfig([]byte(doc(bad.rpm)))
		if err == nil {
			t.Errorf("requests_per_minute %s accepted", bad.rpm)
			continue
		}
		for _, w := range []string{"line 5", "models.a.requests_per_minute", bad.want, "at least 1"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("requests_per_minute %s: error %q does not contain %q", bad.rpm, err, w)
			}
		}
	}
}

// A strategy whose role the config leaves empty is refused before any
// model opens. The error names the role, its key and where the roles are.
func TestMissingRoleNamesKey(t *testing.T) {
	srv := newTestServer(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "delegate.yaml")
	writeFile(t, path, "models:\n  big: {base_url: "+srv.URL+"/v1, model: big}\nroles:\n  subagent: big\n")
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"run", "-c", path, "-s", "single", "hi"}, []string{"strategy single needs a model for role single", "roles.baseline", "roles.default", path, "roles section (line 3)"}},
		{[]string{"run", "-c", path, "-s", "route", "hi"}, []string{"role strong and role weak", "roles.strong and roles.weak"}},
		{[]string{"run", "-c", path, "-s", "lead", "hi"}, []string{"role leader and role peers", "roles.leader and roles.peers"}},
		{[]string{"bench", "-c", path, "--dataset", "open", "--strategies", "decompose", "--out", filepath.Join(dir, "b")}, []string{"role delegator", "roles.delegator"}},
		{[]string{"process", "-c", path, "--dataset", "open", "-n", "1", "--out", filepath.Join(dir, "p")}, []string{"role single", "roles.baseline"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[:4], " "), func(t *testing.T) {
			_, err := execute(t, testEnv, tt.args...)
			if err == nil {
				t.Fatal("got nil error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	writeFile(t, path, "models:\n  big: {base_url: "+srv.URL+"/v1, model: big}\n")
	if _, err := execute(t, testEnv, "run", "-c", path, "-s", "single", "hi"); err == nil || !strings.Contains(err.Error(), "it has no roles section") {
		t.Errorf("no roles section: error %v", err)
	}
}

// config check says which strategies the roles can run, and what each
// other one misses. Every strategy has its roles listed.
func TestConfigCheckListsStrategies(t *testing.T) {
	for _, name := range strategy.Names() {
		if len(strategyRoleKeys[name]) == 0 {
			t.Errorf("strategy %s: no roles listed in strategyRoleKeys", name)
		}
	}
	path := filepath.Join(t.TempDir(), "delegate.yaml")
	writeFile(t, path, "models:\n  big: {base_url: http://127.0.0.1:1/v1, model: big}\nroles:\n  baseline: big\n  strong: big\n")
	out, err := execute(t, testEnv, "config", "check", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"strategies its roles can run: single\n",
		"strategies missing a role: decompose (set roles.delegator and roles.subagent), route (set roles.weak), lead (set roles.leader and roles.peers)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// FuzzParseConfig checks that any document gets a config or an error,
// never a panic. A syntax error names a line of the document.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{goodConfig, "models:\n  a:\n    base_url: http://x/v1\n   model: m\n", "models:\n\ta: 1\n",
		"models: {a: {base_url: \"http://x/v1\n", "preset: world\nmodels:\n  d: {kind: local, checkpoint: shipped:solver}\n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		_, err := ParseConfig([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "YAML syntax error") {
			return
		}
		var line int
		if _, serr := fmt.Sscanf(err.Error(), "line %d:", &line); serr != nil {
			t.Fatalf("syntax error without a line: %v", err)
		}
		if n := strings.Count(doc, "\n") + 1; line < 1 || line > n {
			t.Fatalf("syntax error at line %d of a %d-line document: %v", line, n, err)
		}
	})
}

// config check lists a strategy whose prompt cannot fit a local model's
// context as not runnable, and says why. examples/world.yaml's leader
// reads
// three peers' answers of up to 256 tokens in a 768-token context, and a
// run of lead fails on exactly that. With shorter peer answers it fits.
func TestConfigCheckPromptOverflow(t *testing.T) {
	world := filepath.Join("..", "..", "examples", "world.yaml")
	out, err := execute(t, testEnv, "config", "check", world)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"strategies its roles can run: single, decompose, route\n",
		"not runnable, a prompt overflows its local model's context: lead: its leader (model delegator, a context of 768 tokens) reads 3 peers' answers of up to 256 tokens each",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	_, err = execute(t, testEnv, "run", "--config", world, "--strategy", "lead",
		"Dot has 91 jars of 23 coins. Gus has 19 jars of 83 coins. Gus gets 49 more. How many coins do they have in all?")
	if err == nil || !strings.Contains(err.Error(), "the context holds 768") {
		t.Errorf("run lead: err = %v; want the leader's prompt over the context", err)
	}

	doc, err := os.ReadFile(world)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(filepath.Join("..", "..", "models"))
	if err != nil {
		t.Fatal(err)
	}
	short := strings.ReplaceAll(string(doc), "../models/", abs+"/") + "  peer: {max_tokens: 128}\n"
	path := filepath.Join(t.TempDir(), "world.yaml")
	writeFile(t, path, short)
	out, err = execute(t, testEnv, "config", "check", path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "strategies its roles can run: single, decompose, route, lead\n"; !strings.Contains(out, want) || strings.Contains(out, "not runnable") {
		t.Errorf("with peer max_tokens 128: output lacks %q or lists one not runnable:\n%s", want, out)
	}
}
