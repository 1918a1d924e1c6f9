package main

import (
	"context"
	"log/slog"
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

// openOTLP starts the exporter to endpoint; "" gives a nil sink.
// provider names each model's gen_ai.provider.name.
func openOTLP(endpoint string, provider telemetry.Provider, log *slog.Logger) (*otlpSink, error) {
	if endpoint == "" {
		return nil, nil
	}
	e, err := telemetry.New(telemetry.Config{Endpoint: endpoint, Log: log, Provider: provider})
	if err != nil {
		return nil, err
	}
	return &otlpSink{e: e, log: log}, nil
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
func traceRollouts(endpoint string, cfg *Config, log *slog.Logger, baseline *delegate.Strategy, policies *rollout.Policies) (func(), error) {
	s, err := openOTLP(endpoint, cfg.providers(), log)
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
func traceArms(endpoint string, cfg *Config, log *slog.Logger, arms []bench.Arm) (func(), error) {
	s, err := openOTLP(endpoint, cfg.providers(), log)
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
func traceTrain(endpoint string, log *slog.Logger, cfg *train.Config) (func(), error) {
	s, err := openOTLP(endpoint, func(string) string { return inProcess }, log)
	if err != nil || s == nil {
		return func() {}, err
	}
	cfg.Traces = s.export
	return s.close, nil
}
