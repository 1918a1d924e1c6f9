package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/models"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/openai"
	"github.com/delegatelab/delegate/strategy"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/world/transcript"
	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8/cwriter"
)

// env is how commands read the environment: os.Getenv in main, a map in
// tests. Nothing below cmd reads the environment.
type env func(string) string

// openModels builds one client per configured model, so that roles sharing
// a model share its concurrency and rate limits. API keys are read from the
// variables the config names; a missing key is an error naming the
// variable, never showing a value.
// The returned close function stops local models' engines.
func (c *Config) openModels(getenv env, log *slog.Logger) (map[string]delegate.Model, func(), error) {
	models := map[string]delegate.Model{}
	var locals []localModel
	closeAll := func() {
		for _, l := range locals {
			// Close only fails for calls still in flight, and none are.
			_ = l.Close()
		}
	}
	for _, name := range c.ModelNames() {
		m := c.Models[name]
		if m.Kind == "local" {
			lm, err := openLocal(name, m, c.localTools(), log)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			locals = append(locals, lm)
			models[name] = lm
			continue
		}
		oc := openai.DefaultConfig()
		oc.BaseURL, oc.Replicas, oc.Model = m.BaseURL, m.Replicas, m.Model
		oc.MaxConcurrency, oc.RequestsPerMinute, oc.TokenIDs = m.MaxConcurrency, m.RequestsPerMinute, m.TokenIDs
		if m.Timeout > 0 { // the file's 0 or no key: the client's default
			oc.Timeout = m.Timeout
		}
		if m.MaxRetries != nil {
			oc.MaxRetries = *m.MaxRetries
		}
		if m.APIKeyEnv != "" {
			oc.APIKey = getenv(m.APIKeyEnv)
			if oc.APIKey == "" {
				closeAll()
				return nil, nil, fmt.Errorf("model %s: environment variable %s is empty or unset", name, m.APIKeyEnv)
			}
		}
		if m.Tokenizer != "" {
			hf, err := tokenizer.LoadHF(m.Tokenizer)
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("model %s: tokenizer: %w", name, err)
			}
			f, err := tokenizer.ParseChatFormat(m.ChatTemplate)
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("model %s: chat_template: %w", name, err)
			}
			oc.FillIDs = tokenizer.IDFiller(hf, f)
		}
		model, err := openai.New(oc, openai.WithLogger(log.With("model", name)))
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("model %s: %w", name, err)
		}
		models[name] = c.wrap(model)
	}
	return models, closeAll, nil
}

// wrap applies the preset to a remote model. Under PresetWorld, requests
// offering the delegate tool offer transcript.Tool instead, the declaration
// the world's models were trained on. Local models take it as configuration
// (localTools).
func (c *Config) wrap(m delegate.Model) delegate.Model {
	if c.Preset == PresetWorld {
		return transcript.CompactTools(m)
	}
	return m
}

// localTools are the declarations a local model renders in place of the
// offered ones (local.Config.Tools): under PresetWorld, transcript.Tool.
func (c *Config) localTools() map[string]delegate.Tool {
	if c.Preset == PresetWorld {
		return map[string]delegate.Tool{transcript.Tool.Name: transcript.Tool}
	}
	return nil
}

// openLocal loads a checkpoint and starts a local model over it.
// localModel is a local model as the commands use it: a plain one, or one
// that follows a trainer's checkpoint (local.Reloading).
type localModel interface {
	delegate.Model
	ChatStream(ctx context.Context, req *delegate.Request, emit func(choice int, text string)) (*delegate.Response, error)
	Close() error
}

// openLocal loads a local model. With follow set, the model follows the
// trainer's checkpoint there, polling it until the model is closed.
func openLocal(name string, m ModelConfig, tools map[string]delegate.Tool, log *slog.Logger) (localModel, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if infer.IsGGUF(m.Checkpoint) {
		return openGGUF(name, m, log)
	}
	if !strings.HasPrefix(m.Checkpoint, shippedPrefix) {
		hf, err := infer.IsHF(m.Checkpoint)
		if err != nil {
			return nil, fmt.Errorf("model %s: checkpoint: %w", name, err)
		}
		if hf {
			return openHF(name, m, tools, log)
		}
	}
	var (
		p   *nn.Params
		err error
	)
	if shipped, ok := strings.CutPrefix(m.Checkpoint, shippedPrefix); ok {
		p, _, err = models.Load(shipped)
	} else {
		p, _, err = nn.Load(m.Checkpoint)
	}
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	lcfg := localModelConfig(name, m, tools)
	if m.Follow == "" {
		lm, err := local.New(p, lcfg)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", name, err)
		}
		return lm, nil
	}
	r, err := local.NewReloading(p, m.Follow, lcfg, log)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	every := m.FollowEvery
	if every == 0 {
		every = 2 * time.Second
	}
	ctx, stop := context.WithCancel(context.Background())
	go r.Watch(ctx, every)
	return following{Reloading: r, stop: stop}, nil
}

// localModelConfig is the local.Config of model name: local.DefaultConfig with
// the file's max_batch, when it sets one, and tools.
func localModelConfig(name string, m ModelConfig, tools map[string]delegate.Tool) local.Config {
	c := local.DefaultConfig()
	c.Name, c.Tools = name, tools
	if m.MaxBatch != 0 {
		c.MaxBatch = m.MaxBatch
	}
	return c
}

// openHF loads a Hugging Face checkpoint with its tokenizer and chat
// template, and logs what it holds in memory. The tokenizer is the
// directory's tokenizer.json unless m.Tokenizer names another. The
// template is m.ChatTemplate, else its model_type's.
func openHF(name string, m ModelConfig, tools map[string]delegate.Tool, log *slog.Logger) (localModel, error) {
	if m.Follow != "" {
		return nil, fmt.Errorf("model %s: follow needs a checkpoint of delegate's own format, not a Hugging Face one", name)
	}
	w, info, err := infer.LoadHF(m.Checkpoint, infer.HFOptions{Context: m.Context, Quantize: m.Quantize})
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	tokPath := m.Tokenizer
	if tokPath == "" {
		tokPath = filepath.Join(m.Checkpoint, "tokenizer.json")
	}
	tok, err := tokenizer.LoadHF(tokPath)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	tmpl := m.ChatTemplate
	if tmpl == "" {
		tmpl = infer.HFChatTemplate(info.ModelType)
	}
	f, err := tokenizer.ParseChatFormat(tmpl)
	if err != nil {
		return nil, fmt.Errorf("model %s: chat_template: %w", name, err)
	}
	lm, err := local.NewHF(w, tok, f, info.EOS, localModelConfig(name, m, tools))
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	log.Info("local model loaded", "model", name, "checkpoint", m.Checkpoint, "model_type", info.ModelType, "dtype", info.DType.String(),
		"chat_template", f.String(), "context", w.Config().Context, "memory", lm.Memory().String())
	return lm, nil
}

// openGGUF loads a GGUF file with the tokenizer and chat template it
// embeds, and logs what it holds in memory. m.Tokenizer or m.ChatTemplate
// may name others.
func openGGUF(name string, m ModelConfig, log *slog.Logger) (localModel, error) {
	if m.Follow != "" {
		return nil, fmt.Errorf("model %s: follow needs a checkpoint of delegate's own format, not a GGUF file", name)
	}
	w, info, err := infer.LoadGGUF(m.Checkpoint, infer.HFOptions{Context: m.Context, Quantize: m.Quantize})
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	tok, f, err := ggufTokenizer(info.Tokenizer, m)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	lm, err := local.NewHF(w, tok, f, info.EOS, localModelConfig(name, m, nil))
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	log.Info("local model loaded", "model", name, "checkpoint", m.Checkpoint, "architecture", info.Arch, "dtype", info.DType.String(),
		"chat_template", f.String(), "context", w.Config().Context, "memory", lm.Memory().String())
	return lm, nil
}

// ggufTokenizer is a GGUF model's tokenizer and chat format: the file's
// own, or those m names.
func ggufTokenizer(t infer.GGUFTokenizer, m ModelConfig) (*tokenizer.HF, tokenizer.ChatFormat, error) {
	var (
		tok *tokenizer.HF
		f   tokenizer.ChatFormat
		err error
	)
	if m.Tokenizer != "" {
		tok, err = tokenizer.LoadHF(m.Tokenizer)
	} else {
		tok, err = local.GGUFTokenizer(t)
	}
	if err != nil {
		return nil, 0, err
	}
	if m.ChatTemplate != "" {
		f, err = tokenizer.ParseChatFormat(m.ChatTemplate)
	} else {
		f, err = local.GGUFChatFormat(t.ChatTemplate)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("chat_template: %w", err)
	}
	return tok, f, nil
}

// following is a reloading model whose watch stops when it is closed.
type following struct {
	*local.Reloading
	stop context.CancelFunc
}

func (f following) Close() error {
	f.stop()
	return f.Reloading.Close()
}

// agent returns the model assigned to role, or to the default role, with
// its price. ok is false when neither is assigned.
func (c *Config) agent(models map[string]delegate.Model, role, name string) (delegate.Agent, bool) {
	if name == "" {
		name = c.Roles.Default
	}
	if name == "" {
		return delegate.Agent{}, false
	}
	return delegate.Agent{Role: role, Model: models[name], Price: c.Models[name].Price}, true
}

// strategyRoles assigns the configured models to the strategies' roles.
// Single runs the baseline, decompose the delegator and sub-agents, route
// the strong and weak models, lead the leader and peers.
func (c *Config) strategyRoles(models map[string]delegate.Model) strategy.Roles {
	var r strategy.Roles
	r.Single, _ = c.agent(models, "baseline", c.Roles.Baseline)
	r.Delegator, _ = c.agent(models, "delegator", c.Roles.Delegator)
	r.Subagent, _ = c.agent(models, "subagent", c.Roles.Subagent)
	r.Strong, _ = c.agent(models, "strong", c.Roles.Strong)
	r.Weak, _ = c.agent(models, "weak", c.Roles.Weak)
	r.Leader, _ = c.agent(models, "leader", c.Roles.Leader)
	peers := c.Roles.Peers
	if len(peers) == 0 && c.Roles.Default != "" {
		peers = []string{c.Roles.Default}
	}
	for _, p := range peers {
		a, _ := c.agent(models, "peer", p)
		r.Peers = append(r.Peers, a)
	}
	return r
}

type runFlags struct {
	config   string
	strategy string
	json     bool
	otlp     string
}

func newRunCmd(getenv env, log *slog.Logger) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [flags] REQUEST",
		Short: "Run one request through a strategy, showing the delegation tree live",
		Long: `Run sends REQUEST through a delegation strategy (single, decompose, route
or lead) with the models the config assigns to each role. The tree of calls is
printed as calls start and finish, then the final answer and the tokens,
dollars and latency per role. With --json the trace is printed instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRequest(cmd.Context(), cmd.OutOrStdout(), getenv, log, f, args[0])
		},
	}
	cmd.Flags().StringVarP(&f.config, "config", "c", "", "config file (default $DELEGATE_CONFIG or delegate.yaml)")
	cmd.Flags().StringVarP(&f.strategy, "strategy", "s", "single", "strategy: "+strings.Join(strategy.Names(), ", "))
	cmd.Flags().BoolVar(&f.json, "json", false, "print the trace as JSON instead of the live tree")
	cmd.Flags().StringVar(&f.otlp, "otlp", "", otlpUsage)
	return cmd
}

// terminal reports whether out is a terminal the live view may colour and
// redraw, and its size. NO_COLOR set or TERM=dumb asks for plain lines.
func terminal(out io.Writer, getenv env) (tty bool, width, height int) {
	f, ok := out.(*os.File)
	if !ok || !isTerminal(out) || getenv("NO_COLOR") != "" || getenv("TERM") == "dumb" {
		return false, 0, 0
	}
	width, height, err := cwriter.GetSize(int(f.Fd()))
	if err != nil {
		return true, 80, 24
	}
	return true, width, height
}

func configPath(flag string, getenv env) string {
	switch {
	case flag != "":
		return flag
	case getenv("DELEGATE_CONFIG") != "":
		return getenv("DELEGATE_CONFIG")
	}
	return "delegate.yaml"
}

func runRequest(ctx context.Context, out io.Writer, getenv env, log *slog.Logger, f runFlags, request string) error {
	cfg, err := LoadConfig(configPath(f.config, getenv))
	if err != nil {
		return err
	}
	if err := cfg.checkRoles(f.strategy); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	models, closeModels, err := cfg.openModels(getenv, log)
	if err != nil {
		return err
	}
	defer closeModels()
	s, err := strategy.New(f.strategy, cfg.strategyRoles(models), cfg.Strategy)
	if err != nil {
		return err
	}
	sink, err := openOTLP(f.otlp, getenv, cfg.providers(), log)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer sink.close()
	var events chan delegate.Event
	done := make(chan struct{})
	if f.json {
		close(done)
	} else {
		events = make(chan delegate.Event, 256)
		tty, width, height := terminal(out, getenv)
		go newLiveView(out, tty, width, height).run(events, done)
	}
	trace, runErr := s.Run(ctx, request, events)
	sink.export(trace)
	if events != nil {
		close(events)
	}
	<-done
	if trace == nil {
		return fmt.Errorf("run %s: %w", f.strategy, runErr)
	}
	if f.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(trace); err != nil {
			return err
		}
		return runFailed(f.strategy, trace, runErr)
	}
	fmt.Fprintln(out)
	if trace.Failure != "" {
		fmt.Fprintf(out, "failure: %s\n", trace.Failure)
	}
	fmt.Fprintf(out, "answer:\n%s\n\n", trace.Answer)
	if err := printTotals(out, trace); err != nil {
		return err
	}
	if errors.Is(runErr, context.Canceled) {
		return fmt.Errorf("run interrupted; the partial trace is above")
	}
	return runFailed(f.strategy, trace, runErr)
}

// runFailed is the error run exits with. It is the strategy's error, or
// the trace's failure when the run finished without a proper answer. A
// failed call, an unparsed plan or a format failure leaves none. So a
// script sees a non-zero exit whenever the answer is not one.
func runFailed(strategy string, trace *delegate.Trace, runErr error) error {
	if runErr != nil {
		return runErr
	}
	if trace.Failure != "" {
		return fmt.Errorf("run %s: no proper answer: %s", strategy, trace.Failure)
	}
	return nil
}
