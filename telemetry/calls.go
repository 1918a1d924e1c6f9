package telemetry

import (
	"context"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/delegatelab/delegate"
)

// More attributes of this project, for calls outside strategy runs.
const (
	AttrStream    = attribute.Key("delegate.stream")     // the completion was streamed
	AttrReward    = attribute.Key("delegate.reward")     // a session's or episode's reward
	AttrCorrect   = attribute.Key("delegate.correct")    // the verifier's word
	AttrExpired   = attribute.Key("delegate.expired")    // a session ended by its time-to-live
	AttrTask      = attribute.Key("delegate.task.id")    // the task's ID
	AttrGroup     = attribute.Key("delegate.group")      // a gateway session's group key
	AttrEpisode   = attribute.Key("delegate.episode.id") // an environment's episode ID
	AttrDataset   = attribute.Key("delegate.dataset")    // the dataset an episode's task is from
	AttrSteps     = attribute.Key("delegate.steps")      // tool calls of an episode
	AttrEnded     = attribute.Key("delegate.ended")      // an episode ended, rather than being left
	AttrHTTPCode  = semconv.HTTPResponseStatusCodeKey
	attrChoiceCnt = semconv.GenAIRequestChoiceCountKey
)

// Call is one model call made outside a strategy run.
// A server answered it, a gateway recorded it, or an environment's sub-agent made it.
// Zero fields are left out of its span.
type Call struct {
	Model         string // the model the request named
	ResponseModel string // the model the response named
	ResponseID    string
	Role          string
	Start         time.Time
	Latency       time.Duration
	Usage         delegate.Usage
	Cost          float64  // dollars at the configured prices
	FinishReasons []string // one per choice
	Temperature   *float64
	MaxTokens     int
	Choices       int // choices asked for; above 1 only is it exported
	Stream        bool
	PolicyVersion *int
	// Status is the HTTP status a server answered; 0 for a client's call.
	Status int
	// Error says why the call failed, "" when it did not; ErrorType is
	// its kind or HTTP status.
	Error, ErrorType string
}

// Session is a gateway session: the calls of one agent's task.
// It is exported as a session span around a chat span per call.
type Session struct {
	// ID is gen_ai.conversation.id. Never a capability: the gateway's
	// session id is a key, so this is a digest of it.
	ID      string
	Task    string // the task's ID
	Group   string
	Start   time.Time
	Latency time.Duration
	Reward  *float64 // nil when it expired
	Correct *bool
	Expired bool
	Calls   []Call
}

// Episode is an environment's episode, exported as an episode span
// around an execute_tool span per step.
type Episode struct {
	ID      string
	Dataset string
	Task    string // the task's ID
	Start   time.Time
	Latency time.Duration
	Ended   bool // answered, or ended by its step or spend limit
	Correct *bool
	Reward  *float64
	Cost    float64 // dollars of both roles
	Steps   []Step
}

// Step is one tool call of an episode.
type Step struct {
	Tool, CallID     string
	Start            time.Time
	Latency          time.Duration
	Error, ErrorType string // a tool error, "" when it answered
	// Agent is the role of the model the tool invoked; Call its call,
	// nil when the step made none.
	Agent string
	Call  *Call
	// Parallel are the calls of a step that asked several questions at
	// once, in their order. Each is exported as Call is.
	Parallel []Call
}

// ExportCall queues one call as a trace of a chat span. It never waits.
// The span's kind is SERVER when Status says a server answered it, CLIENT otherwise.
func (e *Exporter) ExportCall(c Call) {
	e.queueTrace(e.chatSpan(context.Background(), c, c.Status != 0))
}

// ExportSession queues a gateway session as one trace. It never waits.
func (e *Exporter) ExportSession(s Session) {
	in, out, cost := 0, 0, 0.0
	for _, c := range s.Calls {
		in, out, cost = in+c.Usage.PromptTokens, out+c.Usage.CompletionTokens, cost+c.Cost
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIConversationIDKey.String(s.ID), AttrTask.String(s.Task), AttrGroup.String(s.Group),
		semconv.GenAIUsageInputTokensKey.Int(in), semconv.GenAIUsageOutputTokensKey.Int(out),
		AttrCost.Float64(cost), AttrCalls.Int(len(s.Calls)), AttrExpired.Bool(s.Expired),
	}
	if s.Reward != nil {
		attrs = append(attrs, AttrReward.Float64(*s.Reward))
	}
	if s.Correct != nil {
		attrs = append(attrs, AttrCorrect.Bool(*s.Correct))
	}
	ctx, span := e.tracer.Start(context.Background(), "session", trace.WithTimestamp(s.Start),
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	for _, c := range s.Calls {
		e.chatSpan(ctx, c, true, semconv.GenAIConversationIDKey.String(s.ID))
	}
	span.End(trace.WithTimestamp(s.Start.Add(s.Latency)))
	e.queueTrace(span.SpanContext().TraceID())
}

// ExportEpisode queues an environment's episode as one trace. It never
// waits.
func (e *Exporter) ExportEpisode(ep Episode) {
	attrs := []attribute.KeyValue{
		AttrEpisode.String(ep.ID), AttrDataset.String(ep.Dataset), AttrTask.String(ep.Task),
		AttrSteps.Int(len(ep.Steps)), AttrEnded.Bool(ep.Ended), AttrCost.Float64(ep.Cost),
	}
	if ep.Reward != nil {
		attrs = append(attrs, AttrReward.Float64(*ep.Reward))
	}
	if ep.Correct != nil {
		attrs = append(attrs, AttrCorrect.Bool(*ep.Correct))
	}
	ctx, span := e.tracer.Start(context.Background(), "episode", trace.WithTimestamp(ep.Start),
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	for _, st := range ep.Steps {
		e.stepSpan(ctx, st)
	}
	span.End(trace.WithTimestamp(ep.Start.Add(ep.Latency)))
	e.queueTrace(span.SpanContext().TraceID())
}

// stepSpan records one step as an execute_tool span.
// Each model call the tool made is an invoke_agent span of its role around the chat.
func (e *Exporter) stepSpan(ctx context.Context, st Step) {
	end := trace.WithTimestamp(st.Start.Add(st.Latency))
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolNameKey.String(st.Tool),
		semconv.GenAIToolCallIDKey.String(st.CallID), semconv.GenAIToolTypeKey.String("function"),
	}
	if st.Call != nil || len(st.Parallel) > 0 {
		cost := 0.0
		if st.Call != nil {
			cost = st.Call.Cost
		}
		for _, c := range st.Parallel {
			cost += c.Cost
		}
		attrs = append(attrs, AttrCost.Float64(cost))
	}
	ctx, span := e.tracer.Start(ctx, "execute_tool "+st.Tool, trace.WithTimestamp(st.Start),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	failed(span, st.Error, st.ErrorType)
	if st.Call != nil {
		e.agentSpan(ctx, st.Agent, *st.Call)
	}
	// Parallel calls overlap: each span keeps its own start and latency.
	for _, c := range st.Parallel {
		e.agentSpan(ctx, st.Agent, c)
	}
	span.End(end)
}

// agentSpan records a call of the agent of role under ctx's span: an
// invoke_agent span around its chat span.
func (e *Exporter) agentSpan(ctx context.Context, role string, c Call) {
	actx, agent := e.tracer.Start(ctx, "invoke_agent "+role, trace.WithTimestamp(c.Start),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
			semconv.GenAIOperationNameInvokeAgent, semconv.GenAIAgentNameKey.String(role),
			semconv.GenAIRequestModelKey.String(c.Model), AttrRole.String(role),
			semconv.GenAIUsageInputTokensKey.Int(c.Usage.PromptTokens),
			semconv.GenAIUsageOutputTokensKey.Int(c.Usage.CompletionTokens), AttrCost.Float64(c.Cost),
		))
	failed(agent, c.Error, c.ErrorType)
	e.chatSpan(actx, c, false)
	agent.End(trace.WithTimestamp(c.Start.Add(c.Latency)))
}

// chatSpan records one call under ctx's span, as a server's when served,
// and returns its trace ID.
func (e *Exporter) chatSpan(ctx context.Context, c Call, served bool, extra ...attribute.KeyValue) trace.TraceID {
	attrs := append([]attribute.KeyValue{
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(providerOf(e.cfg.Provider, c.Model)),
		semconv.GenAIRequestModelKey.String(c.Model),
		semconv.GenAIUsageInputTokensKey.Int(c.Usage.PromptTokens),
		semconv.GenAIUsageOutputTokensKey.Int(c.Usage.CompletionTokens),
		semconv.GenAIUsageCacheReadInputTokensKey.Int(c.Usage.CachedTokens),
		AttrCost.Float64(c.Cost),
	}, extra...)
	if c.ResponseModel != "" {
		attrs = append(attrs, semconv.GenAIResponseModelKey.String(c.ResponseModel))
	}
	if c.ResponseID != "" {
		attrs = append(attrs, semconv.GenAIResponseIDKey.String(c.ResponseID))
	}
	if len(c.FinishReasons) > 0 {
		attrs = append(attrs, semconv.GenAIResponseFinishReasonsKey.StringSlice(c.FinishReasons))
	}
	if c.Role != "" {
		attrs = append(attrs, AttrRole.String(c.Role))
	}
	if c.Temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperatureKey.Float64(*c.Temperature))
	}
	if c.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokensKey.Int(c.MaxTokens))
	}
	if c.Choices > 1 {
		attrs = append(attrs, attrChoiceCnt.Int(c.Choices))
	}
	if c.PolicyVersion != nil {
		attrs = append(attrs, AttrPolicy.Int(*c.PolicyVersion))
	}
	if c.Status != 0 {
		attrs = append(attrs, AttrHTTPCode.Int(c.Status), AttrStream.Bool(c.Stream))
	}
	kind := trace.SpanKindClient
	if served {
		kind = trace.SpanKindServer
	}
	_, span := e.tracer.Start(ctx, strings.TrimSpace("chat "+c.Model), trace.WithTimestamp(c.Start),
		trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	failed(span, c.Error, c.ErrorType)
	span.End(trace.WithTimestamp(c.Start.Add(c.Latency)))
	return span.SpanContext().TraceID()
}

// failed marks a span failed with msg, when there is one; typ is its
// error.type, _OTHER when empty.
func failed(span trace.Span, msg, typ string) {
	if msg == "" {
		return
	}
	if typ == "" {
		typ = "_OTHER"
	}
	span.SetStatus(codes.Error, msg)
	span.SetAttributes(semconv.ErrorTypeKey.String(typ))
}

// StatusError is the error message and error.type of an HTTP status a
// server answered; both "" for a success.
func StatusError(status int) (msg, typ string) {
	if status >= 200 && status < 300 {
		return "", ""
	}
	if status == 499 {
		return "the client went away", "499"
	}
	return "HTTP " + strconv.Itoa(status), strconv.Itoa(status)
}
