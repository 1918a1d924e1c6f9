package atropos

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedConfig configures a NATS server run inside this process. Start
// from DefaultEmbeddedConfig and set Dir.
type EmbeddedConfig struct {
	// Dir is the JetStream store directory. Required.
	Dir string
	// Listen, when set (host:port, port 0 for any), lets other processes
	// reach the server, e.g. for a cluster. Empty: no listener at all, the
	// API connects in-process.
	Listen string
	// Name is the server's name, required in a cluster.
	Name string
	// ClusterName names the JetStream cluster the server joins when Routes
	// is set. ClusterListen is this node's route address and Routes the
	// nats-route:// URLs of all nodes.
	ClusterName   string
	ClusterListen string
	Routes        []string
	// SyncAlways makes JetStream fsync every write: acknowledged groups
	// then survive a power loss, not only a crash of the process.
	SyncAlways bool
	// MaxPayload bounds one stored group in bytes. Above 0.
	MaxPayload int32
}

// DefaultEmbeddedConfig is the embedded server of the shipped api
// command, less its store directory.
func DefaultEmbeddedConfig() EmbeddedConfig {
	return EmbeddedConfig{MaxPayload: 32 << 20}
}

// Validate reports the first invalid field, naming it.
func (c EmbeddedConfig) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("embedded nats: a store directory is required")
	case c.MaxPayload <= 0:
		return fmt.Errorf("embedded nats: max payload %d bytes: want above 0", c.MaxPayload)
	}
	return nil
}

// Embedded is a NATS server with JetStream running in this process.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts a NATS server with JetStream on cfg.Dir and waits
// until it accepts connections. It creates cfg.Dir if missing and
// refuses at once one that is not a writable directory. Shutdown stops
// it.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := storeDir(cfg.Dir); err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
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
	// The server reports a failed start (JetStream refusing its store)
	// only to its logger: keep its errors to report them.
	lg := &startLog{fatal: make(chan struct{})}
	srv.SetLogger(lg, false, false)
	go srv.Start()
	fail := func(err error) (*Embedded, error) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("embedded nats in %s: %w", cfg.Dir, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if srv.ReadyForConnections(50 * time.Millisecond) {
			return &Embedded{srv: srv}, nil
		}
		select {
		case <-lg.fatal:
			return fail(lg.err())
		default:
		}
		if time.Now().After(deadline) {
			if err := lg.err(); err != nil {
				return fail(fmt.Errorf("not ready after 30s: %w", err))
			}
			return fail(errors.New("not ready after 30s"))
		}
	}
}

// storeDir creates dir if missing and checks that this process can write
// in it. A bad --data then fails at once, naming why.
func storeDir(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create store directory: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("store directory: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("store directory %s: not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("store directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("store directory %s: remove write check: %w", dir, err)
	}
	return nil
}

// startLog is the embedded server's logger. It drops notices and keeps
// the last error. A fatal one is kept too, without exiting the process.
type startLog struct {
	mu        sync.Mutex
	last      string
	fatalOnce sync.Once
	fatal     chan struct{} // closed on the first Fatalf
}

func (l *startLog) keep(format string, v ...any) {
	l.mu.Lock()
	l.last = fmt.Sprintf(format, v...)
	l.mu.Unlock()
}

// err is the last error the server logged, nil for none.
func (l *startLog) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == "" {
		return nil
	}
	return errors.New(l.last)
}

func (l *startLog) Fatalf(format string, v ...any) {
	l.keep(format, v...)
	l.fatalOnce.Do(func() { close(l.fatal) })
}
func (l *startLog) Errorf(format string, v ...any) { l.keep(format, v...) }
func (l *startLog) Noticef(string, ...any)         {}
func (l *startLog) Warnf(string, ...any)           {}
func (l *startLog) Debugf(string, ...any)          {}
func (l *startLog) Tracef(string, ...any)          {}

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
