package api

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedConfig configures a NATS server run inside this process.
type EmbeddedConfig struct {
	// Dir is the JetStream store directory. Required.
	Dir string
	// Listen, when set (host:port, port 0 for any), lets other processes
	// reach the server, e.g. for a cluster. Empty: no listener at all, the
	// API connects in-process.
	Listen string
	// Name is the server's name, required in a cluster.
	Name string
	// Cluster, when Routes is set, joins a JetStream cluster: ClusterListen
	// is this node's route address and Routes the nats-route:// URLs of all
	// nodes.
	ClusterName   string
	ClusterListen string
	Routes        []string
	// SyncAlways makes JetStream fsync every write: acknowledged groups
	// then survive a power loss, not only a crash of the process.
	SyncAlways bool
	// MaxPayload bounds one stored group in bytes (default 32 MiB).
	MaxPayload int32
}

// Embedded is a NATS server with JetStream running in this process.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts a NATS server with JetStream on cfg.Dir and waits
// until it accepts connections. Shutdown stops it.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedded nats: a store directory is required")
	}
	opts := &server.Options{
		ServerName:         cfg.Name,
		JetStream:          true,
		StoreDir:           cfg.Dir,
		SyncAlways:         cfg.SyncAlways,
		MaxPayload:         cfg.MaxPayload,
		NoSigs:             true,
		NoLog:              true,
		DontListen:         cfg.Listen == "",
		JetStreamMaxMemory: 64 << 20,
	}
	if opts.MaxPayload == 0 {
		opts.MaxPayload = 32 << 20
	}
	if cfg.Listen != "" {
		host, port, err := splitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: listen %q: %w", cfg.Listen, err)
		}
		opts.Host, opts.Port = host, port
	}
	if len(cfg.Routes) > 0 {
		host, port, err := splitHostPort(cfg.ClusterListen)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: cluster listen %q: %w", cfg.ClusterListen, err)
		}
		opts.Cluster = server.ClusterOpts{Name: cfg.ClusterName, Host: host, Port: port}
		opts.Routes = server.RoutesFromStr(joinComma(cfg.Routes))
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("embedded nats: not ready after 30s")
	}
	return &Embedded{srv: srv}, nil
}

// Connect opens a client connection: in-process when the server has no
// listener, else over loopback.
func (e *Embedded) Connect() (*nats.Conn, error) {
	var nc *nats.Conn
	var err error
	if e.srv.ClientURL() == "" || e.srv.Addr() == nil {
		nc, err = nats.Connect("", nats.InProcessServer(e.srv), nats.Name("delegate api"))
	} else {
		nc, err = nats.Connect(e.srv.ClientURL(), nats.Name("delegate api"))
	}
	if err != nil {
		return nil, fmt.Errorf("connect to embedded nats: %w", err)
	}
	return nc, nil
}

// ClientURL is the server's nats:// URL ("" without a listener).
func (e *Embedded) ClientURL() string {
	if e.srv.Addr() == nil {
		return ""
	}
	return e.srv.ClientURL()
}

// Shutdown stops the server and waits until it has stopped.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

func joinComma(s []string) string {
	out := ""
	for i, r := range s {
		if i > 0 {
			out += ","
		}
		out += r
	}
	return out
}
