package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/view"
)

// viewTokenEnv names the variable that holds delegate view's token.
const viewTokenEnv = "DELEGATE_VIEW_TOKEN"

type viewFlags struct {
	addr, token string
	hosts       []string
	servers     []string
	poll        time.Duration
	insecure    bool
}

func newViewCmd(getenv env, log *slog.Logger) *cobra.Command {
	var f viewFlags
	cmd := &cobra.Command{
		Use:   "view [DIR|FILE...] [--server NAME=URL[,ENV]...]",
		Short: "Serve a web view of traces, bench results, rollouts and training runs",
		Long: `View serves web pages over run directories: a trace of run --json as a
tree of calls with the critical path marked; bench's table, its accuracy
against dollars with the Pareto frontier, and each item under every arm;
process's rollouts, aggregated and paged; train's reward, accuracy, cost
and delegation rate over steps, updated live as metrics.jsonl grows.
a gateway's sessions, each as a tree of its recorded calls; and, with
--server, the live queue depth, sessions and throughput of running
servers, polled from /health and /metrics.
Each DIR is searched two levels down. The pages read JSON under /api/.
Listening off loopback needs a token ($` + viewTokenEnv + ` or --token) unless
--insecure; a browser gives it once as ?token=. docs/view.md has the pages.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && len(f.servers) == 0 {
				return fmt.Errorf("view: give a directory, a trace file or --server")
			}
			return serveView(cmd.Context(), cmd.OutOrStdout(), getenv, log, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8020", "address to listen on")
	fl.StringVar(&f.token, "token", "", "bearer token browsers and clients must give (default $"+viewTokenEnv+"; prefer the variable: a flag shows in ps)")
	fl.StringSliceVar(&f.hosts, "allow-host", nil, "extra Host names allowed without a token (a name that resolves to this machine)")
	fl.StringArrayVar(&f.servers, "server", nil, "a running server to poll: NAME=URL, or NAME=URL,ENV where $ENV holds its bearer token (repeatable)")
	fl.DurationVar(&f.poll, "poll", view.DefaultConfig().Poll, fmt.Sprintf("how often a live chart looks for new metrics lines (%v to %v)", view.MinPoll, view.MaxPoll))
	fl.BoolVar(&f.insecure, "insecure", false, "allow listening off loopback without a token")
	return cmd
}

func serveView(ctx context.Context, out io.Writer, getenv env, log *slog.Logger, f viewFlags, paths []string) error {
	if f.token == "" {
		f.token = getenv(viewTokenEnv)
	}
	f.token = strings.TrimSpace(f.token)
	if err := edge.CheckExposure(f.addr, f.token != "", f.insecure, "a token: set $"+viewTokenEnv+" (or --token)"); err != nil {
		return fmt.Errorf("view: %w", err)
	}
	servers, err := parseServers(getenv, f.servers)
	if err != nil {
		return err
	}
	cfg := view.DefaultConfig()
	cfg.Paths, cfg.Servers, cfg.Token, cfg.Hosts, cfg.Poll, cfg.Log = paths, servers, f.token, f.hosts, f.poll, log
	srv, err := view.New(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	hs := edge.Server(srv.Handler(), edge.DefaultTimeouts(), log, slog.LevelWarn)
	kinds := map[string]int{}
	for _, r := range srv.Runs() {
		kinds[r.Kind]++
	}
	var found []string
	for _, k := range []string{view.KindTrace, view.KindBench, view.KindRollouts, view.KindTrain, view.KindGateway} {
		if kinds[k] > 0 {
			found = append(found, fmt.Sprintf("%d %s", kinds[k], k))
		}
	}
	url := "http://" + ln.Addr().String() + "/"
	auth := "no token (loopback only)"
	switch {
	case f.token != "":
		auth = "token required: open " + url + "?token=TOKEN once"
	case f.insecure:
		auth = "NO TOKEN (--insecure)"
		log.Warn("serving the view without authentication off loopback (--insecure): anyone who can reach the address can read the runs", "addr", ln.Addr().String())
	}
	if len(servers) > 0 {
		found = append(found, fmt.Sprintf("%d server polled", len(servers)))
	}
	fmt.Fprintf(out, "found %s\n", strings.Join(found, ", "))
	fmt.Fprintf(out, "serving the view on %s, %s\n", url, auth)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("view: %w", err)
	case <-ctx.Done():
	}
	// Live streams last until their client leaves: end them first.
	if err := srv.Close(); err != nil {
		return fmt.Errorf("view: %w", err)
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return hs.Shutdown(shutdown)
}

// parseServers reads --server values: NAME=URL, or NAME=URL,ENV where
// the variable ENV holds the server's bearer token.
func parseServers(getenv env, values []string) ([]view.LiveServer, error) {
	var out []view.LiveServer
	for _, v := range values {
		name, rest, ok := strings.Cut(v, "=")
		if !ok || name == "" || rest == "" {
			return nil, fmt.Errorf("view: --server %q: want NAME=URL or NAME=URL,ENV", v)
		}
		sv := view.LiveServer{Name: name, URL: rest}
		if u, envName, ok := strings.Cut(rest, ","); ok {
			sv.URL = u
			sv.Token = strings.TrimSpace(getenv(envName))
			if sv.Token == "" {
				return nil, fmt.Errorf("view: --server %s: $%s is empty or unset", name, envName)
			}
		}
		out = append(out, sv)
	}
	return out, nil
}
