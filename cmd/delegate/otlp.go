package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/telemetry"
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

// openOTLP starts the exporter to endpoint; "" gives a nil sink. cfg
// (nil: none) names each model's provider: openai for an endpoint,
// delegate for an in-process model.
func openOTLP(endpoint string, cfg *Config, log *slog.Logger) (*otlpSink, error) {
	if endpoint == "" {
		return nil, nil
	}
	providers := map[string]string{}
	if cfg != nil {
		for name, m := range cfg.Models {
			p := "openai"
			if m.Kind == "local" {
				p = "delegate"
			}
			providers[name] = p
			if m.Model != "" {
				providers[m.Model] = p
			}
		}
	}
	e, err := telemetry.New(telemetry.Config{
		Endpoint: endpoint,
		Log:      log,
		Provider: func(model string) string {
			if p, ok := providers[model]; ok {
				return p
			}
			return telemetry.ProviderOther
		},
	})
	if err != nil {
		return nil, err
	}
	return &otlpSink{e: e, log: log}, nil
}

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
