package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/pretrain"
	"github.com/delegatelab/delegate/rollout"
	"github.com/delegatelab/delegate/server"
	"github.com/delegatelab/delegate/telemetry"
	"github.com/delegatelab/delegate/train"
	"github.com/delegatelab/delegate/trajectory/gateway"
	"github.com/delegatelab/delegate/trajectory/openenv"
)

// otlpCloseTimeout bounds how long a command waits, after its work, for
// the traces still queued for an OTLP receiver.
const otlpCloseTimeout = 3 * time.Second

// otlpUsage is the help of every command's --otlp flag.
const otlpUsage = "export each run's trace as OpenTelemetry spans to this OTLP/HTTP receiver (http://localhost:4318); never slows or fails the command (docs/telemetry.md)"

// otlpServeUsage is the help of a server's --otlp flag.
const otlpServeUsage = "export each served call as OpenTelemetry spans to this OTLP/HTTP receiver (http://localhost:4318); never slows or fails a request (docs/telemetry.md)"

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
	cfg := telemetry.DefaultConfig()
	cfg.Endpoint, cfg.Headers, cfg.Log, cfg.Provider = endpoint, headers, log, provider
	e, err := telemetry.New(cfg)
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
		s.log.Warn("otlp: traces not exported", "dropped", st.Dropped, "dropped_spans", st.DroppedSpans, "exported", st.Exported, "err", err)
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

// tracePretrain has every grading run of pretraining export its trace
// to endpoint ("": none). The returned function sends what is queued.
func tracePretrain(endpoint string, getenv env, log *slog.Logger, f *pretrain.Options) (func(), error) {
	s, err := openOTLP(endpoint, getenv, func(string) string { return inProcess }, log)
	if err != nil || s == nil {
		return func() {}, err
	}
	f.Traces = s.export
	return s.close, nil
}

// served returns the server observer that exports each chat completion
// as a chat span. prices, keyed by served model name, price it.
func (s *otlpSink) served(prices map[string]delegate.Price) func(server.Completion) {
	return func(c server.Completion) { s.e.ExportCall(servedCall(c, prices)) }
}

// servedCall is the span's view of a chat completion a server answered.
func servedCall(c server.Completion, prices map[string]delegate.Price) telemetry.Call {
	call := telemetry.Call{Model: c.Model, Start: c.Start, Latency: c.Latency, Stream: c.Stream, Status: c.Status}
	call.Error, call.ErrorType = telemetry.StatusError(c.Status)
	if r := c.Request; r != nil {
		call.Temperature, call.MaxTokens, call.Choices = r.Temperature, r.MaxTokens, r.N
	}
	if r := c.Response; r != nil {
		call.ResponseModel, call.ResponseID, call.Usage, call.PolicyVersion = r.Model, r.ID, r.Usage, r.PolicyVersion
		call.Cost = prices[c.Model].Cost(r.Usage)
		for _, ch := range r.Choices {
			call.FinishReasons = append(call.FinishReasons, ch.FinishReason)
		}
	}
	return call
}

// sessions returns the gateway's Ended hook that exports each session.
func (s *otlpSink) sessions() func(*gateway.Finished, bool) {
	return func(fin *gateway.Finished, expired bool) { s.e.ExportSession(sessionOf(fin, expired)) }
}

// sessionOf is the span's view of a gateway session. Its ID is the first
// digits of the stored digest, as the gateway's answers show it: never
// the session id, which is a key.
func sessionOf(fin *gateway.Finished, expired bool) telemetry.Session {
	ts := telemetry.Session{ID: fin.Key[:min(16, len(fin.Key))], Task: fin.Task.ID, Group: fin.Group,
		Start: fin.Created, Latency: fin.Finished.Sub(fin.Created), Correct: fin.Correct, Expired: expired}
	if !expired {
		r := fin.Reward
		ts.Reward = &r
	}
	for _, c := range fin.Calls {
		tc := telemetry.Call{Model: c.Model, Role: c.Role, Start: c.Start, Latency: c.Latency,
			Usage: c.Usage, Cost: c.Cost, FinishReasons: []string{c.FinishReason}, Temperature: c.Request.Temperature,
			MaxTokens: c.Request.MaxTokens, PolicyVersion: c.PolicyVersion}
		if c.Failed {
			// The gateway stored the error text without credentials.
			tc.Error, tc.ErrorType, tc.FinishReasons = c.Error, strconv.Itoa(c.Status), nil
		}
		ts.Calls = append(ts.Calls, tc)
	}
	return ts
}

// episodes returns the environment's Ended hook that exports each episode.
func (s *otlpSink) episodes() func(openenv.EpisodeRecord) {
	return func(r openenv.EpisodeRecord) { s.e.ExportEpisode(episodeOf(r)) }
}

// episodeOf is the span's view of an environment's episode.
func episodeOf(r openenv.EpisodeRecord) telemetry.Episode {
	st := r.State
	ep := telemetry.Episode{Dataset: st.Dataset, Task: st.ProblemID, Start: r.Start, Latency: r.Latency,
		Ended: st.Done, Correct: st.Correct, Reward: st.Reward, Cost: st.Spend.Dollars}
	if st.EpisodeID != nil {
		ep.ID = *st.EpisodeID
	}
	for _, s := range r.Steps {
		step := telemetry.Step{Tool: s.Tool, CallID: s.CallID, Start: s.Start, Latency: s.Latency}
		if s.Error != nil {
			step.Error, step.ErrorType = s.Error.Message, s.Error.ErrorType
		}
		if n := s.Subagent; n != nil {
			c := subagentCall(n)
			step.Agent, step.Call = n.Role, &c
		}
		for _, n := range s.Parallel {
			step.Agent = n.Role
			step.Parallel = append(step.Parallel, subagentCall(n))
		}
		ep.Steps = append(ep.Steps, step)
	}
	return ep
}

// subagentCall is the span's view of one call of an episode's sub-agent.
func subagentCall(n *delegate.Node) telemetry.Call {
	c := telemetry.Call{Model: n.Model, Role: n.Role, Start: n.Start, Latency: n.Latency, Usage: n.Usage,
		Cost: n.Cost, PolicyVersion: n.PolicyVersion, Error: n.Error, ErrorType: n.ErrorType}
	if n.FinishReason != "" {
		c.FinishReasons = []string{n.FinishReason}
	}
	if n.Error != "" && n.ErrorType == "" && n.ErrorStatus != 0 {
		c.ErrorType = strconv.Itoa(n.ErrorStatus)
	}
	return c
}

// call queues one model call made outside a strategy run; it never waits.
func (s *otlpSink) call(c telemetry.Call) {
	if s != nil {
		s.e.ExportCall(c)
	}
}

// pingCall is the span's view of config check's ping of a model.
func pingCall(model string, price delegate.Price, req *delegate.Request, start time.Time, resp *delegate.Response, err error) telemetry.Call {
	c := telemetry.Call{Model: model, Start: start, Latency: time.Since(start), MaxTokens: req.MaxTokens}
	if err != nil {
		status, typ := delegate.ErrorClass(err)
		if typ == "" && status != 0 {
			typ = strconv.Itoa(status)
		}
		c.Error, c.ErrorType = err.Error(), typ
		return c
	}
	c.ResponseModel, c.ResponseID, c.Usage, c.Cost = resp.Model, resp.ID, resp.Usage, price.Cost(resp.Usage)
	for _, ch := range resp.Choices {
		c.FinishReasons = append(c.FinishReasons, ch.FinishReason)
	}
	return c
}
