package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/models"
	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/world/transcript"
	"go.yaml.in/yaml/v3"
)

// Config is the YAML file that names models and assigns them to roles.
//
//	models:
//	  nano:
//	    base_url: https://api.openai.com/v1
//	    model: gpt-4.1-nano
//	    api_key_env: OPENAI_API_KEY
//	    price: {input: 0.10, cached_input: 0.025, output: 0.40}
//	roles:
//	  delegator: nano
//	  subagent: nano
//
// Unknown keys and values of the wrong type are errors naming the key and
// its line; Validate checks that every role names a defined model.
type Config struct {
	// Preset picks the defaults the strategy section starts from. "" takes
	// the strategy package's. "world" takes world/transcript's compact
	// prompts, budgets and delegate tool declaration, which the shipped
	// local models were trained on (examples/world.yaml).
	Preset string                 `yaml:"preset"`
	Models map[string]ModelConfig `yaml:"models"`
	Roles  RolesConfig            `yaml:"roles"`
	// Strategy tunes the four strategies; absent keys keep
	// strategy.DefaultConfig's values.
	Strategy strategy.Config `yaml:"strategy"`
	// Judge tunes the LLM judge (mode, both orders, repeats, tie margin,
	// prompts); absent keys keep judge.DefaultConfig's values.
	Judge judge.Config `yaml:"judge"`
	// Reward selects and tunes the reward of delegate process. Its kind is
	// graded, success_gated, efficiency, critical_path or per_call. Absent
	// keys keep reward.DefaultConfig's values. --reward overrides the kind.
	Reward reward.Config `yaml:"reward"`

	path  string
	lines map[string]int    // "roles.delegator" -> line, for cross-field errors
	raw   map[string]string // model name -> checkpoint as the file writes it
}

// ModelConfig describes one model: an endpoint, or a local checkpoint.
type ModelConfig struct {
	// Kind is "openai" (any OpenAI-compatible endpoint; the default) or
	// "local" (a checkpoint of our own transformer, run in-process).
	Kind    string `yaml:"kind"`
	BaseURL string `yaml:"base_url"`
	// Replicas are further base URLs serving the same model, as replicas
	// of one inference server. Each request goes to the least-busy healthy
	// one, and the trace names it.
	Replicas []string `yaml:"replicas"`
	Model    string   `yaml:"model"`
	// APIKeyEnv names the environment variable holding the API key; the
	// key itself never appears in the file. Empty for local servers.
	APIKeyEnv         string         `yaml:"api_key_env"`
	Price             delegate.Price `yaml:"price"`
	Timeout           time.Duration  `yaml:"timeout"`     // per attempt; default 120s
	MaxRetries        *int           `yaml:"max_retries"` // default 4
	MaxConcurrency    int            `yaml:"max_concurrency"`
	RequestsPerMinute float64        `yaml:"requests_per_minute"`
	// TokenIDs asks a vLLM server for token ids with logprobs.
	TokenIDs bool `yaml:"token_ids"`
	// Tokenizer is the model's Hugging Face tokenizer.json, relative to the
	// config file. ChatTemplate is its family's chat template: qwen2.5,
	// qwen3 or llama3. For a server that returns no token ids, they give
	// the prompt and generated tokens their ids, where those agree with the
	// pieces the server reported (tokenizer.IDFiller). For a
	// local Hugging Face checkpoint they override the checkpoint's own
	// tokenizer.json and the template its model_type implies.
	Tokenizer    string `yaml:"tokenizer"`
	ChatTemplate string `yaml:"chat_template"`

	// Checkpoint is a local model's directory (nn.Save); relative paths
	// are taken from the config file's directory. "shipped:solver" and
	// "shipped:delegator" are the shipped models built into the binary.
	// A Hugging Face checkpoint directory (config.json with a model_type,
	// safetensors weights: Llama 3 and Qwen2, 2.5 and 3 families, see
	// docs/hf-models.md) works too: its tokenizer.json and its family's
	// chat template are used unless tokenizer and chat_template say
	// otherwise. So does a GGUF file (llama.cpp's format: llama and qwen2
	// in f32, f16, bf16 or q8_0), with the tokenizer and chat template it
	// embeds.
	Checkpoint string `yaml:"checkpoint"`
	// Quantize, when "q8_0", quantises a checkpoint's matrices to q8_0 at
	// load. It works for Hugging Face and GGUF checkpoints. It takes about
	// half the memory of bfloat16 and decodes faster; docs/engine.md gives
	// its cost in accuracy.
	Quantize string `yaml:"quantize"`
	// Context caps a Hugging Face checkpoint's context, prompt and
	// generation, which sizes its KV cache. The default is its
	// max_position_embeddings, at most 2048.
	Context int `yaml:"context"`
	// MaxBatch is how many sequences a local model decodes together. 0 or
	// none is local.DefaultConfig's.
	MaxBatch int `yaml:"max_batch"`
	// SystemPrompt is the system message `delegate serve` sends when a
	// request has none. It is the prompt the model was trained with.
	SystemPrompt string `yaml:"system_prompt"`
	// Follow is a trainer's checkpoint directory that a local model follows,
	// such as delegate train's OUT/checkpoint. The model starts on
	// Checkpoint. Every FollowEvery, default 2s, it loads the trainer's
	// newest step when there is one, without dropping calls in flight; every
	// response says which step produced it. Relative to the config file.
	Follow      string        `yaml:"follow"`
	FollowEvery time.Duration `yaml:"follow_every"`
}

// RolesConfig assigns models to roles by name. Default, when set, plays
// every role left empty.
type RolesConfig struct {
	Default   string   `yaml:"default"`
	Delegator string   `yaml:"delegator"`
	Subagent  string   `yaml:"subagent"`
	Judge     string   `yaml:"judge"`
	Baseline  string   `yaml:"baseline"`
	Leader    string   `yaml:"leader"`
	Peers     []string `yaml:"peers"`
	Strong    string   `yaml:"strong"`
	Weak      string   `yaml:"weak"`
}

// named returns the single-model roles with their names, in a fixed order.
func (r RolesConfig) named() []struct{ role, model string } {
	return []struct{ role, model string }{
		{"default", r.Default}, {"delegator", r.Delegator}, {"subagent", r.Subagent}, {"judge", r.Judge},
		{"baseline", r.Baseline}, {"leader", r.Leader}, {"strong", r.Strong}, {"weak", r.Weak},
	}
}

// LoadConfig reads and validates a config file.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	cfg.path = path
	var errs []error
	for _, name := range cfg.ModelNames() {
		m := cfg.Models[name]
		if m.Kind != "local" {
			continue
		}
		if m.Tokenizer != "" && !filepath.IsAbs(m.Tokenizer) {
			m.Tokenizer = filepath.Join(filepath.Dir(path), m.Tokenizer)
			cfg.Models[name] = m
		}
		if m.Follow != "" && !filepath.IsAbs(m.Follow) {
			m.Follow = filepath.Join(filepath.Dir(path), m.Follow)
			cfg.Models[name] = m
		}
		key := "models." + name + ".checkpoint"
		if shipped, ok := strings.CutPrefix(m.Checkpoint, shippedPrefix); ok {
			if !slices.Contains(models.Names, shipped) {
				errs = append(errs, cfg.at(key, "%q: there is no shipped model %q (the shipped models are %s)", m.Checkpoint, shipped, shippedList()))
			}
			continue
		}
		if !filepath.IsAbs(m.Checkpoint) {
			m.Checkpoint = filepath.Join(filepath.Dir(path), m.Checkpoint)
			cfg.Models[name] = m
		}
		if infer.IsGGUF(m.Checkpoint) {
			if m.Follow != "" {
				errs = append(errs, cfg.at("models."+name+".follow", "follows a trainer's checkpoint; %s is a GGUF file, which delegate does not train", m.Checkpoint))
			}
		} else if err := checkCheckpointDir(m.Checkpoint); err == nil {
			if hf, _ := infer.IsHF(m.Checkpoint); !hf && (m.Tokenizer != "" || m.ChatTemplate != "" || m.Context != 0 || m.Quantize != "") {
				errs = append(errs, cfg.at("models."+name, "tokenizer, chat_template, context and quantize belong to a Hugging Face checkpoint or a GGUF file; %s is one of delegate's own, with its built-in tokenizer", m.Checkpoint))
			}
			if hf, _ := infer.IsHF(m.Checkpoint); hf && m.Follow != "" {
				errs = append(errs, cfg.at("models."+name+".follow", "follows a trainer's checkpoint; %s is a Hugging Face checkpoint, which delegate does not train", m.Checkpoint))
			}
		} else {
			if !filepath.IsAbs(cfg.raw[name]) {
				abs, aerr := filepath.Abs(m.Checkpoint)
				if aerr != nil {
					abs = m.Checkpoint
				}
				err = fmt.Errorf("%q resolves to %s (a relative checkpoint is taken from the config file's directory, not the working directory): %w", cfg.raw[name], abs, err)
			}
			errs = append(errs, cfg.at(key, "%v; the shipped models are built into delegate as %s", err, shippedList()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// shippedPrefix names a checkpoint embedded in the binary (package
// models): "shipped:solver", "shipped:delegator". A config naming them works
// from any directory.
const shippedPrefix = "shipped:"

func shippedList() string {
	var s []string
	for _, n := range models.Names {
		s = append(s, shippedPrefix+n)
	}
	return strings.Join(s, " and ")
}

// checkCheckpointDir checks that dir looks like an nn checkpoint, without
// loading the weights. It must hold a config.json that is a JSON object.
// Loading it (config check, or any command that opens the model) checks the
// rest.
func checkCheckpointDir(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return errors.New("no such checkpoint directory")
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return errors.New("not a directory (a checkpoint is a directory holding config.json and model.safetensors)")
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return fmt.Errorf("not a checkpoint: %w", err)
	}
	var probe map[string]any
	if err := json.Unmarshal(b, &probe); err != nil {
		return fmt.Errorf("not a checkpoint: %s: %w", filepath.Join(dir, "config.json"), err)
	}
	return nil
}

// ParseConfig decodes and validates a config document.
func ParseConfig(b []byte) (*Config, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("empty config")
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, syntaxError(b, err)
	}
	cfg := Config{Strategy: strategy.DefaultConfig(), Judge: judge.DefaultConfig(), Reward: reward.DefaultConfig()}
	cfg.lines = map[string]int{}
	collectLines(&root, "", cfg.lines)
	switch preset := topLevel(&root, "preset"); preset {
	case "":
	case PresetWorld:
		cfg.Strategy = transcript.StrategyConfig()
	default:
		return nil, cfg.at("preset", "unknown preset %q (want %s, or no preset)", preset, PresetWorld)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, errors.New("config holds more than one YAML document")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.raw = map[string]string{}
	for name, m := range cfg.Models {
		cfg.raw[name] = m.Checkpoint
	}
	return &cfg, nil
}

// maxSyntaxSearch bounds the lines syntaxError searches (each line one
// parse of the prefix: quadratic), far above any config's length.
const maxSyntaxSearch = 2000

// syntaxError reports a YAML syntax error at the line where the document
// stops being YAML. The decoder often names the line where the enclosing
// block began instead (an indentation error deep in a file is reported at
// line 1), so the line is found again: it is the line after the longest
// prefix of the document that parses, among the prefixes after which no
// longer one parses (a flow mapping or quoted string spanning lines makes
// some prefixes fail on their own).
func syntaxError(b []byte, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return yamlError(err)
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	decoderLine := ""
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ": "); i >= 0 {
			decoderLine, msg = rest[:i], rest[i+2:]
		}
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines) > maxSyntaxSearch {
		return fmt.Errorf("line %s: YAML syntax error: %s (the line the decoder names: the document is too long to search for the exact one)", decoderLine, msg)
	}
	parsed := 0 // the longest prefix, in lines, that parses
	for k := 1; k <= len(lines); k++ {
		var n yaml.Node
		if yaml.Unmarshal(bytes.Join(lines[:k], nil), &n) == nil {
			parsed = k
		}
	}
	line := min(parsed+1, len(lines))
	hint := ""
	if strings.Contains(msg, "did not find expected key") || strings.Contains(msg, "mapping values are not allowed") ||
		strings.Contains(msg, "did not find expected '-' indicator") {
		hint = " (check the indentation of this line and the ones above it)"
	}
	if strings.Contains(msg, "found character that cannot start any token") && bytes.Contains(lines[line-1], []byte("\t")) {
		hint = " (a tab: YAML indents with spaces)"
	}
	return fmt.Errorf("line %d: YAML syntax error: %s%s: %s", line, msg, hint, strings.TrimRight(string(lines[line-1]), "\r\n"))
}

// PresetWorld is the preset of package world's local models.
const PresetWorld = "world"

// topLevel returns the scalar value of a document's top-level key. It is
// "" when absent or not a scalar; the decoder then reports the type.
func topLevel(doc *yaml.Node, key string) string {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return ""
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.ScalarNode {
			return m.Content[i+1].Value
		}
	}
	return ""
}

// yamlError makes the decoder's messages read as ours. "line 4: field
// tempreature not found in type main.ModelConfig" becomes "line 4:
// unknown key "tempreature"".
func yamlError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("parse: %w", err)
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		if j := strings.Index(m, "field "); j >= 0 && strings.Contains(m, " not found in type ") {
			key := m[j+len("field "):]
			key = key[:strings.Index(key, " not found in type ")]
			m = m[:j] + fmt.Sprintf("unknown key %q", key)
		}
		msgs[i] = m
	}
	return errors.New(strings.Join(msgs, "; "))
}

func collectLines(n *yaml.Node, prefix string, lines map[string]int) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			collectLines(c, prefix, lines)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if prefix != "" {
				key = prefix + "." + key
			}
			lines[key] = n.Content[i].Line
			collectLines(n.Content[i+1], key, lines)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			key := fmt.Sprintf("%s[%d]", prefix, i)
			lines[key] = c.Line
			collectLines(c, key, lines)
		}
	}
}

// at prefixes a message with the line of key, when known.
func (c *Config) at(key, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if line, ok := c.lines[key]; ok {
		return fmt.Errorf("line %d: %s: %s", line, key, msg)
	}
	return fmt.Errorf("%s: %s", key, msg)
}

// Validate checks every model and that every role names a defined model.
func (c *Config) Validate() error {
	if len(c.Models) == 0 {
		return c.at("models", "no models defined")
	}
	var errs []error
	for _, name := range c.ModelNames() {
		errs = append(errs, c.validateModel("models."+name, c.Models[name])...)
	}
	for _, r := range c.Roles.named() {
		if _, ok := c.Models[r.model]; r.model != "" && !ok {
			errs = append(errs, c.at("roles."+r.role, "names model %q, which is not defined under models", r.model))
		}
	}
	if err := c.Strategy.Validate(); err != nil {
		errs = append(errs, c.at("strategy", "%v", err))
	}
	if err := c.Judge.Validate(); err != nil {
		errs = append(errs, c.at("judge", "%v", err))
	}
	if err := c.Reward.Validate(); err != nil {
		errs = append(errs, c.at("reward", "%v", err))
	}
	for i, p := range c.Roles.Peers {
		if _, ok := c.Models[p]; !ok {
			errs = append(errs, c.at(fmt.Sprintf("roles.peers[%d]", i), "names model %q, which is not defined under models", p))
		}
	}
	return errors.Join(errs...)
}

// validateModel checks the model at key by its kind, then the settings
// of every kind.
func (c *Config) validateModel(key string, m ModelConfig) []error {
	var errs []error
	switch m.Kind {
	case "", "openai":
		errs = c.validateOpenAI(key, m)
	case "local":
		errs = c.validateLocal(key, m)
	default:
		errs = append(errs, c.at(key+".kind", "unknown kind %q (want openai or local)", m.Kind))
	}
	if m.Price.Input < 0 || m.Price.CachedInput < 0 || m.Price.Output < 0 {
		errs = append(errs, c.at(key+".price", "prices must not be negative"))
	}
	if m.Timeout < 0 {
		errs = append(errs, c.at(key+".timeout", "must not be negative"))
	}
	if m.MaxRetries != nil && *m.MaxRetries < 0 {
		errs = append(errs, c.at(key+".max_retries", "must not be negative"))
	}
	if m.MaxConcurrency < 0 {
		errs = append(errs, c.at(key+".max_concurrency", "must not be negative"))
	}
	switch rpm := m.RequestsPerMinute; {
	case rpm < 0 || math.IsNaN(rpm) || math.IsInf(rpm, 0):
		errs = append(errs, c.at(key+".requests_per_minute", "%v is not a rate: give requests per minute, at least %d (or 0 for no limit)", rpm, minRequestsPerMinute))
	case rpm > 0 && rpm < minRequestsPerMinute:
		errs = append(errs, c.at(key+".requests_per_minute", "%v would make a request wait %s for its turn: give at least %d per minute (or 0 for no limit)",
			rpm, time.Duration(float64(time.Minute)/rpm).Round(time.Minute), minRequestsPerMinute))
	}
	if m.APIKeyEnv != "" && !validEnvName(m.APIKeyEnv) {
		errs = append(errs, c.at(key+".api_key_env", "is not an environment variable name (put the variable's name here, never the key itself)"))
	}
	return errs
}

// validateOpenAI checks the settings of a model of kind openai.
func (c *Config) validateOpenAI(key string, m ModelConfig) []error {
	var errs []error
	if m.BaseURL == "" {
		errs = append(errs, c.at(key, "base_url is required"))
	} else if !strings.HasPrefix(m.BaseURL, "http://") && !strings.HasPrefix(m.BaseURL, "https://") {
		errs = append(errs, c.at(key+".base_url", "must start with http:// or https://, got %q", m.BaseURL))
	}
	for i, r := range m.Replicas {
		if !strings.HasPrefix(r, "http://") && !strings.HasPrefix(r, "https://") {
			errs = append(errs, c.at(fmt.Sprintf("%s.replicas[%d]", key, i), "must start with http:// or https://, got %q", r))
		}
	}
	if m.Model == "" {
		errs = append(errs, c.at(key, "model is required"))
	}
	if m.Checkpoint != "" || m.MaxBatch != 0 || m.Follow != "" || m.Context != 0 || m.Quantize != "" {
		errs = append(errs, c.at(key, "checkpoint, max_batch, follow, context and quantize belong to kind: local"))
	}
	if (m.Tokenizer == "") != (m.ChatTemplate == "") {
		errs = append(errs, c.at(key, "tokenizer and chat_template go together"))
	} else if m.ChatTemplate != "" {
		if _, err := tokenizer.ParseChatFormat(m.ChatTemplate); err != nil {
			errs = append(errs, c.at(key+".chat_template", "%v", err))
		}
	}
	return errs
}

// validateLocal checks the settings of a model of kind local.
func (c *Config) validateLocal(key string, m ModelConfig) []error {
	var errs []error
	if m.Checkpoint == "" {
		errs = append(errs, c.at(key, "checkpoint is required for kind: local"))
	}
	if m.BaseURL != "" || len(m.Replicas) > 0 || m.APIKeyEnv != "" {
		errs = append(errs, c.at(key, "base_url, replicas and api_key_env belong to kind: openai"))
	}
	if m.MaxBatch < 0 {
		errs = append(errs, c.at(key+".max_batch", "must not be negative"))
	}
	if m.FollowEvery < 0 || m.FollowEvery > 0 && m.Follow == "" {
		errs = append(errs, c.at(key+".follow_every", "must be positive, and goes with follow"))
	}
	if m.Context < 0 {
		errs = append(errs, c.at(key+".context", "must not be negative"))
	}
	if m.Quantize != "" && m.Quantize != "q8_0" {
		errs = append(errs, c.at(key+".quantize", "unknown quantisation %q (want q8_0)", m.Quantize))
	}
	if m.Quantize != "" && strings.HasPrefix(m.Checkpoint, shippedPrefix) {
		errs = append(errs, c.at(key+".quantize", "applies to Hugging Face and GGUF checkpoints, not to the shipped models"))
	}
	if m.ChatTemplate != "" {
		if _, err := tokenizer.ParseChatFormat(m.ChatTemplate); err != nil {
			errs = append(errs, c.at(key+".chat_template", "%v", err))
		}
	}
	return errs
}

// minRequestsPerMinute is the slowest rate limit a model may have. A
// slower one makes each request wait over a minute, which looks like a
// hung run; requests_per_minute: 0.0001 is a wait of a week.
const minRequestsPerMinute = 1

// strategyRoleKeys are the roles each strategy needs, with the config key
// that assigns each. roles.default stands in for any of them.
var strategyRoleKeys = map[string][]struct{ role, key string }{
	strategy.NameSingle:    {{"single", "baseline"}},
	strategy.NameDecompose: {{"delegator", "delegator"}, {"subagent", "subagent"}},
	strategy.NameRoute:     {{"strong", "strong"}, {"weak", "weak"}},
	strategy.NameLead:      {{"leader", "leader"}, {"peers", "peers"}},
}

// missingRoleKeys are the config keys of the roles of strategy name that
// the config leaves without a model.
func (c *Config) missingRoleKeys(name string) []string {
	set := map[string]bool{
		"baseline": c.Roles.Baseline != "", "delegator": c.Roles.Delegator != "", "subagent": c.Roles.Subagent != "",
		"strong": c.Roles.Strong != "", "weak": c.Roles.Weak != "", "leader": c.Roles.Leader != "", "peers": len(c.Roles.Peers) > 0,
	}
	var keys []string
	for _, r := range strategyRoleKeys[name] {
		if !set[r.key] && c.Roles.Default == "" {
			keys = append(keys, "roles."+r.key)
		}
	}
	return keys
}

// checkRoles tells, naming the config keys, which roles of strategy name
// the config leaves without a model.
func (c *Config) checkRoles(name string) error {
	keys := c.missingRoleKeys(name)
	if len(keys) == 0 {
		return nil
	}
	var missing []string
	for _, r := range strategyRoleKeys[name] {
		if slices.Contains(keys, "roles."+r.key) {
			missing = append(missing, "role "+r.role)
		}
	}
	file := c.path
	if file == "" {
		file = "the config"
	}
	where := "it has no roles section"
	if line, ok := c.lines["roles"]; ok {
		where = fmt.Sprintf("its roles section (line %d) does not set them", line)
	}
	return fmt.Errorf("strategy %s needs a model for %s: set %s (or roles.default, which plays every role left empty) in %s; %s",
		name, strings.Join(missing, " and "), strings.Join(keys, " and "), file, where)
}

// ModelNames returns the defined model names, sorted.
func (c *Config) ModelNames() []string {
	names := make([]string, 0, len(c.Models))
	for n := range c.Models {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func validEnvName(s string) bool {
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// strategyModels are the names of the models that play the roles of
// strategy name, sorted, each once.
func (c *Config) strategyModels(name string) []string {
	byKey := map[string][]string{
		"baseline": {c.Roles.Baseline}, "delegator": {c.Roles.Delegator}, "subagent": {c.Roles.Subagent},
		"strong": {c.Roles.Strong}, "weak": {c.Roles.Weak}, "leader": {c.Roles.Leader}, "peers": c.Roles.Peers,
	}
	seen := map[string]bool{}
	for _, r := range strategyRoleKeys[name] {
		models := byKey[r.key]
		if len(models) == 0 || models[0] == "" {
			models = []string{c.Roles.Default}
		}
		for _, m := range models {
			if m != "" {
				seen[m] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
