package delegate_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/delegatelab/delegate"

// allowedImports is the layout of the module: for each package, the other
// packages of this module it may import. The root imports only the standard
// library; implementations import the root and not each other, except where
// one composes others. A package missing from this table fails the test, so
// a new package is placed in the layout on purpose.
var allowedImports = map[string][]string{
	"":                       {},
	"bench":                  {"", "store"},
	"cmd/delegate":           {"", "bench", "dataset", "internal/edge", "judge", "local", "models", "nn", "nn/infer", "openai", "pretrain", "reward", "rl", "rollout", "score", "server", "store", "strategy", "telemetry", "tokenizer", "train", "trajectory/atropos", "trajectory/gateway", "trajectory/openenv", "view", "world", "world/transcript"},
	"constrain":              {},
	"dataset":                {""},
	"internal/edge":          {},
	"internal/edge/edgetest": {},
	"internal/host":          {},
	"judge":                  {""},
	"local":                  {"", "constrain", "nn", "nn/infer", "tokenizer"},
	"models":                 {"nn"},
	"modeltest":              {""},
	"nn":                     {"nn/kernel"},
	"nn/infer":               {"nn", "nn/kernel"},
	"nn/kernel":              {},
	"nn/nntest":              {"nn"},
	"nn/train":               {"nn", "nn/kernel"},
	"openai":                 {"", "internal/edge", "openai/wire"},
	"openai/wire":            {},
	"perf/api":               {"internal/host", "trajectory/atropos"},
	"perf/fanout":            {"", "internal/host", "openai", "strategy"},
	"perf/gateway":           {"", "openai", "standin", "strategy", "world", "world/transcript"},
	"perf/gatewaytrain":      {"bench", "rl", "train", "trajectory/gateway", "world"},
	"perf/gzipbomb":          {},
	"perf/hfdecode":          {"nn/infer", "perf/internal/hfgen"},
	"perf/llamacpp":          {"local", "nn/infer", "perf/internal/hfgen", "tokenizer"},
	"perf/q8":                {"nn/infer", "nn/kernel", "perf/internal/hfgen"},
	"perf/internal/hfgen":    {},
	"perf/internal/runc":     {"nn", "tokenizer"},
	"perf/llama2c":           {"nn", "nn/kernel", "perf/internal/runc", "tokenizer"},
	"perf/openenv":           {"internal/edge", "openai", "standin", "trajectory/openenv"},
	"perf/sample":            {"internal/host", "nn", "nn/infer", "nn/kernel", "perf/internal/runc", "tokenizer"},
	"perf/serve":             {},
	"perf/soak":              {"internal/host", "rollout", "standin"},
	"perf/standin":           {"standin"},
	"perf/topology":          {"internal/host"},
	"perf/train/impl":        {"nn/kernel"},
	"pretrain":               {"", "bench", "local", "nn", "nn/train", "strategy", "tokenizer", "world", "world/scripted", "world/transcript"},
	"reward":                 {"", "judge"},
	"rl":                     {"", "nn", "nn/train", "reward"},
	"rollout":                {"", "judge", "reward", "score", "store", "strategy"},
	"score":                  {""},
	"server":                 {"", "internal/edge", "openai/wire"},
	"standin":                {"internal/edge", "openai/wire"},
	"store":                  {""},
	"strategy":               {""},
	"telemetry":              {""},
	"tokenizer":              {""},
	"train":                  {"", "bench", "judge", "local", "models", "nn", "nn/train", "pretrain", "reward", "rl", "rollout", "strategy", "tokenizer", "trajectory/atropos", "world", "world/scripted", "world/transcript"},
	"trajectory/atropos":     {"", "internal/edge", "reward", "rl", "rollout"},
	"trajectory/gateway":     {"", "internal/edge", "judge", "reward", "rollout", "server", "store", "tokenizer"},
	"trajectory/openenv":     {"", "openai/wire", "reward", "strategy", "world", "world/transcript"},
	"view":                   {"", "bench", "internal/edge", "rl", "rollout", "store", "trajectory/gateway"},
	"world":                  {"", "reward"},
	"world/scripted":         {"", "tokenizer", "world", "world/transcript"},
	"world/transcript":       {"", "reward", "strategy", "tokenizer", "world"},
}

// thirdPartyAllowed lists the packages that may import modules outside the
// standard library and this one. Everything else is standard library only
// (plus golang.org/x, which the Go team maintains).
var thirdPartyAllowed = map[string]bool{
	"cmd/delegate": true, "bench": true, "perf/llama2c": true, "perf/standin": true, "perf/fanout": true,
	"train": true, "trajectory/atropos": true, "view": true, "trajectory/openenv": true, "telemetry": true,
	// Prometheus's client library: the edge serves each server's registry,
	// and each server registers its own collectors on it.
	"internal/edge": true, "internal/edge/edgetest": true, "server": true, "standin": true, "trajectory/gateway": true,
	// gguf-parser-go reads the header and metadata of GGUF files.
	"nn/infer": true,
	// The OpenEnv benchmark's WebSocket floor uses the library the
	// environment's server and client use.
	"perf/openenv": true,
}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

func TestLayout(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Standard", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	used := map[string]map[string]bool{} // package -> the module's packages it imports
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		allowed, ok := allowedImports[rel]
		if !ok {
			t.Errorf("package %q is not in the layout table of layout_test.go", p.ImportPath)
			continue
		}
		used[rel] = map[string]bool{}
		for _, imp := range p.Imports {
			switch {
			case imp == module || strings.HasPrefix(imp, module+"/"):
				dep := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
				used[rel][dep] = true
				if !slices.Contains(allowed, "*") && !slices.Contains(allowed, dep) {
					t.Errorf("%s imports %s, which the layout forbids (allowed: %q)", displayName(rel), displayName(dep), allowed)
				}
			case isStandard(imp), strings.HasPrefix(imp, "golang.org/x/"):
			case rel == "" || !thirdPartyAllowed[rel] && !allowsThirdParty(imp):
				t.Errorf("%s imports third-party %s; only %v may", displayName(rel), imp, keys(thirdPartyAllowed))
			}
		}
	}
	// The table states the map exactly: no package that does not exist, no
	// allowed import that nobody makes.
	for rel, allowed := range allowedImports {
		deps, ok := used[rel]
		if !ok {
			t.Errorf("the layout table lists %s, which has no Go package", displayName(rel))
			continue
		}
		for _, dep := range allowed {
			if dep != "*" && !deps[dep] {
				t.Errorf("the layout table allows %s to import %s, which it does not", displayName(rel), displayName(dep))
			}
		}
	}
	for rel := range thirdPartyAllowed {
		if _, ok := used[rel]; !ok {
			t.Errorf("thirdPartyAllowed lists %s, which has no Go package", displayName(rel))
		}
	}
}

// allowsThirdParty names the few third-party imports allowed below cmd,
// each for a reason.
func allowsThirdParty(imp string) bool {
	switch {
	case strings.HasPrefix(imp, "modernc.org/sqlite"): // the embedded database, pure Go
		return true
	case strings.HasPrefix(imp, "go.yaml.in/yaml/"): // config sections decoded where they are defined
		return true
	}
	return false
}

func isStandard(imp string) bool {
	first := imp
	if i := strings.IndexByte(imp, '/'); i >= 0 {
		first = imp[:i]
	}
	return !strings.Contains(first, ".")
}

func displayName(rel string) string {
	if rel == "" {
		return "the root package"
	}
	return path.Join(module, rel)
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
