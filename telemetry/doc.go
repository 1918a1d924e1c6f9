// Package telemetry exports run traces to an OpenTelemetry collector over
// OTLP/HTTP, as spans under the GenAI semantic conventions. A run's root
// is an invoke_agent span, each model call a chat span, and each call
// made for a tool call an execute_tool span around an invoke_agent span
// of the sub-agent. Costs and other figures of this project are
// attributes under the delegate. prefix. The exporter never blocks a run:
// traces wait in a bounded queue, and those that do not fit, or whose
// export fails, are counted and dropped.
package telemetry
