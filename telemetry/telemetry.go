package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/delegatelab/delegate"
)

// Config says where and how traces are exported. Start from
// DefaultConfig and set Endpoint: a zero field means zero.
type Config struct {
	// Endpoint is the receiver's URL: its base (http://localhost:4318,
	// to which /v1/traces is added) or the full path of its traces.
	// https URLs use TLS.
	Endpoint string
	// Headers go with every export request: the receiver's
	// authorization, for one (Langfuse wants Basic auth).
	Headers map[string]string
	// Service is the service.name of the exported spans; required.
	Service string
	// Version is the service.version; default none.
	Version string
	// QueueSize is how many traces may wait for export; at least 1.
	// Traces beyond it are dropped and counted.
	QueueSize int
	// Timeout bounds one export, retries included; above 0.
	Timeout time.Duration
	// Provider names each model's gen_ai.provider.name; nil: _OTHER.
	Provider Provider
	// Log receives export failures and drops, at most one record per
	// LogEvery; nil: none. LogEvery 0 logs every one.
	Log      *slog.Logger
	LogEvery time.Duration
}

// DefaultConfig holds the defaults of every field but Endpoint.
func DefaultConfig() Config {
	return Config{Service: "delegate", QueueSize: 256, Timeout: 5 * time.Second, LogEvery: 10 * time.Second}
}

// Validate reports the first invalid field, naming it.
func (c Config) Validate() error {
	u, err := url.Parse(c.Endpoint)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		return fmt.Errorf("otlp endpoint %q: want an http:// or https:// URL", c.Endpoint)
	case c.Service == "":
		return errors.New("otlp config: service name is empty")
	case c.QueueSize < 1:
		return fmt.Errorf("otlp config: queue size %d: want at least 1", c.QueueSize)
	case c.Timeout <= 0:
		return fmt.Errorf("otlp config: timeout %v: want above 0", c.Timeout)
	case c.LogEvery < 0:
		return fmt.Errorf("otlp config: log every %v is negative", c.LogEvery)
	}
	return nil
}

// Stats counts the traces an exporter handled.
type Stats struct {
	Exported int64 // traces the receiver accepted
	Dropped  int64 // traces not exported: the queue was full, the export failed, or Close ran out of time
	Spans    int64 // spans the receiver accepted
	// DroppedSpans counts the spans of the dropped traces.
	DroppedSpans int64
}

// Exporter sends traces to an OTLP/HTTP receiver from one goroutine.
// Export may be called from many goroutines at once; Close once, after
// the last Export.
type Exporter struct {
	cfg      Config
	exporter *otlptrace.Exporter
	provider *sdktrace.TracerProvider
	spans    *collector
	tracer   trace.Tracer

	mu     sync.Mutex // guards queue sends against Close
	closed bool
	queue  chan []sdktrace.ReadOnlySpan // the spans of one trace each

	ctx    context.Context // ends when Close gives up on the queue
	cancel context.CancelFunc
	done   chan struct{}

	exported, dropped, sent, droppedSpans atomic.Int64
	lastLog                               atomic.Int64 // unix nanoseconds of the last log record
}

// New starts an exporter to cfg.Endpoint. It does not contact the
// receiver: a receiver that is down costs dropped traces, never an error
// here or a wait in a run.
func New(cfg Config) (*Exporter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("otlp endpoint %q: %w", cfg.Endpoint, err)
	}
	headers := map[string]string{} // never nil: an empty map replaces the environment's
	for k, v := range cfg.Headers {
		headers[k] = v
	}
	path := u.Path
	if path == "" || path == "/" {
		path = "/v1/traces"
	}
	// Every setting is explicit so that the exporter's own
	// OTEL_EXPORTER_OTLP_* variables change nothing that matters here.
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEndpoint(u.Host),
		otlptracehttp.WithURLPath(path),
		otlptracehttp.WithTimeout(cfg.Timeout),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression),
		otlptracehttp.WithHeaders(headers),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{
			Enabled: true, InitialInterval: 200 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: cfg.Timeout,
		}),
	}
	if u.Scheme == "http" {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter for %s: %w", cfg.Endpoint, err)
	}
	attrs := []attribute.KeyValue{semconv.ServiceNameKey.String(cfg.Service)}
	if cfg.Version != "" {
		attrs = append(attrs, semconv.ServiceVersionKey.String(cfg.Version))
	}
	spans := &collector{spans: map[trace.TraceID][]sdktrace.ReadOnlySpan{}}
	e := &Exporter{
		cfg:      cfg,
		exporter: exp,
		spans:    spans,
		provider: sdktrace.NewTracerProvider(
			sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, attrs...)),
			sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{
				AttributeValueLengthLimit: -1, AttributeCountLimit: 128, EventCountLimit: 128, LinkCountLimit: 128,
				AttributePerEventCountLimit: 128, AttributePerLinkCountLimit: 128,
			}),
			sdktrace.WithSpanProcessor(spans),
		),
		queue: make(chan []sdktrace.ReadOnlySpan, cfg.QueueSize),
		done:  make(chan struct{}),
	}
	e.tracer = e.provider.Tracer("github.com/delegatelab/delegate/telemetry")
	e.ctx, e.cancel = context.WithCancel(context.Background())
	go e.run()
	return e, nil
}

// Export turns a finished trace into spans and queues them for export; it
// never waits on the receiver. The caller may change the trace once it
// returns. When the queue is full, or the exporter closed, the trace is
// dropped and counted.
func (e *Exporter) Export(t *delegate.Trace) {
	if t == nil || t.Root == nil {
		return
	}
	e.queueTrace(record(e.tracer, t, e.cfg.Provider))
}

// queueTrace queues the ended spans of trace id for export.
// When the queue is full or the exporter closed, it drops and counts them.
func (e *Exporter) queueTrace(id trace.TraceID) {
	spans := e.spans.take(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		select {
		case e.queue <- spans:
			return
		default:
		}
	}
	e.drop(len(spans), "otlp export queue full; trace dropped", nil)
}

// run exports queued traces one by one until the queue is closed and
// empty, or Close gives up.
func (e *Exporter) run() {
	defer close(e.done)
	for spans := range e.queue {
		if e.ctx.Err() != nil {
			e.drop(len(spans), "", nil)
			continue
		}
		if err := e.exporter.ExportSpans(e.ctx, spans); err != nil {
			e.drop(len(spans), "otlp export failed; trace dropped", err)
			continue
		}
		e.exported.Add(1)
		e.sent.Add(int64(len(spans)))
	}
}

// drop counts a dropped trace of n spans and logs why, at most once per
// LogEvery. An empty msg counts without logging.
func (e *Exporter) drop(n int, msg string, err error) {
	total := e.dropped.Add(1)
	spans := e.droppedSpans.Add(int64(n))
	if msg == "" || e.cfg.Log == nil {
		return
	}
	now := time.Now().UnixNano()
	last := e.lastLog.Load()
	if now-last < int64(e.cfg.LogEvery) || !e.lastLog.CompareAndSwap(last, now) {
		return
	}
	args := []any{"endpoint", e.cfg.Endpoint, "dropped", total, "dropped_spans", spans}
	if err != nil {
		args = append(args, "err", err)
	}
	e.cfg.Log.Warn(msg, args...)
}

// Stats returns what the exporter has done so far.
func (e *Exporter) Stats() Stats {
	return Stats{Exported: e.exported.Load(), Dropped: e.dropped.Load(), Spans: e.sent.Load(), DroppedSpans: e.droppedSpans.Load()}
}

// Close exports the traces still queued until ctx ends, then drops the
// rest, and stops the exporter. It returns ctx's error when it gave up
// on traces, and always within ctx's deadline plus an instant.
func (e *Exporter) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	close(e.queue)
	e.mu.Unlock()

	var err error
	select {
	case <-e.done:
	case <-ctx.Done():
		err = ctx.Err()
		e.cancel() // the export in flight returns, the queued traces are counted
		<-e.done
	}
	e.cancel()
	sctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 100*time.Millisecond)
	defer stop()
	// Both only release what they hold: nothing is left to send.
	err = errors.Join(err, e.provider.Shutdown(sctx), e.exporter.Shutdown(sctx))
	if err != nil {
		return fmt.Errorf("otlp exporter for %s: close: %w", e.cfg.Endpoint, err)
	}
	return nil
}

// collector holds the ended spans of the traces being converted, by
// trace ID, until their converter takes them. Traces may be converted
// concurrently.
type collector struct {
	mu    sync.Mutex
	spans map[trace.TraceID][]sdktrace.ReadOnlySpan
}

func (c *collector) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (c *collector) OnEnd(s sdktrace.ReadOnlySpan) {
	id := s.SpanContext().TraceID()
	c.mu.Lock()
	c.spans[id] = append(c.spans[id], s)
	c.mu.Unlock()
}

func (c *collector) Shutdown(context.Context) error   { return nil }
func (c *collector) ForceFlush(context.Context) error { return nil }

// take returns the spans of trace id and forgets them.
func (c *collector) take(id trace.TraceID) []sdktrace.ReadOnlySpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.spans[id]
	delete(c.spans, id)
	return s
}

// Strategy returns s with each run's trace exported by e as the run
// returns. Runs go on whatever the exporter does.
func (e *Exporter) Strategy(s delegate.Strategy) delegate.Strategy {
	return exported{Strategy: s, e: e}
}

type exported struct {
	delegate.Strategy
	e *Exporter
}

func (x exported) Run(ctx context.Context, request string, events chan<- delegate.Event) (*delegate.Trace, error) {
	t, err := x.Strategy.Run(ctx, request, events)
	x.e.Export(t)
	return t, err
}
