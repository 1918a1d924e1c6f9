package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/judge"
	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/score"
	"github.com/delegatelab/delegate/server"
	"github.com/delegatelab/delegate/tokenizer"
	"github.com/delegatelab/delegate/trajectory/atropos"
	"github.com/delegatelab/delegate/trajectory/gateway"
	"github.com/delegatelab/delegate/world"
)

// gatewayTokenEnv names the variable that holds the session API's token.
const gatewayTokenEnv = "DELEGATE_GATEWAY_TOKEN"

type gatewayFlags struct {
	config, addr, out, token, estimator string
	insecure                            bool
	hosts, trained                      []string
	roles                               map[string]string
	ttl                                 time.Duration
	group                               int
	temperature                         float64
	timeouts                            server.Timeouts
	push                                pushFlags
	pushWait                            time.Duration
	otlp                                string
	// The reward of verified sessions, as process reads it; reward ""
	// leaves it to the config's reward.kind, else 1 or 0.
	reward, costUnit string
	lambda           float64
	lambdaSet        bool
	// judge judges sessions of open questions against their reference.
	judge bool
	// The bounds and the group time-out; nil keeps gateway.DefaultConfig's,
	// for a caller that builds the flags in code.
	maxCalls           *int
	maxBytes, maxTotal *int64
	groupTimeout       *time.Duration
}

func newGatewayCmd(getenv env, log *slog.Logger) *cobra.Command {
	var f gatewayFlags
	cmd := &cobra.Command{
		Use:   "gateway [flags] [MODEL...]",
		Short: "Record an agent's calls as training samples: an OpenAI-compatible gateway with sessions",
		Long: `Gateway serves the config's models (all local ones, or those named) as an
OpenAI-compatible server whose calls are recorded per session, so that any
agent trains by swapping its base URL. POST /sessions (with the token) gives a
session id and its base URL, /s/ID/v1; the id also works as the bearer key on
/v1. Every call records its request, response, prompt and completion token
ids, logprobs, chat-template hash, role (--role MODEL=ROLE, or the
X-Delegate-Role header), tokens and dollars. POST /sessions/ID/reward with
{"reward": R}, or {} to verify the last trained answer against the task's
reference, stores the session; each --group finished sessions of one group
key are appended to OUT/groups.jsonl as process writes it. A verified
session's reward is 1 or 0, or with --reward (or the config's reward.kind)
process's reward of its calls: the trained roles (--train) are the policy,
every other role's call is a sub-agent call. docs/gateway.md.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.lambdaSet = cmd.Flags().Changed("lambda")
			return serveGateway(cmd.Context(), cmd.OutOrStdout(), getenv, log, f, args)
		},
	}
	t := server.DefaultTimeouts()
	d := gateway.DefaultConfig()
	fl := cmd.Flags()
	fl.StringVarP(&f.config, "config", "c", "", "config file (default $DELEGATE_CONFIG or delegate.yaml)")
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8090", "listen address")
	fl.StringVar(&f.out, "out", "", "output directory: the session store and groups.jsonl (required)")
	fl.StringVar(&f.token, "token", "", "bearer token of the session API (default $"+gatewayTokenEnv+"; prefer the variable: a flag shows in ps)")
	fl.BoolVar(&f.insecure, "insecure", false, "allow listening off loopback without a token")
	fl.StringSliceVar(&f.hosts, "allow-host", nil, "a host name clients may reach the gateway by, besides IP addresses and localhost")
	fl.StringToStringVar(&f.roles, "role", nil, "the role of a model's calls, MODEL=ROLE by config key (default the model's name)")
	fl.StringSliceVar(&f.trained, "train", nil, "roles whose calls become samples (default every role)")
	fl.DurationVar(&f.ttl, "ttl", 30*time.Minute, "a session's life from its start")
	fl.IntVar(&f.group, "group", d.GroupSize, "finished sessions of one group key that make a group record")
	f.maxCalls, f.maxBytes, f.maxTotal, f.groupTimeout = new(int), new(int64), new(int64), new(time.Duration)
	fl.DurationVar(f.groupTimeout, "group-timeout", d.GroupTimeout, "close a group this long after its first session finished: written smaller with 2 sessions or more, else dropped and counted (0: wait for ever)")
	fl.IntVar(f.maxCalls, "max-session-calls", d.MaxSessionCalls, "calls one session may record, failed ones included; past it a call gets 429")
	fl.Int64Var(f.maxBytes, "max-session-bytes", d.MaxSessionBytes, "bytes one session's recorded calls may hold, estimated; past it a call gets 413")
	fl.Int64Var(f.maxTotal, "max-total-bytes", d.MaxTotalBytes, "bytes all open sessions and those waiting for their group may hold, estimated; past it a call gets 429")
	fl.Float64Var(&f.temperature, "temperature", 0, "sample the trained roles' calls at this temperature, whatever the agent asks (0: as asked); training needs sessions that differ")
	fl.StringVar(&f.estimator, "estimator", string(reward.GRPO), "advantage estimator: grpo, drgrpo or rloo")
	fl.StringVar(&f.push.url, "push", "", "also send every group record to the trajectory API at this URL (delegate api, or Atropos's) as process --push does; sessions start only while its queue has room; token from $"+apiTokenEnv)
	fl.StringVar(&f.push.name, "push-name", "delegate-gateway", "--push: the environment's name")
	fl.Float64Var(&f.push.weight, "push-weight", 1, "--push: the environment's weight in batches")
	fl.IntVar(&f.push.maxTokenLen, "push-max-tokens", 4096, "--push: the environment's max_token_length")
	fl.IntVar(&f.push.offPolicy, "push-offpolicy", 3, "--push: new sessions wait (up to --push-wait, then 503) while the API's queue holds this many batches (Atropos's max_batches_offpolicy)")
	fl.DurationVar(&f.pushWait, "push-wait", 10*time.Second, "--push: how long POST /sessions waits for room in the API's queue before it answers 503")
	fl.DurationVar(&f.timeouts.Write, "write-timeout", t.Write, "time to write a whole response; a stream gets this much for each event")
	fl.StringVar(&f.otlp, "otlp", "", "export each ended session, its calls as chat spans, to this OTLP/HTTP receiver (http://localhost:4318); never slows or fails a call (docs/telemetry.md)")
	fl.StringVar(&f.reward, "reward", "", "reward of a verified session, as process's --reward: graded, world (delegate train's: λ per token the trained roles generated, μ per call of another role), or "+strings.Join(reward.Kinds()[1:], ", ")+" tuned in the config's reward section (default: the config's reward.kind when it writes one, else 1 if right, 0 if wrong)")
	fl.Float64Var(&f.lambda, "lambda", 0, "--reward graded or world: cost charged per unit of --cost-unit (default: the reward's)")
	fl.BoolVar(&f.judge, "judge", false, "judge a verified session whose task is an open question (dataset open): the config's judge (roles.judge, else roles.default, tuned by its judge section) compares the answer with the task's reference; the quality is its score difference / 100")
	fl.StringVar(&f.costUnit, "cost-unit", "", "--reward graded: what --lambda charges for, tokens or dollars (default: the config's reward.graded.cost_unit, tokens)")
	return cmd
}

func serveGateway(ctx context.Context, out io.Writer, getenv env, log *slog.Logger, f gatewayFlags, names []string) error {
	est, err := f.check(getenv)
	if err != nil {
		return err
	}
	cfg, err := LoadConfig(configPath(f.config, getenv))
	if err != nil {
		return err
	}
	if names, err = servedNames(cfg, names); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	for m := range f.roles {
		if !slices.Contains(names, m) {
			return fmt.Errorf("gateway: --role names model %q, which is not served (%s)", m, strings.Join(names, ", "))
		}
	}
	models, closeModels, err := openServed(cfg, names, getenv, log)
	if err != nil {
		return err
	}
	defer closeModels()
	gcfg, served, err := gatewayConfig(cfg, names, models, f, est)
	if err != nil {
		return err
	}
	if err := gatewayReward(&gcfg, cfg, names, f); err != nil {
		return err
	}
	if f.judge {
		j, name, closeJudge, err := gatewayJudge(cfg, models, getenv, log)
		if err != nil {
			return err
		}
		defer closeJudge()
		gcfg.Judge = j
		fmt.Fprintf(out, "gateway: sessions of open questions are judged against their reference answer by model %s\n", name)
	}
	sink, err := openOTLP(f.otlp, getenv, cfg.providers(), log)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	defer sink.close()
	if sink != nil {
		gcfg.Ended = sink.sessions()
	}
	if f.push.url != "" {
		fmt.Fprintf(out, "gateway: registering with the trajectory API at %s (waits for a trainer to start)\n", f.push.url)
		pusher, err := atropos.NewPusher(ctx, out, f.push.config(getenv(apiTokenEnv), f.group))
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		defer func() {
			// Telling the API we are gone is a courtesy: it loses nothing.
			_ = pusher.Close(context.WithoutCancel(ctx))
		}()
		gcfg.Sink, gcfg.SinkWait = pusher, f.pushWait
	}
	g, err := gateway.Open(ctx, gcfg, slog.New(infoHandler{log.Handler()}), served...)
	if err != nil {
		return err
	}
	defer g.Close()
	timeouts := server.DefaultTimeouts()
	timeouts.Write = f.timeouts.Write
	g.SetWriteTimeout(timeouts.Write)
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	srv := edge.Server(g, timeouts, log, slog.LevelWarn)
	printGateway(out, log, g, gcfg, names, models, ln.Addr(), f)
	return serveUntil(ctx, "gateway", srv, ln, nil)
}

// check reads the token from the environment when no flag gave it,
// checks the flags and returns the advantage estimator.
func (f *gatewayFlags) check(getenv env) (reward.Estimator, error) {
	if f.token == "" {
		f.token = getenv(gatewayTokenEnv)
	}
	f.token = strings.TrimSpace(f.token)
	if err := edge.CheckExposure(f.addr, f.token != "", f.insecure, "a token: set $"+gatewayTokenEnv+" (or --token)"); err != nil {
		return "", fmt.Errorf("gateway: %w", err)
	}
	if f.out == "" {
		return "", errors.New("gateway: --out is required")
	}
	est, err := reward.ParseEstimator(f.estimator)
	if err != nil {
		return "", fmt.Errorf("gateway: --estimator: %w", err)
	}
	return est, nil
}

// gatewayConfig is the gateway's configuration of the named models:
// their roles, prices, system prompts, chat templates and tokenizers.
func gatewayConfig(cfg *Config, names []string, models map[string]delegate.Model, f gatewayFlags, est reward.Estimator) (gateway.Config, []delegate.Model, error) {
	gcfg := gateway.DefaultConfig()
	gcfg.Server.Hosts, gcfg.Server.System = f.hosts, map[string]string{}
	gcfg.Dir, gcfg.Token, gcfg.Hosts, gcfg.Trained = f.out, f.token, f.hosts, f.trained
	gcfg.TTL, gcfg.GroupSize, gcfg.Estimator, gcfg.Verify = f.ttl, f.group, est, verifyAny
	setIf(&gcfg.MaxSessionCalls, f.maxCalls)
	setIf(&gcfg.MaxSessionBytes, f.maxBytes)
	setIf(&gcfg.MaxTotalBytes, f.maxTotal)
	setIf(&gcfg.GroupTimeout, f.groupTimeout)
	gcfg.Roles, gcfg.Prices = map[string]string{}, map[string]delegate.Price{}
	gcfg.Templates, gcfg.Tokenizers = map[string]string{}, map[string]gateway.Tokenizer{}
	if f.temperature != 0 {
		gcfg.Temperature = &f.temperature
	}
	var served []delegate.Model
	for _, n := range names {
		m := models[n]
		served = append(served, m)
		mc := cfg.Models[n]
		gcfg.Prices[m.Name()] = mc.Price
		if r, ok := f.roles[n]; ok {
			gcfg.Roles[m.Name()] = r // a remote model is served under its API name
		}
		if p := mc.SystemPrompt; p != "" {
			gcfg.Server.System[m.Name()] = p
		}
		hash, err := templateHash(mc)
		if err != nil {
			return gcfg, nil, fmt.Errorf("gateway: model %s: %w", n, err)
		}
		if hash != "" {
			gcfg.Templates[m.Name()] = hash
		}
		if mc.Kind != "local" && mc.Tokenizer != "" {
			// A remote server may return no ids: the gateway computes
			// them, and checks those it does return.
			ct, err := newChatTokenizer(mc.Tokenizer, mc.ChatTemplate)
			if err != nil {
				return gcfg, nil, fmt.Errorf("gateway: model %s: %w", n, err)
			}
			gcfg.Tokenizers[m.Name()] = ct
		}
	}
	return gcfg, served, nil
}

// gatewayReward sets the reward of verified sessions that --reward, or
// else the config's reward.kind, chooses: process's reward (rewardChoice)
// of the served models' calls. With neither, gcfg keeps 1 or 0.
func gatewayReward(gcfg *gateway.Config, cfg *Config, served []string, f gatewayFlags) error {
	c := rewardChoice{kind: f.reward, lambda: f.lambda, lambdaSet: f.lambdaSet, costUnit: f.costUnit}
	sc, desc, err := c.chosen(cfg, served, "the gateway serves")
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if sc == nil {
		return nil
	}
	gcfg.Reward, gcfg.RewardName, gcfg.GeneratedTokens = sc.Reward, desc, sc.GeneratedTokens
	return nil
}

// chosen is the scorer of the reward that --reward, or else the config's
// reward.kind, chooses, and its description. With neither it returns a
// nil scorer. The gateway and env share it; used and user are as for
// scorer. Errors name the command's flags and the config's keys.
func (c rewardChoice) chosen(cfg *Config, used []string, user string) (*rollout.RewardScorer, string, error) {
	if _, written := cfg.lines["reward.kind"]; c.kind == "" && written {
		c.kind = cfg.Reward.Kind
	}
	if c.kind == "" {
		if c.lambdaSet || c.costUnit != "" {
			return nil, "", errors.New("--lambda and --cost-unit tune --reward graded or world, and no reward is chosen")
		}
		return nil, "", nil
	}
	if err := c.check(); err != nil {
		return nil, "", err
	}
	return c.scorer(c.kind, cfg, used, user)
}

// gatewayJudge is the config's judge over its model: a served one, or
// one opened for the judge alone, closed by the returned function.
func gatewayJudge(cfg *Config, served map[string]delegate.Model, getenv env, log *slog.Logger) (*judge.Judge, string, func(), error) {
	name := cfg.Roles.Judge
	if name == "" {
		name = cfg.Roles.Default
	}
	if name == "" {
		return nil, "", nil, errors.New("gateway: --judge needs a judge model: set roles.judge (or roles.default) in the config")
	}
	if _, ok := cfg.Models[name]; !ok {
		return nil, "", nil, fmt.Errorf("gateway: --judge: the judge model %q is not in the config's models", name)
	}
	models, closeModels := served, func() {}
	if _, ok := served[name]; !ok {
		var err error
		if models, closeModels, err = openServed(cfg, []string{name}, getenv, log); err != nil {
			return nil, "", nil, fmt.Errorf("gateway: --judge: %w", err)
		}
	}
	a, _ := cfg.agent(models, judge.Role, name)
	j, err := judge.New(a, cfg.Judge)
	if err != nil {
		closeModels()
		return nil, "", nil, fmt.Errorf("gateway: judge: %w", err)
	}
	return j, name, closeModels, nil
}

// printGateway says what the gateway serves where, and how it is guarded.
func printGateway(out io.Writer, log *slog.Logger, g *gateway.Gateway, gcfg gateway.Config, names []string, models map[string]delegate.Model, addr net.Addr, f gatewayFlags) {
	for _, n := range names {
		hash := gcfg.Templates[models[n].Name()]
		if hash == "" {
			hash = "unknown"
		}
		fmt.Fprintf(out, "model %q (config key %s), chat template %s\n", models[n].Name(), n, hash)
	}
	if n := g.Lost(); n > 0 {
		fmt.Fprintf(out, "%d sessions open at the last stop are lost\n", n)
	}
	if gcfg.Reward != nil {
		trained := "every role"
		if len(gcfg.Trained) > 0 {
			trained = strings.Join(gcfg.Trained, ", ")
		}
		fmt.Fprintf(out, "gateway: verified sessions get the %s; the policy is %s, any other role's call a sub-agent call\n", gcfg.RewardName, trained)
	} else {
		fmt.Fprintln(out, "gateway: verified sessions get 1 if right, 0 if wrong")
	}

	auth := "no token (loopback only)"
	switch {
	case f.token != "":
		auth = "token required for /sessions"
	case f.insecure:
		auth = "NO TOKEN (--insecure)"
		log.Warn("the session API has no token off loopback (--insecure): anyone who can reach it can open sessions", "addr", addr.String())
	}
	fmt.Fprintf(out, "gateway on http://%s: POST /sessions, agents at /s/ID/v1; %s; groups of %d to %s\n", addr, auth, f.group, f.out)
	if f.push.url != "" {
		fmt.Fprintf(out, "gateway: group records also go to %s\n", f.push.url)
	}
	if f.otlp != "" {
		fmt.Fprintf(out, "gateway: each ended session exported as OpenTelemetry spans to %s\n", redactURL(f.otlp))
	}
}

// templateHash is the chat-template hash of a configured model. It hashes the
// project's template for its own checkpoints. For an imported checkpoint, or
// a remote model that names a tokenizer, it hashes the Hugging Face tokenizer
// and template. It is "" for a remote model without one: its ids are the
// server's, rendered by a template the gateway cannot see.
func templateHash(mc ModelConfig) (string, error) {
	tokPath, tmpl := mc.Tokenizer, mc.ChatTemplate
	switch {
	case mc.Kind == "local":
		if strings.HasPrefix(mc.Checkpoint, shippedPrefix) {
			return gateway.BuiltinTemplateHash(), nil
		}
		if infer.IsGGUF(mc.Checkpoint) {
			t, err := infer.ReadGGUFTokenizer(mc.Checkpoint)
			if err != nil {
				return "", fmt.Errorf("chat template hash: %w", err)
			}
			tok, f, err := ggufTokenizer(t, mc)
			if err != nil {
				return "", fmt.Errorf("chat template hash: %w", err)
			}
			return gateway.TemplateHash(func(msgs []delegate.Message, tools []delegate.Tool) ([]int, error) {
				return tok.EncodeChat(f, msgs, tools, tokenizer.ChatOptions{AddGenerationPrompt: true})
			})
		}
		hf, err := infer.IsHF(mc.Checkpoint)
		if err != nil {
			return "", fmt.Errorf("chat template hash: %w", err)
		}
		if !hf {
			return gateway.BuiltinTemplateHash(), nil
		}
		if tokPath == "" {
			tokPath = filepath.Join(mc.Checkpoint, "tokenizer.json")
		}
		if tmpl == "" {
			b, err := os.ReadFile(filepath.Join(mc.Checkpoint, "config.json"))
			if err != nil {
				return "", fmt.Errorf("chat template hash: %w", err)
			}
			var c struct {
				ModelType string `json:"model_type"`
			}
			if err := json.Unmarshal(b, &c); err != nil {
				return "", fmt.Errorf("chat template hash: %s: %w", filepath.Join(mc.Checkpoint, "config.json"), err)
			}
			tmpl = infer.HFChatTemplate(c.ModelType)
		}
	case tokPath == "":
		return "", nil
	}
	tok, err := tokenizer.LoadHF(tokPath)
	if err != nil {
		return "", fmt.Errorf("chat template hash: %w", err)
	}
	f, err := tokenizer.ParseChatFormat(tmpl)
	if err != nil {
		return "", fmt.Errorf("chat template hash: %w", err)
	}
	return gateway.TemplateHash(func(msgs []delegate.Message, tools []delegate.Tool) ([]int, error) {
		return tok.EncodeChat(f, msgs, tools, tokenizer.ChatOptions{AddGenerationPrompt: true})
	})
}

// verifyAny verifies world problems with the world's verifier and the
// benchmark datasets with package score's.
func verifyAny(t delegate.Task, response string) (delegate.Verdict, error) {
	if t.Dataset == world.Dataset {
		return world.Verify(t, response)
	}
	return score.Verify(t, response)
}

// chatTokenizer renders requests with a Hugging Face tokenizer and chat
// template: the gateway's tokenizer of a remote model.
type chatTokenizer struct {
	tok *tokenizer.HF
	f   tokenizer.ChatFormat
}

func newChatTokenizer(path, template string) (chatTokenizer, error) {
	tok, err := tokenizer.LoadHF(path)
	if err != nil {
		return chatTokenizer{}, fmt.Errorf("tokenizer: %w", err)
	}
	f, err := tokenizer.ParseChatFormat(template)
	if err != nil {
		return chatTokenizer{}, fmt.Errorf("tokenizer: %w", err)
	}
	return chatTokenizer{tok: tok, f: f}, nil
}

// Prompt implements gateway.Tokenizer.
func (c chatTokenizer) Prompt(msgs []delegate.Message, tools []delegate.Tool) ([]int, error) {
	return c.tok.EncodeChat(c.f, msgs, tools, tokenizer.ChatOptions{AddGenerationPrompt: true})
}

// Completion implements gateway.Tokenizer: the body of the answer's turn
// in the conversation that ends with it, its end-of-turn token included.
func (c chatTokenizer) Completion(msgs []delegate.Message, tools []delegate.Tool, out delegate.Message) ([]int, error) {
	ids, spans, err := c.tok.EncodeChatSpans(c.f, append(slices.Clone(msgs), out), tools, tokenizer.ChatOptions{})
	if err != nil {
		return nil, err
	}
	if len(spans) == 0 || spans[len(spans)-1].Message != len(msgs) {
		return nil, fmt.Errorf("the %s template renders no turn for the answer", c.f)
	}
	sp := spans[len(spans)-1]
	return ids[sp.Body:sp.End], nil
}

// setIf sets *dst to *v when v is not nil.
func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}
