package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/strategy"
)

func newRootCmd(getenv env, log *slog.Logger) *cobra.Command {
	root := &cobra.Command{
		Use:           "delegate",
		Short:         "Run, measure and train LLMs that delegate work to other models",
		SilenceUsage:  true,
		SilenceErrors: true,
		// A flag that takes a value takes the next word, even "--help":
		// "api --data --help" would serve from a directory named --help.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return checkFlagValues(cmd.Flags())
		},
	}
	root.AddCommand(
		newConfigCmd(getenv, log),
		newRunCmd(getenv, log),
		newServeCmd(getenv, log),
		newBenchCmd(getenv, log),
		newProcessCmd(getenv, log),
		newPretrainCmd(getenv, log),
		newTrainCmd(getenv, log),
		newAPICmd(getenv, log),
		newEnvCmd(getenv, log),
		newGatewayCmd(getenv, log),
		newViewCmd(getenv, log),
	)
	return root
}

// checkFlagValues refuses a string flag whose value starts with "--".
// Such a value is the next flag, swallowed by mistake. A path that
// really starts so can be written ./--name.
func checkFlagValues(fs *pflag.FlagSet) error {
	var err error
	fs.Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		var values []string
		switch v := f.Value.(type) {
		case pflag.SliceValue:
			values = v.GetSlice()
		default:
			if f.Value.Type() == "string" {
				values = []string{f.Value.String()}
			}
		}
		for _, s := range values {
			if strings.HasPrefix(s, "--") {
				err = fmt.Errorf("--%s got %q as its value, which is a flag: give --%s its value first (a path starting with -- is written ./%s)", f.Name, s, f.Name, s)
				return
			}
		}
	})
	return err
}

func newConfigCmd(getenv env, log *slog.Logger) *cobra.Command {
	cfg := &cobra.Command{Use: "config", Short: "Work with config files"}
	var ping bool
	var otlp string
	check := &cobra.Command{
		Use:   "check [--ping] FILE",
		Short: "Validate a config file; with --ping, send one tiny request per model",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := LoadConfig(args[0])
			if err != nil {
				return err
			}
			contexts, err := checkLocalModels(c)
			if err != nil {
				return fmt.Errorf("config %s: %w", args[0], err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s: ok (%d models)\n", args[0], len(c.Models))
			var can, cannot, overflow []string
			for _, name := range strategy.Names() {
				switch why := c.promptOverflow(name, contexts); {
				case c.checkRoles(name) != nil:
					cannot = append(cannot, fmt.Sprintf("%s (set %s)", name, strings.Join(c.missingRoleKeys(name), " and ")))
				case why != "":
					overflow = append(overflow, name+": "+why)
				default:
					can = append(can, name)
				}
			}
			if len(can) > 0 {
				fmt.Fprintf(out, "  strategies its roles can run: %s\n", strings.Join(can, ", "))
			}
			if len(cannot) > 0 {
				fmt.Fprintf(out, "  strategies missing a role: %s\n", strings.Join(cannot, ", "))
			}
			for _, o := range overflow {
				fmt.Fprintf(out, "  not runnable, a prompt overflows its local model's context: %s\n", o)
			}
			if !ping {
				if otlp != "" {
					return errors.New("config check: --otlp exports the pings: it goes with --ping")
				}
				return nil
			}
			sink, err := openOTLP(otlp, getenv, c.providers(), log)
			if err != nil {
				return fmt.Errorf("config check: %w", err)
			}
			defer sink.close()
			return pingModels(cmd.Context(), out, c, getenv, log, sink)
		},
	}
	check.Flags().BoolVar(&ping, "ping", false, "send one tiny request to every model")
	check.Flags().StringVar(&otlp, "otlp", "", "with --ping: export each ping as an OpenTelemetry chat span to this OTLP/HTTP receiver (http://localhost:4318) (docs/telemetry.md)")
	cfg.AddCommand(check)
	return cfg
}

// checkLocalModels loads every local model's checkpoint, weights
// included, so that config check finds what a run would. It returns
// each local model's context in tokens.
func checkLocalModels(c *Config) (map[string]int, error) {
	var errs []error
	contexts := map[string]int{}
	for _, name := range c.ModelNames() {
		m := c.Models[name]
		if m.Kind != "local" {
			continue
		}
		m.Follow = "" // config check loads the starting weights only
		lm, err := openLocal(name, m, nil, nil)
		if err != nil {
			errs = append(errs, c.at("models."+name+".checkpoint", "%v", err))
			continue
		}
		if mm, ok := lm.(interface{ Memory() infer.EngineMemory }); ok {
			contexts[name] = mm.Memory().Context
		}
		_ = lm.Close() // nothing in flight: Close cannot fail
	}
	return contexts, errors.Join(errs...)
}

// pingModels sends every model a one-token request and reports each
// result. It exports each to sink, unless nil. It fails if any model
// failed.
func pingModels(ctx context.Context, out interface{ Write([]byte) (int, error) }, c *Config, getenv env, log *slog.Logger, sink *otlpSink) error {
	models, closeModels, err := c.openModels(getenv, log)
	if err != nil {
		return err
	}
	defer closeModels()
	failed := 0
	for _, name := range c.ModelNames() {
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		req := &delegate.Request{Messages: []delegate.Message{delegate.User("Say OK.")}, MaxTokens: 1}
		resp, err := models[name].Chat(pctx, req)
		cancel()
		sink.call(pingCall(models[name].Name(), c.Models[name].Price, req, start, resp, err))
		if err != nil {
			failed++
			fmt.Fprintf(out, "  %-16s FAIL  %v\n", name, err)
			continue
		}
		fmt.Fprintf(out, "  %-16s ok    %s, %s\n", name, fmtTokens(resp.Usage), fmtDuration(time.Since(start)))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d models failed the ping", failed, len(c.Models))
	}
	return nil
}
