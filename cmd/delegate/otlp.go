package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/telemetry"
	"github.com/delegatelab/delegate/train"
)

// otlpCloseTimeout bounds how long a command waits, after its work, for
// the traces still queued for an OTLP receiver.
const otlpCloseTimeout = 3 * time.Second

// otlpUsage is the help of every command's --otlp flag.
const otlpUsage = "export each run's trace as OpenTelemetry spans to this OTLP/HTTP receiver (http://localhost:4318); never slows or fails the command (docs/telemetry.md)"

// otlpSink is a command's exporter of --otlp. A nil sink exports nothing.
type otlpSink struct {
	e   *telemetry.Exporter
	log *slog.Logger
}

// otlpHeadersEnv holds the headers of every export request, as
// OpenTelemetry's exporters read it: key=value pairs, comma-separated,
// values URL-encoded.
const otlpHeadersEnv = "OTEL_EXPORTER_OTLP_HEADERS"

// openOTLP starts the exporter to endpoint; "" gives a nil sink.
// provider names each model's gen_ai.provider.name.
func openOTLP(endpoint string, getenv env, provider telemetry.Provider, log *slog.Logger) (*otlpSink, error) {
	if endpoint == "" {
		return nil, nil
	}
	headers, err := parseHeaders(getenv(otlpHeadersEnv))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", otlpHeadersEnv, err)
	}
	e, err := telemetry.New(telemetry.Config{Endpoint: endpoint, Headers: headers, Log: log, Provider: provider})
	if err != nil {
		return nil, err
	}
	return &otlpSink{e: e, log: log}, nil
}

// parseHeaders reads "k1=v1,k2=v2" with URL-encoded values. An error
// names the pair's key, never its value, which may be a secret.
func parseHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("a pair without key=value (key %q)", k)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("header %s: the value is not URL-encoded", k)
		}
		h[k] = dv
	}
	return h, nil
}

// providers names the provider of each configured model: openai for an
// OpenAI-compatible endpoint, delegate for an in-process model.
func (c *Config) providers() telemetry.Provider {
	m := map[string]string{}
	for name, mc := range c.Models {
		p := "openai"
		if mc.Kind == "local" {
			p = inProcess
		}
		m[name] = p
		if mc.Model != "" {
			m[mc.Model] = p
		}
	}
	return func(model string) string {
		if p, ok := m[model]; ok {
			return p
		}
		return telemetry.ProviderOther
	}
}

// inProcess is the gen_ai.provider.name of this project's own models.
const inProcess = "delegate"

// export queues a trace; it never waits.
func (s *otlpSink) export(t *delegate.Trace) {
	if s != nil {
		s.e.Export(t)
	}
}

// strategy returns st with its traces exported.
func (s *otlpSink) strategy(st delegate.Strategy) delegate.Strategy {
	if s == nil || st == nil {
		return st
	}
	return s.e.Strategy(st)
}

// close sends what is queued, for at most otlpCloseTimeout, and logs what
// was not sent.
func (s *otlpSink) close() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), otlpCloseTimeout)
	defer cancel()
	err := s.e.Close(ctx)
	st := s.e.Stats()
	if err != nil || st.Dropped > 0 {
		s.log.Warn("otlp: traces not exported", "dropped", st.Dropped, "exported", st.Exported, "err", err)
	}
}

// traceRollouts has process's baseline and rollouts export their traces
// to endpoint ("": none). The returned function sends what is queued.
func traceRollouts(endpoint string, getenv env, cfg *Config, log *slog.Logger, baseline *delegate.Strategy, policies *rollout.Policies) (func(), error) {
	s, err := openOTLP(endpoint, getenv, cfg.providers(), log)
	if err != nil || s == nil {
		return func() {}, err
	}
	*baseline = s.strategy(*baseline)
	inner := *policies
	*policies = func(item, k int) (delegate.Strategy, error) {
		st, err := inner(item, k)
		return s.strategy(st), err
	}
	return s.close, nil
}

// traceArms has bench's arms export their traces to endpoint ("": none).
// The returned function sends what is queued.
func traceArms(endpoint string, getenv env, cfg *Config, log *slog.Logger, arms []bench.Arm) (func(), error) {
	s, err := openOTLP(endpoint, getenv, cfg.providers(), log)
	if err != nil || s == nil {
		return func() {}, err
	}
	for i := range arms {
		arms[i].Strategy = s.strategy(arms[i].Strategy)
	}
	return s.close, nil
}

// traceTrain has every strategy run of an in-process training job export
// its trace to endpoint ("": none). The returned function sends what is
// queued.
func traceTrain(endpoint string, getenv env, log *slog.Logger, cfg *train.Config) (func(), error) {
	s, err := openOTLP(endpoint, getenv, func(string) string { return inProcess }, log)
	if err != nil || s == nil {
		return func() {}, err
	}
	cfg.Traces = s.export
	return s.close, nil
}
