package telemetry

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/delegatelab/delegate"
)

// Attributes of this project, beside the GenAI conventions' own.
const (
	AttrStrategy     = attribute.Key("delegate.strategy") // the run's strategy
	AttrNode         = attribute.Key("delegate.node")     // the trace node's name: "turn 1", "delegate call_1"
	AttrNodeID       = attribute.Key("delegate.node.id")  // the trace node's ID
	AttrRole         = attribute.Key("delegate.role")     // the call's role: strong, weak, subagent...
	AttrCost         = attribute.Key("delegate.cost.usd") // dollars at the configured prices
	AttrCachedTokens = attribute.Key("delegate.usage.cached_tokens")
	AttrRetries      = attribute.Key("delegate.retries")        // retries of a call, or of a run's calls
	AttrCalls        = attribute.Key("delegate.calls")          // model calls of a run
	AttrErrors       = attribute.Key("delegate.errors")         // failed calls of a run
	AttrFailure      = attribute.Key("delegate.failure")        // why a run has no proper answer
	AttrPolicy       = attribute.Key("delegate.policy_version") // the weights' version that answered
)

// ProviderOther is gen_ai.provider.name when the caller names none.
const ProviderOther = "_OTHER"

// Provider names the gen_ai.provider.name of a model: "openai" for an
// OpenAI-compatible endpoint, a custom name for an in-process model.
type Provider func(model string) string

// providerOf is p's name for model, ProviderOther without p.
func providerOf(p Provider, model string) string {
	if p == nil {
		return ProviderOther
	}
	return p(model)
}

// record turns a trace into spans through tracer and returns their trace ID.
// The spans keep the trace's own start times and latencies.
func record(tracer trace.Tracer, t *delegate.Trace, provider Provider) trace.TraceID {
	r := &recorder{tracer: tracer, provider: func(m string) string { return providerOf(provider, m) }}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIAgentNameKey.String(t.Strategy),
		AttrStrategy.String(t.Strategy),
		semconv.GenAIUsageInputTokensKey.Int(t.Total.Usage.PromptTokens),
		semconv.GenAIUsageOutputTokensKey.Int(t.Total.Usage.CompletionTokens),
		AttrCachedTokens.Int(t.Total.Usage.CachedTokens),
		AttrCost.Float64(t.Total.Cost),
		AttrCalls.Int(t.Total.Calls),
		AttrErrors.Int(t.Total.Errors),
		AttrRetries.Int(t.Total.Retries),
	}
	if t.Failure != "" {
		kind, _, _ := strings.Cut(t.Failure, ": ")
		attrs = append(attrs, AttrFailure.String(t.Failure), semconv.ErrorTypeKey.String(kind))
	}
	ctx, span := tracer.Start(context.Background(), "invoke_agent "+t.Strategy,
		trace.WithTimestamp(t.Start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	if t.Failure != "" {
		span.SetStatus(codes.Error, t.Failure)
	}
	r.children(ctx, t.Root)
	span.End(trace.WithTimestamp(t.Start.Add(t.Latency)))
	return span.SpanContext().TraceID()
}

type recorder struct {
	tracer   trace.Tracer
	provider Provider
}

// children records the children of n under ctx's span. A child named for
// a tool call that an earlier sibling made ("delegate call_1" for the call
// call_1) is that tool's execution.
func (r *recorder) children(ctx context.Context, n *delegate.Node) {
	calls := map[string]delegate.ToolCall{} // by ID, from the siblings seen so far
	for _, c := range n.Children {
		tc, isTool := toolCallOf(c, calls)
		switch {
		case isTool:
			r.tool(ctx, c, tc)
		case c.IsCall():
			r.chat(ctx, c)
		default:
			r.group(ctx, c)
		}
		if c.Output != nil {
			for _, tc := range c.Output.ToolCalls {
				calls[tc.ID] = tc
			}
		}
	}
}

// toolCallOf finds the tool call a node was made for: one whose ID ends
// the node's name after a space.
func toolCallOf(n *delegate.Node, calls map[string]delegate.ToolCall) (delegate.ToolCall, bool) {
	i := strings.LastIndexByte(n.Name, ' ')
	if i < 0 {
		return delegate.ToolCall{}, false
	}
	tc, ok := calls[n.Name[i+1:]]
	return tc, ok && tc.ID != ""
}

// group records a node that holds other steps.
func (r *recorder) group(ctx context.Context, n *delegate.Node) {
	ctx, span := r.tracer.Start(ctx, n.Name, trace.WithTimestamp(n.Start), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrNode.String(n.Name), AttrNodeID.Int(n.ID)))
	if n.Error != "" {
		span.SetStatus(codes.Error, n.Error)
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(n)))
	}
	r.children(ctx, n)
	span.End(trace.WithTimestamp(n.Start.Add(n.Latency)))
}

// tool records the execution of tool call tc as an execute_tool span.
// When a model answered it, the span holds an invoke_agent span of that model's role around its chat span.
// A tool call refused before any model call is an execute_tool span with its error.
func (r *recorder) tool(ctx context.Context, n *delegate.Node, tc delegate.ToolCall) {
	end := trace.WithTimestamp(n.Start.Add(n.Latency))
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolNameKey.String(tc.Name),
		semconv.GenAIToolCallIDKey.String(tc.ID),
		semconv.GenAIToolTypeKey.String("function"),
		AttrNode.String(n.Name), AttrNodeID.Int(n.ID),
	}
	if n.IsCall() {
		attrs = append(attrs, AttrCost.Float64(n.Cost))
	}
	ctx, span := r.tracer.Start(ctx, "execute_tool "+tc.Name, trace.WithTimestamp(n.Start),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	if n.Error != "" {
		span.SetStatus(codes.Error, n.Error)
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(n)))
	}
	if n.IsCall() {
		actx, agent := r.tracer.Start(ctx, "invoke_agent "+n.Role, trace.WithTimestamp(n.Start),
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
				semconv.GenAIOperationNameInvokeAgent,
				semconv.GenAIAgentNameKey.String(n.Role),
				semconv.GenAIRequestModelKey.String(n.Model),
				semconv.GenAIUsageInputTokensKey.Int(n.Usage.PromptTokens),
				semconv.GenAIUsageOutputTokensKey.Int(n.Usage.CompletionTokens),
				AttrRole.String(n.Role),
				AttrCost.Float64(n.Cost),
			))
		if n.Error != "" {
			agent.SetStatus(codes.Error, n.Error)
			agent.SetAttributes(semconv.ErrorTypeKey.String(errorType(n)))
		}
		r.chat(actx, n)
		agent.End(end)
	}
	r.children(ctx, n)
	span.End(end)
}

// chat records one model call.
func (r *recorder) chat(ctx context.Context, n *delegate.Node) {
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(r.provider(n.Model)),
		semconv.GenAIRequestModelKey.String(n.Model),
		semconv.GenAIUsageInputTokensKey.Int(n.Usage.PromptTokens),
		semconv.GenAIUsageOutputTokensKey.Int(n.Usage.CompletionTokens),
		semconv.GenAIUsageCacheReadInputTokensKey.Int(n.Usage.CachedTokens),
		AttrRole.String(n.Role),
		AttrNode.String(n.Name),
		AttrNodeID.Int(n.ID),
		AttrCost.Float64(n.Cost),
		AttrRetries.Int(n.Retries),
	}
	if n.FinishReason != "" {
		attrs = append(attrs, semconv.GenAIResponseFinishReasonsKey.StringSlice([]string{n.FinishReason}))
	}
	if n.PolicyVersion != nil {
		attrs = append(attrs, AttrPolicy.Int(*n.PolicyVersion))
	}
	if host, port, ok := hostPort(n.Endpoint); ok {
		attrs = append(attrs, semconv.ServerAddressKey.String(host))
		if port > 0 {
			attrs = append(attrs, semconv.ServerPortKey.Int(port))
		}
	}
	_, span := r.tracer.Start(ctx, "chat "+n.Model, trace.WithTimestamp(n.Start),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if n.Error != "" {
		span.SetStatus(codes.Error, n.Error)
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(n)))
	}
	span.End(trace.WithTimestamp(n.Start.Add(n.Latency)))
}

// errorType is a node's error.type: the error's kind or HTTP status, or
// _OTHER when the trace does not classify it.
func errorType(n *delegate.Node) string {
	switch {
	case n.ErrorType != "":
		return n.ErrorType
	case n.ErrorStatus != 0:
		return strconv.Itoa(n.ErrorStatus)
	}
	return "_OTHER"
}

// hostPort reads server.address and server.port from a replica's URL.
func hostPort(endpoint string) (string, int, bool) {
	if endpoint == "" {
		return "", 0, false
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() == "" {
		return "", 0, false
	}
	port, _ := strconv.Atoi(u.Port()) // "" or not a number: no port
	return u.Hostname(), port, true
}
