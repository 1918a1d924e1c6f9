package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/server"
)

// serveKeyEnv is the environment variable holding the server's API key.
// It is read when --api-key is not given, since a flag's value shows in
// ps.
const serveKeyEnv = "DELEGATE_SERVE_API_KEY"

type serveFlags struct {
	config    string
	addr      string
	apiKey    string
	insecure  bool
	hosts     []string
	accessLog bool
	otlp      string
	limits    server.Config
	timeouts  server.Timeouts
}

func newServeCmd(getenv env, log *slog.Logger) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve [flags] [MODEL...]",
		Short: "Serve models over an OpenAI-compatible HTTP API on loopback",
		Long: `Serve exposes the config's models (all local ones, or those named by their
config key) as an OpenAI-compatible server: POST /v1/chat/completions with
tool calls, usage, logprobs and streaming, GET /v1/models[/MODEL], GET /health and
GET /metrics (Prometheus). Concurrent requests to a local model are batched
together by its engine. A model's system_prompt in the config is sent to it
when a request has no system message of its own.

It listens on loopback unless --addr says otherwise. With an API key
(--api-key, or $` + serveKeyEnv + `) every request but /health must carry
"Authorization: Bearer KEY"; listening off loopback without a key is refused
unless --insecure. Requests beyond --max-concurrent generating and
--max-queue waiting get 503 with Retry-After. It stops on interrupt.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return serve(cmd.Context(), cmd.OutOrStdout(), getenv, log, f, args)
		},
	}
	d, t := server.DefaultConfig(), server.DefaultTimeouts()
	fl := cmd.Flags()
	fl.StringVarP(&f.config, "config", "c", "", "config file (default $DELEGATE_CONFIG or delegate.yaml)")
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address")
	fl.StringVar(&f.apiKey, "api-key", "", "API key clients must send as a bearer token (default $"+serveKeyEnv+"; prefer the variable: a flag shows in ps)")
	fl.BoolVar(&f.insecure, "insecure", false, "allow listening off loopback without an API key")
	fl.StringSliceVar(&f.hosts, "allow-host", nil, "a host name clients may reach the server by, besides IP addresses and localhost (without an API key, other names are refused: DNS rebinding)")
	fl.BoolVar(&f.accessLog, "access-log", true, "log every request at info level: method, path, status, duration, bytes")
	fl.StringVar(&f.otlp, "otlp", "", otlpServeUsage)
	fl.Int64Var(&f.limits.MaxBody, "max-body", d.MaxBody, "largest request body in bytes (413 beyond)")
	fl.IntVar(&f.limits.MaxN, "max-n", d.MaxN, "most choices (n) one request may ask for (400 beyond; at most 128, the format's bound)")
	fl.IntVar(&f.limits.MaxConcurrent, "max-concurrent", d.MaxConcurrent, "chat completions generating at once")
	fl.IntVar(&f.limits.MaxQueue, "max-queue", d.MaxQueue, "requests waiting for a turn beyond --max-concurrent (503 beyond; 0: none wait)")
	fl.DurationVar(&f.limits.QueueTimeout, "queue-timeout", d.QueueTimeout, "longest wait for a turn (503 past it)")
	fl.DurationVar(&f.limits.RequestTimeout, "request-timeout", d.RequestTimeout, "longest generation of one request (504 past it)")
	fl.DurationVar(&f.timeouts.ReadHeader, "read-header-timeout", t.ReadHeader, "time to read a request's headers")
	fl.DurationVar(&f.timeouts.Read, "read-timeout", t.Read, "time to read a request's headers and body")
	fl.DurationVar(&f.timeouts.Write, "write-timeout", t.Write, "time to write a whole response; a stream gets this much for each event")
	fl.DurationVar(&f.timeouts.Idle, "idle-timeout", t.Idle, "how long a keep-alive connection may wait for its next request")
	return cmd
}

func serve(ctx context.Context, out io.Writer, getenv env, log *slog.Logger, f serveFlags, names []string) error {
	if err := f.check(getenv); err != nil {
		return err
	}
	cfg, err := LoadConfig(configPath(f.config, getenv))
	if err != nil {
		return err
	}
	if names, err = servedNames(cfg, names); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	models, closeModels, err := openServed(cfg, names, getenv, log)
	if err != nil {
		return err
	}
	defer closeModels()
	h, err := newServeHandler(cfg, names, models, f, log)
	if err != nil {
		return err
	}
	sink, err := openOTLP(f.otlp, getenv, cfg.providers(), log)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer sink.close()
	if sink != nil {
		h.SetObserver(sink.served(servedPrices(cfg, names, models)))
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	srv := edge.Server(h, f.timeouts, log, slog.LevelWarn) // accept errors and the like
	printServing(out, cfg, names, models, ln.Addr(), f)
	if f.apiKey == "" && f.insecure {
		log.Warn("serving without authentication off loopback (--insecure): anyone who can reach the address can use the models", "addr", ln.Addr().String())
	}
	return serveUntil(ctx, "serve", srv, ln, nil)
}

// check reads the API key from the environment when no flag gave it and
// checks the flags against each other.
func (f *serveFlags) check(getenv env) error {
	if f.apiKey == "" {
		f.apiKey = getenv(serveKeyEnv)
	}
	f.apiKey = strings.TrimSpace(f.apiKey) // a key of blanks would be no key that nobody can send
	if err := checkExposure(f.addr, f.apiKey != "", f.insecure); err != nil {
		return err
	}
	if f.timeouts.Validate() != nil {
		return errors.New("serve: --read-header-timeout, --read-timeout, --write-timeout and --idle-timeout must be positive")
	}
	if f.limits.MaxBody <= 0 || f.limits.MaxConcurrent <= 0 || f.limits.MaxQueue < 0 || f.limits.QueueTimeout <= 0 || f.limits.RequestTimeout <= 0 {
		return errors.New("serve: --max-body, --max-concurrent, --queue-timeout and --request-timeout must be positive, --max-queue not negative")
	}
	if f.timeouts.Write <= f.limits.RequestTimeout {
		return fmt.Errorf("serve: --write-timeout (%v) must exceed --request-timeout (%v), so that a generation cut by the latter still gets its error written", f.timeouts.Write, f.limits.RequestTimeout)
	}
	return nil
}

// newServeHandler is the server of the named models under f's limits.
func newServeHandler(cfg *Config, names []string, models map[string]delegate.Model, f serveFlags, log *slog.Logger) (*server.Server, error) {
	var served []delegate.Model
	limits := f.limits
	limits.APIKey = f.apiKey
	limits.Hosts = f.hosts
	limits.BodyBudget = limits.FullBodyBudget()
	limits.System = map[string]string{}
	for _, n := range names {
		m := models[n]
		served = append(served, m)
		if p := cfg.Models[n].SystemPrompt; p != "" {
			limits.System[m.Name()] = p
		}
	}
	srvLog := log
	if f.accessLog {
		srvLog = slog.New(infoHandler{log.Handler()})
	}
	h, err := server.NewWithConfig(limits, srvLog, served...)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	h.SetWriteTimeout(f.timeouts.Write)
	return h, nil
}

// servedPrices are the configured prices of the named models, by the
// name they are served under.
func servedPrices(cfg *Config, names []string, models map[string]delegate.Model) map[string]delegate.Price {
	prices := map[string]delegate.Price{}
	for _, n := range names {
		prices[models[n].Name()] = cfg.Models[n].Price
	}
	return prices
}

// printServing says what is served where, and how it is guarded.
func printServing(out io.Writer, cfg *Config, names []string, models map[string]delegate.Model, addr net.Addr, f serveFlags) {
	servedNames := make([]string, len(names))
	for i, n := range names {
		desc := "local checkpoint " + cfg.Models[n].Checkpoint
		if cfg.Models[n].Kind != "local" {
			desc = "remote " + cfg.Models[n].BaseURL
		}
		sys := "none"
		if p := cfg.Models[n].SystemPrompt; p != "" {
			sys = fmt.Sprintf("%q", p)
		}
		fmt.Fprintf(out, "model %q (config key %s, %s; default system prompt %s)\n", models[n].Name(), n, desc, sys)
		servedNames[i] = models[n].Name()
	}
	auth := "no API key (loopback only)"
	switch {
	case f.apiKey != "":
		auth = "API key required"
	case f.insecure:
		auth = "NO API KEY (--insecure)"
	}
	fmt.Fprintf(out, "serving %v on http://%s/v1, %s\n", servedNames, addr, auth)
	if f.otlp != "" {
		fmt.Fprintf(out, "each chat completion exported as OpenTelemetry spans to %s\n", redactURL(f.otlp))
	}
}

// serveUntil serves hs on ln until ctx ends. Then it runs stop, when not
// nil, and shuts hs down, waiting at most 10 s for requests in flight.
func serveUntil(ctx context.Context, what string, hs *http.Server, ln net.Listener, stop func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("%s: %w", what, err)
	case <-ctx.Done():
	}
	if stop != nil {
		if err := stop(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return hs.Shutdown(shutdown)
}

// servedNames checks the config keys a server was asked to serve; none
// asked means every local model of the config.
func servedNames(cfg *Config, names []string) ([]string, error) {
	if len(names) == 0 {
		for _, n := range cfg.ModelNames() {
			if cfg.Models[n].Kind == "local" {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return nil, errors.New("the config has no local models; name the models to serve")
		}
	}
	for _, n := range names {
		if _, ok := cfg.Models[n]; !ok {
			return nil, fmt.Errorf("model %q is not in the config (defined: %s)", n, strings.Join(cfg.ModelNames(), ", "))
		}
	}
	return names, nil
}

// openServed opens the models named as every command does. Local ones
// keep their own type, so that the server sees that they stream
// (server.Streamer) and reload (server.Reloader) with nothing between.
func openServed(cfg *Config, names []string, getenv env, log *slog.Logger) (map[string]delegate.Model, func(), error) {
	served := *cfg
	served.Models = make(map[string]ModelConfig, len(names))
	for _, n := range names {
		served.Models[n] = cfg.Models[n]
	}
	return served.openModels(getenv, log)
}

// checkExposure refuses to listen off loopback without an API key, unless
// insecure says so.
func checkExposure(addr string, hasKey, insecure bool) error {
	if err := edge.CheckExposure(addr, hasKey, insecure, "an API key: set $"+serveKeyEnv+" (or --api-key)"); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// infoHandler lets info records through to a handler whose logger is set
// higher. It serves the server's access log. The standard handlers
// leave the level to the logger's Enabled.
type infoHandler struct{ slog.Handler }

func (h infoHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h infoHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return infoHandler{h.Handler.WithAttrs(as)}
}

func (h infoHandler) WithGroup(name string) slog.Handler {
	return infoHandler{h.Handler.WithGroup(name)}
}
