package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/server"
)

type serveFlags struct {
	config string
	addr   string
}

func newServeCmd(getenv env, log *slog.Logger) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve [flags] [MODEL...]",
		Short: "Serve models over an OpenAI-compatible HTTP API on loopback",
		Long: `Serve exposes the config's models (all local ones, or those named) as an
OpenAI-compatible server: POST /v1/chat/completions with tool calls, usage
and logprobs, GET /v1/models and GET /health. Concurrent requests to a local
model are batched together by its engine. It listens on loopback unless
--addr says otherwise, and stops on interrupt.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return serve(cmd.Context(), cmd.OutOrStdout(), getenv, log, f, args)
		},
	}
	cmd.Flags().StringVarP(&f.config, "config", "c", "", "config file (default $DELEGATE_CONFIG or delegate.yaml)")
	cmd.Flags().StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address")
	return cmd
}

func serve(ctx context.Context, out io.Writer, getenv env, log *slog.Logger, f serveFlags, names []string) error {
	cfg, err := LoadConfig(configPath(f.config, getenv))
	if err != nil {
		return err
	}
	if len(names) == 0 {
		for _, n := range cfg.ModelNames() {
			if cfg.Models[n].Kind == "local" {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return errors.New("serve: the config has no local models; name the models to serve")
		}
	}
	for _, n := range names {
		if _, ok := cfg.Models[n]; !ok {
			return fmt.Errorf("serve: model %q is not in the config", n)
		}
	}
	models, closeModels, err := cfg.openModels(getenv, log)
	if err != nil {
		return err
	}
	defer closeModels()
	var served []delegate.Model
	for _, n := range names {
		served = append(served, models[n])
	}
	h, err := server.New(log, served...)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "serving %v on http://%s/v1\n", names, ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}
