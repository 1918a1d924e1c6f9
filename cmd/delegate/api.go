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

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/delegatelab/delegate/internal/edge"
	"github.com/delegatelab/delegate/trajectory/atropos"
)

// apiTokenEnv is the environment variable holding the trajectory API's
// bearer token. The API and its clients read it, since a flag's value
// shows in ps.
const apiTokenEnv = "DELEGATE_API_TOKEN"

type apiFlags struct {
	addr         string
	data         string
	natsURL      string
	replicas     int
	token        string
	maxBody      int64
	inflate      int64
	maxStaleness int
	keepSteps    int
	prefix       string
	syncAlways   bool
	insecure     bool
	hosts        []string
}

func newAPICmd(getenv env, log *slog.Logger) *cobra.Command {
	var f apiFlags
	def := atropos.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "api [flags]",
		Short: "Serve Atropos's trajectory API, durable on NATS JetStream",
		Long: `Api serves Atropos's trajectory API (POST /register, GET /batch, POST
/register-env, POST /scored_data, GET /status-env, ...) so that Atropos
trainers and environments run against it unchanged. Accepted groups and
handed-out batches are kept in NATS JetStream: by default a NATS server
embedded in this process storing under --data; with --nats, an existing
NATS cluster (--replicas copies of everything). A restart loses nothing
and hands nothing out twice; GET /batch?step=N sends batch N again.
GET /metrics serves Prometheus metrics, behind the token like the rest.

It listens on loopback unless --addr says otherwise; off loopback it needs
a token (--token or $DELEGATE_API_TOKEN), or --insecure. It stops on
interrupt. See docs/api.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return serveAPI(cmd.Context(), cmd.OutOrStdout(), getenv, log, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8000", "listen address (Atropos's port)")
	fl.StringVar(&f.data, "data", "delegate-api", "JetStream store directory of the embedded NATS server")
	fl.StringVar(&f.natsURL, "nats", "", "NATS URL(s), comma-separated: use this cluster instead of an embedded server")
	fl.IntVar(&f.replicas, "replicas", def.Replicas, "replicas of the stream and state bucket (with --nats: 1, 3 or 5)")
	fl.StringVar(&f.token, "token", "", "bearer token both sides must send (default $DELEGATE_API_TOKEN)")
	fl.Int64Var(&f.maxBody, "max-body", def.MaxBody, "largest request body in bytes (gzip bodies may decompress to 4x)")
	fl.Int64Var(&f.inflate, "inflate-budget", 0, "decompressed bytes all gzip bodies may hold at once; more get 503 (0: twice the decompressed bound, 8x --max-body)")
	fl.IntVar(&f.maxStaleness, "max-staleness", def.MaxStaleness, "drop groups whose group_overrides.policy_version is more steps behind the trainer (0: keep all)")
	fl.IntVar(&f.keepSteps, "keep-steps", def.KeepSteps, "handed-out batches kept for GET /batch?step=N")
	fl.StringVar(&f.prefix, "prefix", def.Prefix, "name prefix of the JetStream stream and bucket (one per run)")
	fl.BoolVar(&f.syncAlways, "sync-always", false, "embedded server: fsync every write (survive power loss, not only a crash)")
	fl.BoolVar(&f.insecure, "insecure", false, "allow listening off loopback without a token")
	fl.StringSliceVar(&f.hosts, "allow-host", nil, "a host name clients may reach the API by, besides IP addresses and localhost (without a token, other names are refused: DNS rebinding)")
	return cmd
}

func serveAPI(ctx context.Context, out io.Writer, getenv env, log *slog.Logger, f apiFlags) error {
	token := f.token
	if token == "" {
		token = getenv(apiTokenEnv)
	}
	if err := edge.CheckExposure(f.addr, token != "", f.insecure, "a token: set --token (or $DELEGATE_API_TOKEN)"); err != nil {
		return fmt.Errorf("api: %w", err)
	}
	cfg := atropos.DefaultConfig()
	cfg.Prefix, cfg.Replicas, cfg.KeepSteps, cfg.MaxStaleness = f.prefix, f.replicas, f.keepSteps, f.maxStaleness
	cfg.Token, cfg.Hosts = token, f.hosts
	// The gzip bounds follow --max-body: 4x decompressed, and by default
	// twice that inflated at once.
	cfg.MaxBody, cfg.MaxDecompressed = f.maxBody, 4*f.maxBody
	cfg.InflateBudget = f.inflate
	if f.inflate == 0 {
		cfg.InflateBudget = 2 * cfg.MaxDecompressed
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	nc, pc, where, closeNATS, err := connectAPI(f)
	if err != nil {
		return err
	}
	defer closeNATS()
	srv, err := newAPIServer(ctx, nc, pc, cfg, f, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	hs := srv.HTTPServer(srv.Handler())
	st := srv.Stats()
	fmt.Fprintf(out, "serving the trajectory API on http://%s (%s; step %d, %d groups queued)\n", ln.Addr(), where, st.Step, st.Queued)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("api: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return hs.Shutdown(shutdown)
}

// connectAPI opens the API's two NATS connections, to --nats or to an
// embedded server it starts. Pushes publish on pc, so their
// acknowledgements do not wait behind the batches read on nc. where
// names the store; closeNATS closes all it opened.
func connectAPI(f apiFlags) (nc, pc *nats.Conn, where string, closeNATS func(), err error) {
	var closers []func()
	closeNATS = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*nats.Conn, *nats.Conn, string, func(), error) {
		closeNATS()
		return nil, nil, "", nil, err
	}
	if f.natsURL != "" {
		connect := func(name string) (*nats.Conn, error) {
			c, err := nats.Connect(f.natsURL, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
			if err != nil {
				return nil, fmt.Errorf("api: connect to nats: %w", err)
			}
			closers = append(closers, c.Close)
			return c, nil
		}
		if nc, err = connect("delegate api"); err != nil {
			return fail(err)
		}
		if pc, err = connect("delegate api publish"); err != nil {
			return fail(err)
		}
		return nc, pc, "NATS " + nc.ConnectedUrlRedacted(), closeNATS, nil
	}
	if f.replicas != 1 {
		return fail(fmt.Errorf("api: --replicas %d needs a cluster (--nats)", f.replicas))
	}
	ec := atropos.DefaultEmbeddedConfig()
	ec.Dir, ec.SyncAlways = f.data, f.syncAlways
	emb, err := atropos.StartEmbedded(ec)
	if err != nil {
		return fail(fmt.Errorf("api: %w", err))
	}
	closers = append(closers, emb.Shutdown)
	for _, c := range []**nats.Conn{&nc, &pc} {
		if *c, err = emb.Connect(); err != nil {
			return fail(fmt.Errorf("api: %w", err))
		}
		closers = append(closers, (*c).Close)
	}
	return nc, pc, "embedded JetStream in " + f.data, closeNATS, nil
}

// newAPIServer starts the API on its connections. A cluster that has
// just started elects its JetStream leader first: with --nats it keeps
// asking for up to half a minute before giving up.
func newAPIServer(ctx context.Context, nc, pc *nats.Conn, cfg atropos.Config, f apiFlags, log *slog.Logger) (*atropos.Server, error) {
	srv, err := atropos.New(ctx, nc, cfg, log, atropos.WithPublishConn(pc))
	for deadline := time.Now().Add(30 * time.Second); err != nil && f.natsURL != "" && time.Now().Before(deadline) && ctx.Err() == nil; {
		log.Info("waiting for the NATS cluster's JetStream", "err", err)
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return nil, fmt.Errorf("api: %w", ctx.Err())
		}
		srv, err = atropos.New(ctx, nc, cfg, log, atropos.WithPublishConn(pc))
	}
	if err != nil {
		return nil, err
	}
	return srv, nil
}
