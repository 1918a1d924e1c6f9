package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/world/transcript"
)

const goodConfig = `
models:
  nano:
    base_url: https://api.openai.com/v1
    model: gpt-4.1-nano
    api_key_env: OPENAI_API_KEY
    price: {input: 0.10, cached_input: 0.025, output: 0.40}
    timeout: 30s
    max_retries: 2
  local:
    base_url: http://127.0.0.1:8000/v1
    model: Qwen/Qwen2.5-1.5B-Instruct
    max_concurrency: 8
roles:
  delegator: nano
  subagent: local
  peers: [nano, local, local]
`

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(goodConfig))
	if err != nil {
		t.Fatal(err)
	}
	nano := cfg.Models["nano"]
	if nano.Timeout.Seconds() != 30 || *nano.MaxRetries != 2 || nano.Price.Output != 0.40 {
		t.Errorf("nano = %+v", nano)
	}
	if got := cfg.Roles.Peers; len(got) != 3 || got[2] != "local" {
		t.Errorf("peers = %v", got)
	}
	if !cfg.Judge.BothOrders || cfg.Judge.Repeats != 1 {
		t.Errorf("judge = %+v, want the judge's defaults where the file says nothing", cfg.Judge)
	}
}

// A judge section changes only the keys it names.
func TestParseConfigJudge(t *testing.T) {
	cfg, err := ParseConfig([]byte(goodConfig + "judge:\n  repeats: 3\n  combine: average\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Judge.Repeats != 3 || cfg.Judge.Combine != "average" || !cfg.Judge.BothOrders || cfg.Judge.Mode != "pairwise" {
		t.Errorf("judge = %+v", cfg.Judge)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string // substrings of the error
	}{
		{"empty", "  \n", []string{"empty config"}},
		{"unknown key names key and line", "models:\n  a:\n    base_url: http://x/v1\n    model: m\n    tempreature: 0.2\n", []string{"line 5", `unknown key "tempreature"`}},
		{"unknown top-level key", "models:\n  a: {base_url: http://x/v1, model: m}\nrole:\n  delegator: a\n", []string{"line 3", `unknown key "role"`}},
		{"wrong type", "models:\n  a:\n    base_url: http://x/v1\n    model: m\n    max_retries: many\n", []string{"line 5", "many"}},
		{"bad duration", "models:\n  a:\n    base_url: http://x/v1\n    model: m\n    timeout: soon\n", []string{"line 5", "soon"}},
		{"no models", "roles: {delegator: a}\n", []string{"no models"}},
		{"missing base_url", "models:\n  a:\n    model: m\n", []string{"line 2", "models.a", "base_url is required"}},
		{"bad scheme", "models:\n  a:\n    base_url: ftp://x\n    model: m\n", []string{"line 3", "http://"}},
		{"role names unknown model", "models:\n  a: {base_url: http://x/v1, model: m}\nroles:\n  delegator: b\n", []string{"line 4", "roles.delegator", `"b"`}},
		{"peer names unknown model", "models:\n  a: {base_url: http://x/v1, model: m}\nroles:\n  peers:\n    - a\n    - zz\n", []string{"line 6", "roles.peers[1]", `"zz"`}},
		{"key instead of env name", "models:\n  a:\n    base_url: http://x/v1\n    model: m\n    api_key_env: sk-abc123\n", []string{"line 5", "not an environment variable name"}},
		{"negative price", "models:\n  a:\n    base_url: http://x/v1\n    model: m\n    price: {input: -1}\n", []string{"line 5", "negative"}},
		{"two documents", "models:\n  a: {base_url: http://x/v1, model: m}\n---\nmodels: {}\n", []string{"more than one YAML document"}},
		{"judge bad mode", "models:\n  a: {base_url: http://x/v1, model: m}\njudge:\n  mode: vibes\n", []string{"judge", "vibes"}},
		{"judge unknown key", "models:\n  a: {base_url: http://x/v1, model: m}\njudge:\n  repeat: 3\n", []string{"line 4", `unknown key "repeat"`}},
		{"unknown preset", "preset: wrld\nmodels:\n  a: {base_url: http://x/v1, model: m}\n", []string{"line 1", "preset", `"wrld"`}},
		{"unknown kind", "models:\n  a:\n    kind: grpc\n    base_url: http://x/v1\n    model: m\n", []string{"line 3", `unknown kind "grpc"`}},
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
			if strings.Contains(err.Error(), "sk-abc123") {
				t.Errorf("error leaks a key: %q", err)
			}
		})
	}
}

func TestExampleConfigsAreValid(t *testing.T) {
	for _, path := range []string{"../../examples/openai.yaml", "../../examples/local.yaml", "../../examples/world.yaml"} {
		if _, err := LoadConfig(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}

func TestParseConfigWorldPreset(t *testing.T) {
	doc := "preset: world\nmodels:\n  a: {base_url: http://x/v1, model: m}\nstrategy:\n  single: {temperature: 0.3}\n"
	cfg, err := ParseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := transcript.StrategyConfig()
	want.Single.Temperature = 0.3
	if !reflect.DeepEqual(cfg.Strategy, want) {
		t.Errorf("strategy = %+v\nwant the world's with single's temperature set: %+v", cfg.Strategy, want)
	}
	plain, err := ParseConfig([]byte("models:\n  a: {base_url: http://x/v1, model: m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plain.Strategy, strategy.DefaultConfig()) {
		t.Errorf("without a preset the strategy section starts from strategy.DefaultConfig, got %+v", plain.Strategy)
	}
}
